// GGUF files written by llama.cpp's own tools (gguf-py's GGUFWriter, then llama-quantize --pure), made
// outside the repository by the commands in docs/gguf.md into $LATHE_GGUF_FIXTURE_DIR (skipped when unset):
//   tiny-110M-hf/                      a Hugging Face folder (config.json, model.safetensors, the Llama 2
//                                      tokenizer.json and tokenizer_config.json)
//   tiny-110M-F32.gguf                 the same model written by gguf-py's GGUFWriter, q/k permuted as
//                                      convert_hf_to_gguf.py permutes them, with the Llama 2 vocabulary
//   tiny-110M-Q8_0.gguf, -Q4_0.gguf    llama-quantize --pure tiny-110M-F32.gguf ... Q8_0 / Q4_0
//   tiny-110M-F32.llama-cpp-tokens.json  the fixture corpus tokenized by llama-server's /tokenize
// F32 loads as the folder's model (same weights, same logits, same greedy text), llama.cpp's Q8_0
// and Q4_0 codes and scales are bit for bit lathe's int8 / int4 quantisation of the folder's weights, and
// the file's tokenizer encodes the corpus as llama.cpp and the folder's tokenizer.json do.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "../e2e/cli_run.h"
#include "lathe/autograd/node.h"
#include "lathe/io/file_read.h"
#include "lathe/io/gguf.h"
#include "lathe/io/test_paths.h"
#include "lathe/io/tokenizer/gguf_tokenizer.h"
#include "lathe/models/model.h"
#include "lathe/ops/quant_linear.h"

