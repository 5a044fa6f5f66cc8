// The environment of multi-turn RL episodes (Tunix's agentic RL; docs/recipes.md "grpo.environment"): when a
// model turn ends in a tool call, the environment answers it; the answer is rendered as a tool message and the
// model continues (rollout/episode_rollout.h). Two kinds:
//   builtin   in-process: `calculator` (arguments.expression: + − × ÷ and parentheses over decimals) or `echo`
//             (answers the call's arguments), optionally after delay_ms (a slow tool, for tests and benches)
//   command   an external program (grpo.environment.command, an argv list) speaking JSON Lines on stdin /
//             stdout, one long-lived process per worker (rollout/json_lines_process.h). Request, one line:
//               {"episode": "p3.g1", "prompt_index": 3, "turn": 1, "text": "<the turn's text>",
//                "tool_call": {"name": ..., "arguments": {...}} or null (no JSON call between the markers)}
//             reply, one line: {"content": "<the tool's answer>", "done": false}; "done": true ends the episode
//             (the content is then not shown to the model). A process that exits, crashes, stays silent for
//             timeout_s or answers anything else is an EnvironmentError naming the command.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace lathe::rollout {

// One tool call of one episode, as the environment receives it.
struct ToolRequest {
  std::string episode;       // "p<prompt number>.g<sample>": unique within a generation batch
  int64_t prompt_index = 0;  // the prompt's row in the data
  int turn = 0;              // the model turn that made the call (1-based)
  std::string text;          // the turn's decoded text
  nlohmann::json call;       // {"name", "arguments"} between the tool-call markers, or null when that is not JSON
};

struct ToolResult {
  std::string content;  // the tool message's content
  bool done = false;    // true: the episode ends here
};

enum class EnvironmentKind : uint8_t { kBuiltin, kCommand, kCount };

// grpo.environment (docs/recipes.md).
struct EnvironmentSpec {
  EnvironmentKind kind = EnvironmentKind::kBuiltin;
  std::string builtin;                    // builtin: calculator | echo
  int64_t delay_ms = 0;                   // builtin: each answer comes this late
  std::vector<std::string> command;       // command: argv
  std::chrono::milliseconds timeout{30000};  // command: per call (timeout_s)
  int64_t max_turns = 4;                  // model turns per episode; a tool call in the last one ends it unanswered
  int64_t workers = 16;                   // environment calls running at once (command: one process each)
  std::string tool_call_start = "<tool_call>";  // Hermes / Qwen tool-call markers: a turn ends at the end
  std::string tool_call_end = "</tool_call>";   // marker, and the JSON between the two is the call
};

// From the grpo.environment mapping; InvalidArgument "<where>: grpo.environment.<key> = <v>: <rule>" for an
// unknown key, a wrong type or an impossible value.
EnvironmentSpec parse_environment_spec(const nlohmann::json& section, const std::string& where);
// The spec as the resolved recipe records it (every default written).
nlohmann::json environment_spec_json(const EnvironmentSpec& s);

class Environment {
 public:
  virtual ~Environment() = default;
  // How errors name it: "grpo.environment builtin calculator", "grpo.environment command `python3 env.py`".
  virtual const std::string& name() const = 0;
  // Answers one call. Called concurrently from worker threads numbered [0, workers); one worker's calls come
  // one at a time. EnvironmentError when the environment fails (not when the model's call is bad: that is an
  // answer saying so).
  virtual ToolResult call(const ToolRequest& c, int worker) = 0;
};

std::unique_ptr<Environment> make_environment(const EnvironmentSpec& s);

// The calculator's answer to an arithmetic expression ("2 * (3 + 4.5)" -> "15"), or a message starting
// "error: " for a malformed expression or a division by zero (an answer the model sees, not an exception).
std::string calculate(const std::string& expression);

}  // namespace lathe::rollout
