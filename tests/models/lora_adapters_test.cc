// LoRA adapters on whole models: the PEFT fixture adapter on its base reproduces PEFT's logits, the
// adapter off gives the base exactly, a saved adapter reloads bit for bit with PEFT's names, keys and
// shapes, new adapters start at the base, rsLoRA scaling, PEFT's target selection (names, regex,
// exclusions, layers), GPT-2's fused c_attn, the KV-cached forward, and clear errors for what is not
// supported. Every expected value comes from the fixture files.
#include "lathe/models/lora_adapters.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "fixture_model.h"
#include "lathe/autograd/node.h"
#include "lathe/base/error.h"
#include "lathe/io/file_read.h"
#include "lathe/models/paged_kv_store.h"
#include "lathe/ops/gradcheck.h"
#include "lora_fixture.h"

namespace lathe {
namespace {
namespace fs = std::filesystem;
using nlohmann::json;
using testing::load_lora_fixture;
using testing::max_abs_diff;

// The parity tolerance of the f32 fixtures (tests/models/parity_test.cc): 1e-4 absolute on logits.
constexpr double kLogitsTol = 1e-4;

std::unique_ptr<Model> load_base(const testing::LoraFixture& f) { return Model::load(f.base_dir, {.force_f32 = true}); }

// A copy of the fixture adapter folder with its config edited by `edit`.
std::string edited_adapter(const testing::LoraFixture& f, const std::string& name,
                           const std::function<void(json&)>& edit) {
  const std::string dir = testing::scratch_dir(name);
  fs::copy_file(f.adapter_dir + "/adapter_model.safetensors", dir + "/adapter_model.safetensors");
  json cfg = read_json_object_file(f.adapter_dir + "/adapter_config.json");
  edit(cfg);
  std::ofstream(dir + "/adapter_config.json") << cfg.dump(2);
  return dir;
}

template <class E>
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(LoraFixture, LogitsMatchPeftReference) {
  const testing::LoraFixture f = load_lora_fixture();
  auto m = load_base(f);
  const LoraAdapters ad = LoraAdapters::load(*m, f.adapter_dir);
  EXPECT_EQ(ad.config().r, f.lora.at("r").get<int>());
  EXPECT_EQ(ad.config().lora_alpha, f.lora.at("alpha").get<double>());
  NoGradGuard ng;
  const Tensor logits = m->forward(f.ids);
  ASSERT_EQ(logits.shape(), f.logits.shape());
  EXPECT_LE(max_abs_diff(logits, f.logits), kLogitsTol);
}

TEST(LoraFixture, AdapterOffIsTheBaseExactly) {
  const testing::LoraFixture f = load_lora_fixture();
  auto base = load_base(f);
  auto m = load_base(f);
  LoraAdapters ad = LoraAdapters::load(*m, f.adapter_dir);
  NoGradGuard ng;
  const std::vector<float> want = base->forward(f.ids).to_vector();
  EXPECT_EQ(m->forward(f.ids, {.lora = false}).to_vector(), want);
  EXPECT_GT(max_abs_diff(m->forward(f.ids), base->forward(f.ids)), 100 * kLogitsTol) << "the adapter must matter";
  ad.detach();
  EXPECT_EQ(m->forward(f.ids).to_vector(), want);
}

// The serving path (a paged KV store, one decode row per step) applies the adapter too.
TEST(LoraFixture, CachedForwardMatchesFullForward) {
  const testing::LoraFixture f = load_lora_fixture();
  auto m = load_base(f);
  LoraAdapters::load(*m, f.adapter_dir);
  NoGradGuard ng;
  const Tensor row = f.ids.select(0, 0).contiguous();
  const int64_t T = row.numel();
  const Tensor full = m->forward(row.view({1, T}));
  PagedKvStore store(paged_kv_store_config(m->config(), kv_blocks_for(T, kDefaultKvBlockSize)));
  const KvSequence seq = store.allocate(T);
  const std::span<const int32_t> ids(row.data<int32_t>(), static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) {
    const SequenceChunk chunk{.tokens = ids.subspan(t, 1), .start = t, .block_table = store.block_table(seq)};
    const Tensor step = m->forward(cached_batch(store, {&chunk, 1}));
    EXPECT_LE(max_abs_diff(step.select(0, 0), full.select(1, t).select(0, 0)), kLogitsTol) << "position " << t;
  }
}

TEST(LoraFixture, TensorNamesAreThoseOfPeft) {
  const testing::LoraFixture f = load_lora_fixture();
  auto m = load_base(f);
  const LoraAdapters ad = LoraAdapters::load(*m, f.adapter_dir);
  std::multiset<std::string> want, got;
  for (const json& n : f.lora.at("trainable_param_names")) {
    std::string s = n.get<std::string>();
    const std::string tag = ".default";  // PEFT's in-memory adapter name, never in the file
    s.erase(s.find(tag), tag.size());
    want.insert(s);
  }
  for (const auto& [name, t] : ad.peft_tensors()) got.insert(name);
  EXPECT_EQ(got, want);
}

TEST(LoraFixture, SaveReloadsBitForBitWithPeftKeys) {
  const testing::LoraFixture f = load_lora_fixture();
  auto m = load_base(f);
  const LoraAdapters ad = LoraAdapters::load(*m, f.adapter_dir);
  const std::string out = testing::scratch_dir("lora_save");
  ad.save(out);
  // The same bytes as PEFT's file (safetensors' layout: sorted header, data by dtype size then name).
  EXPECT_EQ(testing::read_bytes(out + "/adapter_model.safetensors"),
            testing::read_bytes(f.adapter_dir + "/adapter_model.safetensors"));
  const json cfg = read_json_object_file(out + "/adapter_config.json");
  for (const char* key : {"r", "lora_alpha", "base_model_name_or_path", "target_modules", "peft_type", "task_type",
                          "use_rslora", "lora_dropout", "fan_in_fan_out", "bias"})
    EXPECT_TRUE(cfg.contains(key)) << key;
  // Every key PEFT wrote, except those of PEFT features lathe has no part of, is written too.
  const json peft = read_json_object_file(f.adapter_dir + "/adapter_config.json");
  for (const auto& [key, value] : peft.items())
    if (key != "corda_config" && key != "eva_config" && key != "trainable_token_indices") {
      EXPECT_TRUE(cfg.contains(key)) << key;
    }
  for (const char* key : {"r", "lora_alpha", "use_rslora", "lora_dropout", "bias", "peft_type", "task_type",
                          "fan_in_fan_out", "base_model_name_or_path"})
    EXPECT_EQ(cfg[key], peft[key]) << key;
  EXPECT_EQ(std::set<std::string>(cfg["target_modules"].begin(), cfg["target_modules"].end()),
            std::set<std::string>(peft["target_modules"].begin(), peft["target_modules"].end()));
  // Reload onto a fresh base: the same tensors, bit for bit, and the same logits.
  auto m2 = load_base(f);
  const LoraAdapters back = LoraAdapters::load(*m2, out);
  const auto a = ad.peft_tensors(), b = back.peft_tensors();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second.to_vector(), b[i].second.to_vector()) << a[i].first;
  }
  NoGradGuard ng;
  EXPECT_EQ(m2->forward(f.ids).to_vector(), m->forward(f.ids).to_vector());
}

