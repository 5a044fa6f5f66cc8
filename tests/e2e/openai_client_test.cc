// `lathe serve` driven by the official openai npm package (tests/e2e/openai_client/e2e.mjs, Node): two
// servers on loopback with an API key, one on the random Qwen3 text model (completions, chat, streaming
// with usage, seeds, n, logprobs, every error case, a client abort) and one on the model that has
// memorised a tool call (tests/e2e/text_models.h: tool_calls, streamed and not); then SIGTERM drains
// both and each exits 0. Skipped when node, the openai package (`make setup`) or the Qwen3 tokenizer is
// missing. Run alone: ctest --test-dir build/release -R OpenAiClient --output-on-failure
#include <signal.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "cli_run.h"
#include "lathe/io/test_paths.h"
#include "lathe/models/test_text_model.h"
#include "text_models.h"

namespace lathe {
namespace {
namespace fs = std::filesystem;

const std::string kApiKey = "lathe-e2e-key";

std::string source_dir() {
#ifdef LATHE_SOURCE_DIR
  return LATHE_SOURCE_DIR;
#else
  return ".";
#endif
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// A `lathe serve` process on a free loopback port; SIGKILLed when the test ends without stopping it.
class Server {
 public:
  Server(const std::string& model_dir, const std::string& name, const std::string& log) : log_(log) {
    pid_ = testing::spawn_lathe_logged("serve " + model_dir + " --host 127.0.0.1 --port 0 --api-key " + kApiKey +
                                           " --served-model-name " + name + " --threads 1",
                                       log);
    if (pid_ > 0) port_ = testing::wait_for_listening_port(pid_, log, std::chrono::seconds(60));
  }
  ~Server() {
    if (pid_ > 0) testing::kill_and_reap(pid_);
  }
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  int port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::string log() const { return read_file(log_); }
  // SIGTERM: the server drains and exits; its exit code (-1: a signal ended it, or it hung for 30 s).
  int stop() {
    ::kill(pid_, SIGTERM);
    const int code = testing::wait_exit(pid_, std::chrono::seconds(30));
    pid_ = -1;
    return code;
  }

 private:
  std::string log_;
  pid_t pid_ = -1;
  int port_ = 0;
};

TEST(OpenAiClient, DrivesLatheServe) {
  const std::string client_dir = source_dir() + "/tests/e2e/openai_client";
  if (testing::run_shell("command -v node").first != 0) GTEST_SKIP() << "node is not installed (make setup)";
  if (!fs::exists(client_dir + "/node_modules/openai/package.json"))
    GTEST_SKIP() << "the openai npm package is not installed in " << client_dir << " (make setup)";
  const std::string text_dir = testing::qwen3_text_model_dir();
  if (text_dir.empty()) GTEST_SKIP() << "no qwen3 tokenizer under " << testing::tokenizers_root() << " (make setup)";

  const testing::ToolCallModel& tools = testing::tool_call_model();  // throws when training fails
  ASSERT_FALSE(tools.dir.empty());
  std::printf("tool-call model: %d prompt tokens, %d AdamW steps, made in %.1f s\n", tools.prompt_tokens, tools.steps,
              tools.seconds);
  const std::string scratch = testing::scratch_dir("openai_client");
  const std::string request_file = scratch + "/tool_request.json";
  std::ofstream(request_file) << testing::tool_call_request().dump(2);

  Server text(text_dir, "lathe-e2e-text", scratch + "/serve_text.log");
  ASSERT_GT(text.port(), 0) << "lathe serve (text model) did not come up:\n" << text.log();
  Server tool(tools.dir, "lathe-e2e-tools", scratch + "/serve_tools.log");
  ASSERT_GT(tool.port(), 0) << "lathe serve (tool-call model) did not come up:\n" << tool.log();

  const auto t0 = std::chrono::steady_clock::now();
  auto [code, out] = testing::run_shell(
      "timeout -k 5 300 node " + client_dir + "/e2e.mjs --base-url " + text.url() + " --api-key " + kApiKey +
      " --model lathe-e2e-text --tool-base-url " + tool.url() + " --tool-model lathe-e2e-tools --tool-request " +
      request_file);
  const double client_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%s(the openai client cases took %.1f s)\n", out.c_str(), client_s);
  EXPECT_EQ(code, 0) << "e2e.mjs failed (its output is above)\n--- text server log:\n" << text.log()
                     << "\n--- tool server log:\n" << tool.log();

  EXPECT_EQ(text.stop(), 0) << "the text server did not drain and exit 0 on SIGTERM:\n" << text.log();
  EXPECT_EQ(tool.stop(), 0) << "the tool server did not drain and exit 0 on SIGTERM:\n" << tool.log();
}

}  // namespace
}  // namespace lathe
