// End-to-end checks of how every lathe command reads its options (issue 9 rows 6, 15, 16, 18): switches
// honour =false/no/0, numbers are checked whole and against their range, unknown options are named
// wherever they stand, bad thread counts fail cleanly instead of hanging, and --help agrees with
// docs/cli.md.
#include <gtest/gtest.h>

#include <algorithm>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "cli_run.h"
#include "lathe/io/test_paths.h"

namespace lathe {
namespace {
namespace fs = std::filesystem;
using testing::is_clean_error;
using testing::run_lathe_bounded;
using testing::run_shell;

std::string model(const std::string& name) { return testing::fixtures_root() + "/models/" + name; }

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

std::string source_file(const std::string& rel) {
  std::ifstream in(std::string(LATHE_SOURCE_DIR) + "/" + rel);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string join_ids(const nlohmann::json& ids, size_t n) {
  std::string s;
  for (size_t i = 0; i < n && i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i].get<int>());
  return s;
}

// --- row 15: switches -------------------------------------------------------------------------------

// A copy of the llama fixture whose eos_token_id is the first token greedy decoding produces, so
// whether generation stops at EOS shows in the output.
struct EosModel {
  std::string dir, prompt, stopped, four_new;
};

EosModel make_eos_model() {
  std::ifstream in(model("llama") + "/reference.json");
  const nlohmann::json ref = nlohmann::json::parse(in);
  const size_t n_prompt = ref["greedy_prompt"].size();
  EosModel m;
  m.dir = testing::scratch_dir("cli_flags_eos") + "/llama";
  fs::copy(model("llama"), m.dir, fs::copy_options::recursive);
  nlohmann::json cfg = nlohmann::json::parse(std::ifstream(m.dir + "/config.json"));
  cfg["eos_token_id"] = ref["greedy_output_ids"][n_prompt];
  std::ofstream(m.dir + "/config.json") << cfg.dump(1);
  m.prompt = join_ids(ref["greedy_prompt"], n_prompt);
  m.stopped = join_ids(ref["greedy_output_ids"], n_prompt + 1);
  m.four_new = join_ids(ref["greedy_output_ids"], n_prompt + 4);
  return m;
}

TEST(CliFlags, IgnoreEosFalseSpellingsKeepStoppingAtEos) {
  const EosModel m = make_eos_model();
  const std::string base = "generate " + m.dir + " --prompt-ids " + m.prompt + " --max-tokens 4 --threads 1";
  for (const std::string off : {"", " --ignore-eos=no", " --ignore-eos=false", " --ignore-eos=0", " --ignore-eos=NO"}) {
    auto r = run_lathe_bounded(base + off);
    EXPECT_EQ(r.first, 0) << off << ": " << r.second;
    EXPECT_EQ(first_line(r.second), m.stopped) << off;
  }
  for (const std::string on : {" --ignore-eos", " --ignore-eos=yes", " --ignore-eos=true", " --ignore-eos=1",
                               " --ignore-eos=True"}) {
    auto r = run_lathe_bounded(base + on);
    EXPECT_EQ(r.first, 0) << on << ": " << r.second;
    EXPECT_EQ(first_line(r.second), m.four_new) << on;
  }
}

// Another switch on another command: detokenize --skip-special=no keeps the special token's text.
TEST(CliFlags, SkipSpecialFalseKeepsSpecialTokens) {
  const std::string dir = testing::scratch_dir("cli_flags_skip");
  auto synth = run_lathe_bounded("data synth --out " + dir + " --documents 1");
  ASSERT_EQ(synth.first, 0) << synth.second;
  const std::string tok = dir + "/tokenizer";
  auto ids = run_shell("echo '{\"text\": \"hi<|endoftext|>\"}' | timeout 60 " + testing::lathe_bin() + " tokenize " +
                       tok);
  ASSERT_EQ(ids.first, 0) << ids.second;
  const std::string line = first_line(ids.second);
  auto detok = [&](const std::string& flag) {
    auto r = run_shell("echo '" + line + "' | timeout 60 " + testing::lathe_bin() + " detokenize " + tok + flag);
    EXPECT_EQ(r.first, 0) << flag << ": " << r.second;
    return nlohmann::json::parse(first_line(r.second))["text"].get<std::string>();
  };
  EXPECT_EQ(detok(""), "hi<|endoftext|>");
  EXPECT_EQ(detok(" --skip-special=no"), "hi<|endoftext|>");
  EXPECT_EQ(detok(" --skip-special=0"), "hi<|endoftext|>");
  EXPECT_EQ(detok(" --skip-special"), "hi");
  EXPECT_EQ(detok(" --skip-special=yes"), "hi");
}

TEST(CliFlags, BadSwitchValueNamesTheOption) {
  auto r = run_lathe_bounded("generate " + model("llama") + " --prompt-ids 1,2 --ignore-eos=maybe");
  EXPECT_TRUE(is_clean_error(r, "--ignore-eos")) << r.second;
  EXPECT_NE(r.second.find("maybe"), std::string::npos) << r.second;
  r = run_lathe_bounded("generate " + model("llama") + " --prompt-ids 1,2 --f32=");
  EXPECT_TRUE(is_clean_error(r, "--f32")) << r.second;
  r = run_lathe_bounded("pretrain missing.yaml --resume=perhaps");
  EXPECT_TRUE(is_clean_error(r, "--resume")) << r.second;
  r = run_lathe_bounded("tokenize " + model("llama") + " --offsets=2 </dev/null");
  EXPECT_TRUE(is_clean_error(r, "--offsets")) << r.second;
}

// --- rows 15 and 16: numbers ------------------------------------------------------------------------

struct BadNumber {
  std::string args, option, why;  // why: "out of range" or the start of "expects ..."
};

void expect_all_rejected(const std::vector<BadNumber>& cases) {
  for (const BadNumber& c : cases) {
    auto r = run_lathe_bounded(c.args);
    EXPECT_TRUE(is_clean_error(r, c.option)) << c.args << "\n" << r.second;
    EXPECT_NE(r.second.find(c.why), std::string::npos) << c.args << "\n" << r.second;
  }
}

TEST(CliFlags, GenerateNumbersOutsideTheirRangeAreRejected) {
  const std::string g = "generate " + model("llama") + " --prompt-ids 1,2 ";
  expect_all_rejected({
      {g + "--max-tokens 99999999999999999999", "--max-tokens", "out of range"},  // row 16
      {g + "--max-tokens 3000000000", "--max-tokens", "out of range"},
      {g + "--max-tokens -1", "--max-tokens", "out of range"},
      {g + "--max-tokens 4x", "--max-tokens", "expects"},
      {g + "--max-tokens 1e3", "--max-tokens", "expects"},
      {g + "--temperature nan", "--temperature", "finite"},
      {g + "--temperature inf", "--temperature", "finite"},
      {g + "--temperature -1", "--temperature", "out of range"},
      {g + "--temperature 1e39", "--temperature", "out of range"},
      {g + "--temperature 1e999", "--temperature", "out of range"},
      {g + "--top-k -5", "--top-k", "out of range"},
      {g + "--top-p 2", "--top-p", "out of range"},
      {g + "--top-p 0", "--top-p", "out of range"},
      {g + "--top-p nan", "--top-p", "finite"},
      {g + "--min-p 1.5", "--min-p", "out of range"},
      {g + "--repetition-penalty 0", "--repetition-penalty", "out of range"},
      {g + "--presence-penalty 2.5", "--presence-penalty", "out of range"},
      {g + "--frequency-penalty -3", "--frequency-penalty", "out of range"},
      {g + "--threads -3", "--threads", "out of range"},
      {g + "--threads 99999999999", "--threads", "out of range"},
      {g + "--seed -1", "--seed", "out of range"},
  });
}

TEST(CliFlags, OtherCommandsNumbersOutsideTheirRangeAreRejected) {
  const std::string ref = model("llama") + "/reference.safetensors";
  const std::string v = "verify " + model("llama") + " " + ref + " ";
  const std::string p = "data prepare in.jsonl --tokenizer " + model("llama") + " --out /nonexistent/x ";
  expect_all_rejected({
      {v + "--atol -1", "--atol", "out of range"},
      {v + "--atol nan", "--atol", "finite"},
      {v + "--grad-rtol inf", "--grad-rtol", "finite"},
      {v + "--threads -2", "--threads", "out of range"},
      {p + "--val-fraction 1", "--val-fraction", "out of range"},
      {p + "--val-fraction -0.5", "--val-fraction", "out of range"},
      {p + "--val-fraction nan", "--val-fraction", "finite"},
      {p + "--shard-tokens 0", "--shard-tokens", "out of range"},
      {p + "--shard-tokens 99999999999999999999", "--shard-tokens", "out of range"},
      {p + "--seed -3", "--seed", "out of range"},
      {"data synth --out /nonexistent/x --documents 0", "--documents", "out of range"},
      {"data synth --out /nonexistent/x --documents 99999999999999999999", "--documents", "out of range"},
  });
}

// The library checks the same ranges (for callers other than the CLI): a context overflow is named.
TEST(CliFlags, MaxTokensBeyondTheContextIsNamed) {
  auto r = run_lathe_bounded("generate " + model("llama") + " --prompt-ids 1,2 --max-tokens 100000 --threads 1");
  EXPECT_TRUE(is_clean_error(r, "max_position_embeddings")) << r.second;
}

// --- row 16: unknown options and missing values -----------------------------------------------------

TEST(CliFlags, UnknownOptionIsNamedWhereverItStands) {
  const std::string m = model("llama");
  const std::vector<std::string> cases = {
      "generate " + m + " --bogus --prompt-ids 1,2",  "generate " + m + " --prompt-ids 1,2 --bogus",
      "generate --bogus " + m + " --prompt-ids 1,2",  "generate " + m + " --prompt-ids 1,2 --bogus=3",
      "info " + m + " --bogus",                       "verify " + m + " x.safetensors --bogus",
      "data prepare in.jsonl --tokenizer t --out o --bogus", "data synth --bogus",
      "pretrain r.yaml --bogus",                      "plot run --bogus",
      "detokenize t --bogus",                         "chat-template t --bogus"};
  for (const std::string& args : cases) {
    auto r = run_lathe_bounded(args);
    EXPECT_TRUE(is_clean_error(r, "unknown option --bogus")) << args << "\n" << r.second;
    EXPECT_NE(r.second.find("accepted:"), std::string::npos) << r.second;
    EXPECT_EQ(r.second.find("needs a value"), std::string::npos) << args << "\n" << r.second;
  }
}

TEST(CliFlags, LastOptionWithoutItsValueNeedsAValue) {
  const std::vector<std::string> cases = {"generate " + model("llama") + " --prompt-ids 1,2 --seed",
                                          "data prepare in.jsonl --out o --tokenizer", "plot run --out",
                                          "verify a b --atol --threads 1"};
  for (const std::string& args : cases) {
    auto r = run_lathe_bounded(args);
    EXPECT_TRUE(is_clean_error(r, "needs a value")) << args << "\n" << r.second;
  }
  auto r = run_lathe_bounded("data prepare in.jsonl --out o --tokenizer");
  EXPECT_NE(r.second.find("--tokenizer"), std::string::npos) << r.second;
}

TEST(CliFlags, OptionGivenTwiceTakesItsLastValue) {
  // Greedy, EOS ignored: the first output line is the prompt and exactly the last --max-tokens ids.
  auto r = run_lathe_bounded("generate " + model("llama") + " --prompt-ids 1,2 --max-tokens 5 --ignore-eos --max-tokens=2");
  ASSERT_EQ(r.first, 0) << r.second;
  const std::string first_line = r.second.substr(0, r.second.find('\n'));
  EXPECT_EQ(std::count(first_line.begin(), first_line.end(), ','), 3) << r.second;  // 4 ids
}

// --- row 6 and LATHE_NUM_THREADS ----------------------------------------------------------------------

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define LATHE_UNDER_SANITIZER 1  // the sanitizers reserve terabytes of address space: ulimit -v breaks them
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define LATHE_UNDER_SANITIZER 1
#endif
#endif

TEST(CliFlags, ThreadsTheSystemCannotStartFailInsteadOfHanging) {
#ifdef LATHE_UNDER_SANITIZER
  GTEST_SKIP() << "ulimit -v cannot be combined with a sanitizer's shadow memory";
#endif
  // 400 threads need ~3 GB of stack address space: under a 2 GB limit thread creation fails part way.
  const std::string limited = "ulimit -v 2000000; timeout -k 5 60 " + testing::lathe_bin() + " ";
  auto r = run_shell(limited + "generate " + model("llama") + " --prompt-ids 1,2 --threads 400");
  EXPECT_TRUE(is_clean_error(r, "400 threads")) << r.second;
  r = run_shell(limited + "verify " + model("llama") + " " + model("llama") + "/reference.safetensors --threads 400");
  EXPECT_TRUE(is_clean_error(r, "400 threads")) << r.second;
  r = run_shell("ulimit -v 2000000; LATHE_NUM_THREADS=400 timeout -k 5 60 " + testing::lathe_bin() + " generate " +
                model("llama") + " --prompt-ids 1,2");
  EXPECT_TRUE(is_clean_error(r, "400 threads")) << r.second;
}

TEST(CliFlags, BadLatheNumThreadsNamesTheVariable) {
  const std::string gen =
      " timeout -k 5 60 " + testing::lathe_bin() + " generate " + model("llama") + " --prompt-ids 1,2";
  for (const std::string bad : {"abc", "-3", "4x", "99999999999999999999", "100000", " 2"}) {
    auto r = run_shell("LATHE_NUM_THREADS='" + bad + "'" + gen);
    EXPECT_TRUE(is_clean_error(r, "LATHE_NUM_THREADS")) << bad << "\n" << r.second;
  }
  // Another command reading it: data prepare's tokenizer threads.
  const std::string dir = testing::scratch_dir("cli_flags_env");
  std::ofstream(dir + "/in.jsonl") << "{\"text\": \"hello\"}\n";
  auto r = run_shell("LATHE_NUM_THREADS=lots timeout -k 5 60 " + testing::lathe_bin() + " data prepare " + dir +
                     "/in.jsonl --tokenizer " + dir + "/none --out " + dir + "/out");
  EXPECT_TRUE(is_clean_error(r, "LATHE_NUM_THREADS")) << r.second;
  // A good value still works, and an explicit --threads wins over it.
  r = run_shell("LATHE_NUM_THREADS=2" + gen + " --max-tokens 1");
  EXPECT_EQ(r.first, 0) << r.second;
  r = run_shell("LATHE_NUM_THREADS=abc" + gen + " --max-tokens 1 --threads 1");
  EXPECT_EQ(r.first, 0) << r.second;
}

// --- row 18: --help and docs/cli.md agree, --version ------------------------------------------------

// docs/cli.md's "## lathe CMD ..." sections: the command ("data prepare") -> the options they mention.
std::vector<std::pair<std::string, std::set<std::string>>> documented_options() {
  std::vector<std::pair<std::string, std::set<std::string>>> out;
  std::istringstream in(source_file("docs/cli.md"));
  const std::regex option(R"(--[a-z][a-z0-9-]*)");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("## lathe ", 0) == 0) {
      std::istringstream words(line.substr(9));
      std::string cmd, w;
      while (words >> w && std::regex_match(w, std::regex("[a-z][a-z-]*"))) cmd += (cmd.empty() ? "" : " ") + w;
      out.push_back({cmd, {}});
    } else if (line.rfind("#", 0) == 0) {
      continue;
    }
    if (out.empty()) continue;
    for (std::sregex_iterator it(line.begin(), line.end(), option), end; it != end; ++it)
      if (it->str() != "--help") out.back().second.insert(it->str());
  }
  return out;
}