TEST(LoraFixture, RsLoraScalesByAlphaOverSqrtR) {
  const testing::LoraFixture f = load_lora_fixture();
  const std::string rs = edited_adapter(f, "lora_rslora", [](json& c) { c["use_rslora"] = true; });
  auto plain = load_base(f), rsm = load_base(f);
  LoraAdapters::load(*plain, f.adapter_dir);
  const LoraAdapters ad = LoraAdapters::load(*rsm, rs);
  const double r = f.lora.at("r").get<double>(), alpha = f.lora.at("alpha").get<double>();
  EXPECT_FLOAT_EQ(ad.config().scaling(), static_cast<float>(alpha / std::sqrt(r)));
  const Linear& q_plain = plain->weights().layers[0].self_attn.q_proj;
  const Linear& q_rs = rsm->weights().layers[0].self_attn.q_proj;
  EXPECT_FLOAT_EQ(q_rs.lora.scaling, static_cast<float>(alpha / std::sqrt(r)));
  EXPECT_FLOAT_EQ(q_plain.lora.scaling, static_cast<float>(alpha / r));
  // One Linear: the adapter's term grows by (alpha/√r) / (alpha/r) = √r.
  NoGradGuard ng;
  const Tensor x = testing::random_tensor({3, q_plain.weight.size(1)}, 1);
  const std::vector<float> base = linear(x, q_plain, {.lora = false}).to_vector(), yp = linear(x, q_plain).to_vector(),
                           yr = linear(x, q_rs).to_vector();
  for (size_t i = 0; i < base.size(); ++i) EXPECT_NEAR(yr[i] - base[i], std::sqrt(r) * (yp[i] - base[i]), 1e-4) << i;
}