namespace lathe {
namespace {

std::string fixture_dir() {
  const char* env = std::getenv("LATHE_GGUF_FIXTURE_DIR");
  return env ? env : "";
}

#define SKIP_WITHOUT_FIXTURES()                                                                          \
  if (fixture_dir().empty() || !std::filesystem::exists(fixture_dir() + "/tiny-110M-F32.gguf"))          \
  GTEST_SKIP() << "set LATHE_GGUF_FIXTURE_DIR to a folder made as docs/gguf.md says"

std::string hf() { return fixture_dir() + "/tiny-110M-hf"; }
std::string gguf(const char* type) { return fixture_dir() + "/tiny-110M-" + type + ".gguf"; }

double relative_error(const Tensor& a, const Tensor& b) {
  const auto av = a.to_vector(), bv = b.to_vector();
  double d2 = 0, b2 = 0;
  for (size_t i = 0; i < av.size(); ++i) {
    d2 += (double(av[i]) - bv[i]) * (double(av[i]) - bv[i]);
    b2 += double(bv[i]) * bv[i];
  }
  return std::sqrt(d2 / b2);
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  const Tensor ac = a.contiguous(), bc = b.contiguous();
  return ac.shape() == bc.shape() && ac.dtype() == bc.dtype() && std::memcmp(ac.raw_data(), bc.raw_data(), ac.nbytes()) == 0;
}

// Logits of a fixed prompt (the folder tokenizer's ids of a sentence).
Tensor logits_of(const Model& m, const std::vector<uint32_t>& ids) {
  NoGradGuard no_grad;
  Tensor t = Tensor::empty({1, static_cast<int64_t>(ids.size())}, DType::kI32);
  for (size_t i = 0; i < ids.size(); ++i) t.data<int32_t>()[i] = static_cast<int32_t>(ids[i]);
  return m.forward(t);
}

// A prompt of the file's own vocabulary: its tokenizer's ids of a sentence.
std::vector<uint32_t> prompt_ids() {
  return tokenizer::Tokenizer::from_files(tokenizer::gguf_tokenizer_files(GgufFile::open(gguf("F32"))))
      .encode_ids("Once upon a time, there was a little robot who", true);
}

TEST(GgufLlamaCpp, F32IsTheFolderModel) {
  SKIP_WITHOUT_FIXTURES();
  const auto st = Model::load(hf(), {.force_f32 = true});
  const auto gg = Model::load(gguf("F32"));
  std::map<std::string, Tensor> want;
  st->for_each_param([&](const std::string& n, const Tensor& t, ParamRole, int) { want[n] = t; });
  int n = 0;
  gg->for_each_param([&](const std::string& name, const Tensor& t, ParamRole, int) {
    ASSERT_TRUE(want.count(name)) << name;
    EXPECT_TRUE(same_bytes(t, want[name])) << name;  // q and k permuted back exactly
    ++n;
  });
  EXPECT_EQ(n, static_cast<int>(want.size()));
  // The same weights and rope: the same logits, bit for bit.
  const std::vector<uint32_t> ids = prompt_ids();
  EXPECT_EQ(relative_error(logits_of(*gg, ids), logits_of(*st, ids)), 0.0);
}

TEST(GgufLlamaCpp, Q8_0AndQ4_0AreLathesQuantisation) {
  SKIP_WITHOUT_FIXTURES();
  const auto st = Model::load(hf(), {.force_f32 = true});
  const std::vector<uint32_t> ids = prompt_ids();
  const Tensor want_logits = logits_of(*st, ids);
  for (const auto& [type, format] : {std::pair{"Q8_0", "int8"}, std::pair{"Q4_0", "int4"}}) {
    const QuantSpec spec = parse_quant_spec(format);
    const auto gg = Model::load(gguf(type));
    std::vector<const Linear*> a, b;
    for_each_linear_module(gg->weights(), [&](const Linear& l) { a.push_back(&l); });
    for_each_linear_module(st->weights(), [&](const Linear& l) { b.push_back(&l); });
    int n = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      if (!b[i]->weight.defined() || a[i] == &gg->weights().lm_head) continue;  // the tied head: the embedding
      ASSERT_TRUE(a[i]->quant.defined()) << type << " linear " << i;
      const QuantWeight q = quantize_weight(b[i]->weight, spec);
      EXPECT_TRUE(same_bytes(a[i]->quant.codes, q.codes)) << type << " linear " << i;
      EXPECT_TRUE(same_bytes(a[i]->quant.scales, q.scales)) << type << " linear " << i;
      ++n;
    }
    EXPECT_EQ(n, 7 * static_cast<int>(st->config().n_layers));
    // The tied embedding (token_embd, quantised too) is dequantised: lathe's codes, dequantised.
    EXPECT_TRUE(same_bytes(gg->weights().embed_tokens.weight,
                           dequantize_weight(quantize_weight(st->weights().embed_tokens.weight, spec))))
        << type;
    // Logits within the format's error (quantize_test.cc: 4 L + 1 matmuls times the weights' error, here
    // bounded by the embedding's, the largest matrix).
    const double eps = relative_error(gg->weights().embed_tokens.weight, st->weights().embed_tokens.weight);
    const double err = relative_error(logits_of(*gg, ids), want_logits);
    EXPECT_GT(err, 0.0) << type;
    EXPECT_LT(err, (4.0 * st->config().n_layers + 1) * eps) << type;
  }
}

TEST(GgufLlamaCpp, TokenizerEncodesAsLlamaCpp) {
  SKIP_WITHOUT_FIXTURES();
  const std::string cases_path = fixture_dir() + "/tiny-110M-F32.llama-cpp-tokens.json";
  if (!std::filesystem::exists(cases_path)) GTEST_SKIP() << cases_path << " absent (docs/gguf.md makes it)";
  const tokenizer::Tokenizer tok =
      tokenizer::Tokenizer::from_files(tokenizer::gguf_tokenizer_files(GgufFile::open(gguf("F32"))));
  const nlohmann::json cases = nlohmann::json::parse(read_file(cases_path));
  int n = 0;
  const tokenizer::Tokenizer folder = tokenizer::Tokenizer::load(hf());
  for (const nlohmann::json& c : cases["cases"]) {
    const std::string text = c["text"].get<std::string>();
    const std::vector<uint32_t> ids = tok.encode_ids(text, false);
    EXPECT_EQ(tok.encode_ids(text, true), c["ids_special"].get<std::vector<uint32_t>>()) << "'" << text << "'";
    EXPECT_EQ(ids, c["ids"].get<std::vector<uint32_t>>()) << "'" << text << "'";
    EXPECT_EQ(ids, folder.encode_ids(text, false)) << "'" << text << "'";
    EXPECT_EQ(tok.decode(ids), folder.decode(ids)) << "'" << text << "'";
    ++n;
  }
  EXPECT_GT(n, 10);
}

TEST(GgufLlamaCpp, GenerateGivesTheFoldersGreedyText) {
  SKIP_WITHOUT_FIXTURES();
  // stdout only (the speed line goes to stderr): the prompt and its greedy completion, as text and as ids.
  const auto generate = [](const std::string& model, const std::string& args) {
    return testing::run_shell("{ " + testing::lathe_bin() + " generate " + model + args + " 2>/dev/null; }");
  };
  std::string ids;
  for (uint32_t id : prompt_ids()) ids += (ids.empty() ? "" : ",") + std::to_string(id);
  const std::string args = " --prompt-ids " + ids + " --max-tokens 16 --ignore-eos";
  auto [code_a, text_a] = generate(hf(), args);
  auto [code_b, text_b] = generate(gguf("F32"), args);
  ASSERT_EQ(code_a, 0) << text_a;
  ASSERT_EQ(code_b, 0) << text_b;
  EXPECT_EQ(text_b, text_a);
  // With text: the file's own tokenizer encodes the prompt and decodes the completion after it, as the
  // folder's tokenizer.json does.
  const std::string text_args = " --prompt 'Once upon a time' --max-tokens 16 --ignore-eos";
  auto [code_c, text_c] = generate(hf(), text_args);
  auto [code_d, text_d] = generate(gguf("F32"), text_args);
  ASSERT_EQ(code_d, 0) << text_d;
  EXPECT_EQ(text_d.rfind("Once upon a time", 0), 0u) << text_d;
  EXPECT_EQ(text_d, text_c);
  auto [code_i, info] = testing::run_lathe("info " + gguf("Q4_0"));
  ASSERT_EQ(code_i, 0) << info;
  EXPECT_NE(info.find("Q4_0: "), std::string::npos) << info;
  EXPECT_NE(info.find("tokenizer     llama"), std::string::npos) << info;
}

}  // namespace
}  // namespace lathe