std::set<std::string> options_in(const std::string& text) {
  std::set<std::string> s;
  const std::regex option(R"(--[a-z][a-z0-9-]*)");
  for (std::sregex_iterator it(text.begin(), text.end(), option), end; it != end; ++it)
    if (it->str() != "--help" && it->str() != "--version") s.insert(it->str());
  return s;
}

TEST(CliFlags, EachCommandsHelpListsExactlyTheOptionsItsDocsSectionNames) {
  const auto docs = documented_options();
  ASSERT_GE(docs.size(), 9u);
  for (const auto& [cmd, documented] : docs) {
    auto r = run_lathe_bounded(cmd + " --help");
    EXPECT_EQ(r.first, 0) << cmd << ": " << r.second;
    // Only the options block (help_text in tools/lathe/args.h): the summary may mention other options.
    const size_t block = r.second.find("options:");
    ASSERT_NE(block, std::string::npos) << "lathe " << cmd << " --help has no options block:\n" << r.second;
    const std::string help = r.second.substr(block);
    EXPECT_EQ(options_in(help), documented) << "lathe " << cmd << " --help vs docs/cli.md:\n" << r.second;
  }
}

TEST(CliFlags, TopLevelHelpListsEveryDocumentedCommandAndOption) {
  auto r = run_lathe_bounded("--help");
  EXPECT_EQ(r.first, 0) << r.second;
  const std::set<std::string> listed = options_in(r.second);
  for (const auto& [cmd, documented] : documented_options()) {
    EXPECT_NE(r.second.find("  " + cmd + " "), std::string::npos) << cmd << " missing from lathe --help";
    for (const std::string& o : documented) EXPECT_TRUE(listed.count(o)) << o << " (lathe " << cmd << ") missing";
  }
}