TEST(LoraCreate, ZeroBStartsExactlyAtTheBase) {
  auto base = testing::load_fixture_model_f32("llama");
  auto m = testing::load_fixture_model_f32("llama");
  LoraConfig c;
  c.r = 4;
  const LoraAdapters ad = LoraAdapters::create(*m, c, 1);
  // PEFT's default targets for Llama: q_proj and v_proj of every layer.
  EXPECT_EQ(ad.config().target_modules, (std::vector<std::string>{"q_proj", "v_proj"}));
  ASSERT_EQ(ad.modules().size(), 2u * m->config().n_layers);
  for (const auto& [name, t] : ad.peft_tensors()) {
    const std::vector<float> v = t.to_vector();
    if (name.ends_with("lora_B.weight")) {
      EXPECT_EQ(v, std::vector<float>(v.size(), 0.f)) << name;
    } else {  // kaiming_uniform(a=√5): U(-1/√in, 1/√in)
      const float bound = 1.f / std::sqrt(static_cast<float>(t.size(1)));
      float amax = 0;
      for (float x : v) amax = std::max(amax, std::fabs(x));
      EXPECT_LE(amax, bound) << name;
      EXPECT_GT(amax, 0.5f * bound) << name;
    }
  }
  const Tensor ids = Tensor::from_data_i32({1, 6}, {1, 5, 9, 2, 7, 3});
  NoGradGuard ng;
  EXPECT_EQ(m->forward(ids).to_vector(), base->forward(ids).to_vector());
  // The same seed draws the same A.
  auto m2 = testing::load_fixture_model_f32("llama");
  const LoraAdapters ad2 = LoraAdapters::create(*m2, c, 1);
  EXPECT_EQ(ad2.peft_tensors()[0].second.to_vector(), ad.peft_tensors()[0].second.to_vector());
}

std::vector<std::string> selected(Model& m, const LoraConfig& c) {
  std::vector<std::string> out;
  for (const LoraModule& mod : select_lora_modules(m, c)) out.push_back(mod.path);
  return out;
}

TEST(LoraSelect, FollowsPeftRules) {
  auto m = testing::load_fixture_model_f32("llama");
  const int L = m->config().n_layers;
  ASSERT_GE(L, 2);
  LoraConfig c;
  c.target_regex = R"(.*\.layers\.1\.self_attn\.(q|v)_proj)";  // full match, as PEFT's re.fullmatch
  EXPECT_EQ(selected(*m, c),
            (std::vector<std::string>{"model.layers.1.self_attn.q_proj", "model.layers.1.self_attn.v_proj"}));
  c.target_regex = R"(self_attn\.q_proj)";  // a suffix is not a full match
  EXPECT_NE(error_of<InvalidArgument>([&] { selected(*m, c); }).find("matches no Linear module"), std::string::npos);
  c.target_regex = "all-linear";
  EXPECT_EQ(selected(*m, c).size(), 7u * L);
  c.target_regex.clear();
  c.target_modules = {"mlp.down_proj", "o_proj"};  // dotted suffixes match whole components
  c.layers_to_transform = {0};
  EXPECT_EQ(selected(*m, c),
            (std::vector<std::string>{"model.layers.0.self_attn.o_proj", "model.layers.0.mlp.down_proj"}));
  c.layers_to_transform.clear();
  c.target_modules = {"proj"};  // "proj" is not a component of "q_proj"
  EXPECT_NE(error_of<InvalidArgument>([&] { selected(*m, c); }).find("'proj'"), std::string::npos);
  c.target_modules = {"q_proj", "k_proj"};
  c.exclude_modules = {"model.layers.0.self_attn.k_proj"};
  EXPECT_EQ(selected(*m, c).size(), 2u * L - 1);
  c.exclude_modules.clear();
  c.exclude_regex = R"(.*layers\.0\..*)";
  EXPECT_EQ(selected(*m, c).size(), 2u * (L - 1));
  c.exclude_regex.clear();
  c.layers_to_transform = {L};
  EXPECT_NE(error_of<InvalidArgument>([&] { selected(*m, c); }).find("layers_to_transform"), std::string::npos);
  c.layers_to_transform.clear();
  c.target_modules = {"lm_head"};
  EXPECT_NE(error_of<NotImplemented>([&] { selected(*m, c); }).find("lm_head"), std::string::npos);
}

