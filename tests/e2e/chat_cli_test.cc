// `lathe generate --prompt` and `lathe chat` on a small random Qwen3 model with the real Qwen3 tokenizer
// (LATHE_TOKENIZERS, default ~/.cache/lathe/tokenizers; skipped without it): text in, text out, through
// the folder's tokenizer and chat template.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "cli_run.h"
#include "lathe/io/test_paths.h"
#include "lathe/io/tokenizer/tokenizer.h"
#include "lathe/models/test_text_model.h"

namespace lathe {
namespace {
namespace fs = std::filesystem;

const std::string& text_model_dir() { return testing::qwen3_text_model_dir(); }

// Runs a shell command; exit code and stdout only (stderr, with the speed lines, is dropped).
std::pair<int, std::string> run_stdout(const std::string& cmd) { return testing::run_shell("(" + cmd + " 2>/dev/null)"); }

std::string ids_csv(const std::vector<uint32_t>& ids) {
  std::string s;
  for (uint32_t id : ids) s += (s.empty() ? "" : ",") + std::to_string(id);
  return s;
}

TEST(ChatCli, GeneratePromptTextMatchesTheIdPath) {
  const std::string dir = text_model_dir();
  if (dir.empty()) GTEST_SKIP() << "no qwen3 tokenizer under " << testing::tokenizers_root();
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(dir);
  const std::string prompt = "The quick brown fox";
  const std::vector<uint32_t> prompt_ids = tok.encode_ids(prompt);
  // The id path: prompt + 6 greedy tokens (no eos stop, so the count is fixed).
  auto [code, ids_out] = testing::run_lathe("generate " + dir + " --prompt-ids " + ids_csv(prompt_ids) +
                                            " --max-tokens 6 --ignore-eos --threads 1");
  ASSERT_EQ(code, 0) << ids_out;
  std::vector<uint32_t> all;
  for (size_t at = 0; at < ids_out.size() && std::isdigit(static_cast<unsigned char>(ids_out[at]));) {
    size_t end = at;
    all.push_back(static_cast<uint32_t>(std::stoul(ids_out.substr(at), &end)));
    at += end + 1;  // past the comma
  }
  ASSERT_EQ(all.size(), prompt_ids.size() + 6) << ids_out;
  const std::string completion =
      tok.decode(std::vector<uint32_t>(all.begin() + static_cast<long>(prompt_ids.size()), all.end()), true);
  // The text path prints the prompt, then the same completion, streamed.
  auto [code2, text_out] = run_stdout(testing::lathe_bin() + " generate " + dir + " --prompt '" + prompt +
                                       "' --max-tokens 6 --ignore-eos --threads 1");
  ASSERT_EQ(code2, 0) << text_out;
  EXPECT_EQ(text_out, prompt + completion + "\n");
}

TEST(ChatCli, GenerateStopStringCutsTheCompletion) {
  const std::string dir = text_model_dir();
  if (dir.empty()) GTEST_SKIP() << "no qwen3 tokenizer under " << testing::tokenizers_root();
  const std::string cmd = testing::lathe_bin() + " generate " + dir + " --prompt 'Hello' --max-tokens 8 --ignore-eos --threads 1 --temperature 1 --seed 3";
  auto [code, full] = run_stdout(cmd);
  ASSERT_EQ(code, 0) << full;
  const std::string completion = full.substr(5, full.size() - 6);  // between the prompt and the newline
  ASSERT_GE(completion.size(), 2u) << full;
  // Stop at the completion's last letter or digit (safe to quote): what precedes its first occurrence is
  // printed, nothing after it.
  const size_t last = completion.find_last_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789");
  if (last == std::string::npos) GTEST_SKIP() << "the random completion has no ASCII letter: " << completion;
  const std::string stop = completion.substr(last, 1);
  const std::string want = completion.substr(0, completion.find(stop));
  auto [code2, cut] = run_stdout(cmd + " --stop " + stop);
  ASSERT_EQ(code2, 0) << cut;
  EXPECT_EQ(cut, "Hello" + want + "\n");
}

TEST(ChatCli, ChatAnswersAndResetStartsOver) {
  const std::string dir = text_model_dir();
  if (dir.empty()) GTEST_SKIP() << "no qwen3 tokenizer under " << testing::tokenizers_root();
  auto [code, out] = run_stdout("printf 'hello\\nhow are you\\n/reset\\nhello\\n' | " + testing::lathe_bin() + " chat " +
                                dir + " --max-tokens 5 --threads 1 --temperature 1 --seed 5");
  ASSERT_EQ(code, 0) << out;
  // answer 1, answer 2, the reset marker, answer 3 (each ends with a newline; random answers may hold more).
  const std::string marker = "(new conversation)\n";
  const size_t at = out.find(marker);
  ASSERT_NE(at, std::string::npos) << out;
  const std::string before = out.substr(0, at), after = out.substr(at + marker.size());
  ASSERT_GT(after.size(), 1u) << out;
  EXPECT_EQ(before.substr(0, after.size()), after) << "after /reset the same message must get the same (seeded) answer";
  EXPECT_GT(before.size(), after.size()) << "the second message got no answer: " << out;
}

TEST(ChatCli, ChatWithoutTemplateFailsClearly) {
  const std::string dir = text_model_dir();
  if (dir.empty()) GTEST_SKIP() << "no qwen3 tokenizer under " << testing::tokenizers_root();
  const std::string plain = testing::scratch_dir("qwen3_no_template");
  for (const auto& e : fs::directory_iterator(dir)) fs::copy_file(e.path(), fs::path(plain) / e.path().filename());
  std::ofstream(fs::path(plain) / "tokenizer_config.json") << "{}";
  auto [code, out] = testing::run_shell("echo hi | " + testing::lathe_bin() + " chat " + plain + " --threads 1");
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("no chat_template"), std::string::npos) << out;
}

}  // namespace
}  // namespace lathe