TEST(CliFlags, VersionPrintsTheProjectVersion) {
  std::smatch m;
  const std::string cmake = source_file("CMakeLists.txt");
  ASSERT_TRUE(std::regex_search(cmake, m, std::regex(R"(project\(lathe VERSION ([0-9.]+))"))) << "no project VERSION";
  for (const std::string args : {"--version", "version"}) {
    auto r = run_lathe_bounded(args);
    EXPECT_EQ(r.first, 0) << r.second;
    EXPECT_EQ(r.second.rfind("lathe " + m[1].str(), 0), 0u) << r.second;
  }
}

// Every write checks its result, standard output too: a full disk under `lathe ... > file` is an error
// naming standard output, not a silently short file (the version line and a tokenize result).
TEST(CliFlags, AFailedWriteToStandardOutputIsAnError) {
  auto r = run_shell("{ timeout 60 " + testing::lathe_bin() + " --version > /dev/full; }");
  EXPECT_TRUE(is_clean_error(r, "writing standard output failed")) << r.second;
  const std::string dir = testing::scratch_dir("cli_flags_full_stdout");
  ASSERT_EQ(run_lathe_bounded("data synth --out " + dir + " --documents 1").first, 0);
  r = run_shell("{ echo '{\"text\": \"hi\"}' | timeout 60 " + testing::lathe_bin() + " tokenize " + dir +
                "/tokenizer > /dev/full; }");
  EXPECT_TRUE(is_clean_error(r, "No space left on device")) << r.second;
}

}  // namespace
}  // namespace lathe
