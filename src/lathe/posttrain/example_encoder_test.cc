// Masks of trained tokens: assistant-only masks by incremental prefix rendering on real chat templates
// (the byte-level ChatML tokenizer that `lathe data synth` writes, always; Llama 3, Gemma 3 and Qwen 3 from
// LATHE_TOKENIZERS when installed), completion-only masks, EOS, truncation and the zero-trained-token error.
#include "lathe/posttrain/example_encoder.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "lathe/base/error.h"
#include "lathe/io/test_paths.h"
#include "lathe/train/byte_tokenizer.h"

namespace lathe::posttrain {
namespace {

namespace fs = std::filesystem;
using nlohmann::ordered_json;

std::string byte_tokenizer_dir() {
  static const std::string dir = [] {
    const std::string d = testing::scratch_dir("encoder_byte_tokenizer");
    train::write_byte_level_tokenizer(d);
    return d;
  }();
  return dir;
}

ExampleEncoder encoder(const std::string& dir, EncoderOptions o = {}) {
  return ExampleEncoder(tokenizer::read_tokenizer_files(dir), std::move(o));
}

ordered_json msg(const char* role, const char* content) { return {{"role", role}, {"content", content}}; }

Example conversation(ordered_json messages) {
  Example e{.where = "test.jsonl:1"};
  e.text.conversational = true;
  e.text.messages = std::move(messages);
  return e;
}

// The trained tokens, one decoded string per run of consecutive trained tokens.
std::vector<std::string> trained_runs(const ExampleEncoder& enc, const TokenizedExample& ex) {
  std::vector<std::string> runs;
  std::vector<uint32_t> cur;
  for (size_t i = 0; i <= ex.size(); ++i) {
    if (i < ex.size() && ex.supervised[i]) {
      cur.push_back(static_cast<uint32_t>(ex.ids[i]));
    } else if (!cur.empty()) {
      runs.push_back(enc.tokenizer().decode(cur));
      cur.clear();
    }
  }
  return runs;
}

std::string trim(std::string s) {
  const size_t b = s.find_first_not_of(" \n"), e = s.find_last_not_of(" \n");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

// Assistant-only: one trained run per assistant message holding its content and ending in a special token
// (the end of turn) plus at most whitespace; nothing of the system, user or tool messages is trained.
void expect_assistant_only(const std::string& tok_dir, const ordered_json& messages) {
  SCOPED_TRACE(tok_dir);
  const ExampleEncoder enc = encoder(tok_dir, {.max_length = 0, .assistant_only_loss = true});
  const TokenizedExample ex = enc.encode_sft(conversation(messages), DatasetKind::kLanguageModeling);
  const std::vector<std::string> runs = trained_runs(enc, ex);
  std::vector<std::string> answers;
  for (const auto& m : messages)
    if (m["role"] == "assistant") answers.push_back(trim(m["content"].get<std::string>()));
  ASSERT_EQ(runs.size(), answers.size()) << enc.render(messages, false, nullptr);
  for (size_t k = 0; k < runs.size(); ++k) {
    EXPECT_NE(runs[k].find(answers[k]), std::string::npos) << runs[k];
    EXPECT_EQ(runs[k].find("assistant"), std::string::npos) << "a role header is trained: " << runs[k];
    for (const auto& m : messages) {
      if (m["role"] != "assistant") {
        EXPECT_EQ(runs[k].find(trim(m["content"].get<std::string>())), std::string::npos) << runs[k];
      }
    }
  }
  // Each run ends with a special token (the end of turn), then at most whitespace.
  size_t run = 0;
  for (size_t i = 0; i < ex.size(); ++i) {
    if (!ex.supervised[i] || (i + 1 < ex.size() && ex.supervised[i + 1])) continue;
    size_t last = i;  // the run's last token that is not whitespace
    while (last > 0 && trim(enc.tokenizer().decode(std::vector<uint32_t>{static_cast<uint32_t>(ex.ids[last])})).empty()) --last;
    EXPECT_TRUE(enc.tokenizer().is_special(static_cast<uint32_t>(ex.ids[last])))
        << "run " << run << " ends in " << enc.tokenizer().id_to_token(static_cast<uint32_t>(ex.ids[last])).value_or("?");
    ++run;
  }
}

ordered_json multi_turn_with_tool() {
  return ordered_json::array({msg("system", "You log meals."), msg("user", "I ate two eggs."),
                              msg("assistant", "Logged: two eggs, 140 kcal."), msg("tool", "{\"total_kcal\": 140}"),
                              msg("assistant", "Your total today is 140 kcal."), msg("user", "And a banana?"),
                              msg("assistant", "Logged: a banana, 105 kcal.")});
}

TEST(SftMasks, AssistantOnlyOnByteLevelChatMl) { expect_assistant_only(byte_tokenizer_dir(), multi_turn_with_tool()); }

TEST(SftMasks, AssistantOnlyOnRealTemplates) {
  const fs::path root = testing::tokenizers_root();
  int checked = 0;
  if (fs::exists(root / "llama3" / "tokenizer.json")) {  // always writes the assistant header: a trailer
    expect_assistant_only((root / "llama3").string(), multi_turn_with_tool());
    ++checked;
  }
  if (fs::exists(root / "gemma3" / "tokenizer.json")) {  // strict user/assistant alternation, system folded in
    expect_assistant_only((root / "gemma3").string(),
                          ordered_json::array({msg("system", "You log meals."), msg("user", "I ate two eggs."),
                                               msg("assistant", "Logged: two eggs."), msg("user", "And a banana?"),
                                               msg("assistant", "Logged: a banana.")}));
    ++checked;
  }
  if (fs::exists(root / "qwen3" / "tokenizer.json")) {  // one turn (Qwen3 rewrites earlier turns' thinking)
    expect_assistant_only((root / "qwen3").string(),
                          ordered_json::array({msg("system", "You log meals."), msg("user", "I ate two eggs."),
                                               msg("assistant", "Logged: two eggs.")}));
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << "no real tokenizers under " << root << " (tools/fetch_tokenizers.sh)";
}

TEST(SftMasks, NonPrefixPreservingTemplateIsANamedError) {
  const fs::path dir = fs::path(testing::tokenizers_root()) / "qwen3";
  if (!fs::exists(dir / "tokenizer.json")) GTEST_SKIP() << "no qwen3 tokenizer";
  const ExampleEncoder enc = encoder(dir.string(), {.assistant_only_loss = true});
  try {
    enc.encode_sft(conversation(multi_turn_with_tool()), DatasetKind::kLanguageModeling);
    FAIL() << "expected an error";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("test.jsonl:1: the chat template is not prefix-preserving at message 2"),
              std::string::npos) << e.what();
  }
}

TEST(SftMasks, ConversationalPromptCompletionTrainsTheCompletionOnly) {
  const ExampleEncoder enc = encoder(byte_tokenizer_dir());
  Example e{.where = "pc.jsonl:1"};
  e.prompt.conversational = e.completion.conversational = true;
  e.prompt.messages = ordered_json::array({msg("user", "I ate two eggs.")});
  e.completion.messages = ordered_json::array({msg("assistant", "Logged.")});
  const TokenizedExample ex = enc.encode_sft(e, DatasetKind::kPromptCompletion);
  EXPECT_EQ(trained_runs(enc, ex), std::vector<std::string>{"Logged.<|im_end|>\n"});
}

TEST(SftMasks, StandardPromptCompletionTrainsCompletionAndEos) {
  const ExampleEncoder enc = encoder(byte_tokenizer_dir());
  Example e{.where = "pc.jsonl:1"};
  e.prompt.text = "2 eggs =";
  e.completion.text = " 140 kcal";
  const TokenizedExample ex = enc.encode_sft(e, DatasetKind::kPromptCompletion);
  const auto eos = static_cast<int32_t>(*enc.tokenizer().special_tokens().eos_id);
  ASSERT_EQ(ex.ids.back(), eos);
  EXPECT_EQ(trained_runs(enc, ex), std::vector<std::string>{" 140 kcal<|im_end|>"});
  // Without completion-only loss the prompt is trained too (its first token has no prefix: not a target).
  const ExampleEncoder all = encoder(byte_tokenizer_dir(), {.completion_only_loss = false});
  EXPECT_EQ(all.encode_sft(e, DatasetKind::kPromptCompletion).n_targets(), static_cast<int64_t>(ex.size()) - 1);
}

TEST(SftMasks, TruncationKeepsStartOrEnd) {
  Example e{.where = "lm.jsonl:7"};
  e.text.text = "abcdefghij";  // one token per byte, + EOS
  const TokenizedExample whole = encoder(byte_tokenizer_dir(), {.max_length = 0}).encode_sft(e, DatasetKind::kLanguageModeling);
  const TokenizedExample start = encoder(byte_tokenizer_dir(), {.max_length = 4}).encode_sft(e, DatasetKind::kLanguageModeling);
  const TokenizedExample end =
      encoder(byte_tokenizer_dir(), {.max_length = 4, .truncation = Truncation::kKeepEnd}).encode_sft(e, DatasetKind::kLanguageModeling);
  EXPECT_EQ(start.ids, std::vector<int32_t>(whole.ids.begin(), whole.ids.begin() + 4));
  EXPECT_EQ(end.ids, std::vector<int32_t>(whole.ids.end() - 4, whole.ids.end()));
}

TEST(SftMasks, ZeroTrainedTokensIsAnError) {
  // An empty completion after a prompt that truncation keeps whole: nothing but EOS... cut away.
  Example e{.where = "pc.jsonl:3"};
  e.prompt.text = "a long prompt";
  e.completion.text = "ok";
  try {
    encoder(byte_tokenizer_dir(), {.max_length = 5}).encode_sft(e, DatasetKind::kPromptCompletion);
    FAIL() << "expected an error";
  } catch (const FormatError& err) {
    EXPECT_NE(std::string(err.what()).find("pc.jsonl:3: no trained tokens left after truncation to max_length 5"),
              std::string::npos) << err.what();
  }
  // A conversation without an assistant message under assistant-only loss.
  try {
    encoder(byte_tokenizer_dir(), {.assistant_only_loss = true})
        .encode_sft(conversation(ordered_json::array({msg("user", "hi")})), DatasetKind::kLanguageModeling);
    FAIL() << "expected an error";
  } catch (const FormatError& err) {
    EXPECT_NE(std::string(err.what()).find("test.jsonl:1: no trained tokens"), std::string::npos) << err.what();
  }
}

TEST(SftMasks, EndOfAnswerMustBeTrained) {
  const ExampleEncoder enc = encoder(byte_tokenizer_dir());
  const std::vector<int32_t> stops = stop_token_ids(enc.tokenizer(), std::vector<int>{}, nullptr);
  ASSERT_FALSE(stops.empty());
  Example e{.where = "lm.jsonl:1"};
  e.text.text = "hello";
  TokenizedExample ex = enc.encode_sft(e, DatasetKind::kLanguageModeling);
  EXPECT_NO_THROW(check_stop_token_trained(ex, stops, enc.tokenizer(), e.where));
  ex.supervised.back() = 0;  // as a template whose end of turn falls outside the assistant's span
  EXPECT_THROW(check_stop_token_trained(ex, stops, enc.tokenizer(), e.where), InvalidArgument);
}

}  // namespace
}  // namespace lathe::posttrain