TEST(LoraGpt2, FusedCAttnHasPeftShapesAndMerges) {
  auto m = testing::load_fixture_model_f32("gpt2");
  const int64_t C = m->config().hidden;
  LoraConfig c;
  c.r = 4;
  LoraAdapters ad = LoraAdapters::create(*m, c, 3);
  EXPECT_EQ(ad.config().target_modules, (std::vector<std::string>{"c_attn"}));
  EXPECT_TRUE(ad.config().fan_in_fan_out) << "PEFT sets it for Conv1D";
  const auto t = ad.peft_tensors();
  ASSERT_EQ(t.size(), 2u * m->config().n_layers);
  EXPECT_EQ(t[0].first, "base_model.model.transformer.h.0.attn.c_attn.lora_A.weight");
  EXPECT_EQ(t[0].second.shape(), (Shape{c.r, C}));
  EXPECT_EQ(t[1].first, "base_model.model.transformer.h.0.attn.c_attn.lora_B.weight");
  EXPECT_EQ(t[1].second.shape(), (Shape{3 * C, c.r}));
  // q, k and v share the module's A (one tensor) and hold their rows of B.
  const Attention& a0 = m->weights().layers[0].self_attn;
  EXPECT_EQ(a0.q_proj.lora.a.impl(), a0.v_proj.lora.a.impl());
  EXPECT_EQ(a0.k_proj.lora.b.shape(), (Shape{C, c.r}));
  // The walk: A once, B in three parts.
  std::vector<std::string> names;
  ad.for_each_param([&](const std::string& n, Tensor&, int) { names.push_back(n); });
  EXPECT_EQ(names[0], t[0].first);
  EXPECT_EQ(names[1], t[1].first + "#0");
  EXPECT_EQ(names[3], t[1].first + "#2");
  // Give B values, then: save -> reload is exact, and the fused B is q, k, v's rows in order.
  ad.for_each_param([&](const std::string& n, Tensor& p, int) {
    if (n.find("lora_B") != std::string::npos) p.copy_from(testing::random_tensor(p.shape(), 11, 0.1f));
  });
  const std::string dir = testing::scratch_dir("lora_gpt2");
  ad.save(dir);
  EXPECT_TRUE(read_json_object_file(dir + "/adapter_config.json")["fan_in_fan_out"].get<bool>());
  auto m2 = testing::load_fixture_model_f32("gpt2");
  const LoraAdapters back = LoraAdapters::load(*m2, dir);
  const auto t2 = back.peft_tensors();
  for (size_t i = 0; i < t2.size(); ++i) EXPECT_EQ(t2[i].second.to_vector(), ad.peft_tensors()[i].second.to_vector());
  EXPECT_EQ(m2->weights().layers[0].self_attn.v_proj.lora.b.to_vector(),
            t2[1].second.slice(0, 2 * C, 3 * C).to_vector());
  const Tensor ids = Tensor::from_data_i32({1, 5}, {3, 1, 4, 1, 5});
  NoGradGuard ng;
  EXPECT_EQ(m2->forward(ids).to_vector(), m->forward(ids).to_vector());
}

TEST(LoraErrors, UnsupportedAndMismatchedAdaptersAreNamed) {
  const testing::LoraFixture f = load_lora_fixture();
  auto m = load_base(f);
  const auto load_edited = [&](const char* name, const std::function<void(json&)>& edit) {
    const std::string dir = edited_adapter(f, name, edit);
    return [&m, dir] { LoraAdapters::load(*m, dir); };
  };
  EXPECT_NE(error_of<NotImplemented>(load_edited("dora", [](json& c) { c["use_dora"] = true; })).find("use_dora"),
            std::string::npos);
  EXPECT_NE(error_of<NotImplemented>(load_edited("lbias", [](json& c) { c["lora_bias"] = true; })).find("lora_bias"),
            std::string::npos);
  EXPECT_NE(error_of<NotImplemented>(load_edited("save", [](json& c) { c["modules_to_save"] = {"lm_head"}; }))
                .find("modules_to_save"),
            std::string::npos);
  EXPECT_NE(error_of<NotImplemented>(load_edited("bias", [](json& c) { c["bias"] = "all"; })).find("bias"),
            std::string::npos);
  EXPECT_NE(error_of<InvalidArgument>(load_edited("typo",
                                                  [](json& c) {
                                                    c["target_modules"] = {"q_proj", "qproj"};
                                                  }))
                .find("'qproj'"),
            std::string::npos);
  // r = 2 against rank-4 tensors: the first module's A is named with both shapes.
  const std::string shape = error_of<InvalidArgument>(load_edited("rank", [](json& c) { c["r"] = 2; }));
  EXPECT_NE(shape.find("base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight"), std::string::npos) << shape;
  EXPECT_NE(shape.find("shape"), std::string::npos) << shape;
  // Fewer targets than the file has tensors: the first extra tensor is named.
  const std::string extra =
      error_of<InvalidArgument>(load_edited("extra", [](json& c) { c["target_modules"] = {"q_proj"}; }));
  EXPECT_NE(extra.find("unexpected tensor"), std::string::npos) << extra;
  EXPECT_NE(error_of<InvalidArgument>(load_edited("nopeft", [](json& c) { c.erase("peft_type"); })).find("peft_type"),
            std::string::npos);
  // A module that already has an adapter.
  LoraAdapters::load(*m, f.adapter_dir);
  EXPECT_NE(error_of<InvalidArgument>([&] { LoraAdapters::load(*m, f.adapter_dir); }).find("already has"),
            std::string::npos);
}

}  // namespace
}  // namespace lathe
