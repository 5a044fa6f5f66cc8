// One OpenAI request's choices across its engine requests: engine outputs in, the request's events out.
// Choices are indexed prompt-major as OpenAI does (index = prompt * n + choice); each runs its own
// ChoicePipeline. The tracker keeps the usage totals, sends the finished event once every choice has
// finished, and says when the engine should end a choice that ended here while the engine still decodes
// it (a stop string, which the engine does not see), so that choice stops taking compute at once.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "lathe/serve/frontend/choice_pipeline.h"
#include "lathe/serve/frontend/engine_requests.h"
#include "lathe/serve/http/output.h"

namespace lathe::serve {

// The client's error for an engine output that carries one: the scheduler refusing a request it can
// never fit (its max_tokens reservation exceeds the KV pool: 400 naming max_tokens), else a 500.
ApiError engine_failure(const std::string& error);

class GenerationTracker {
 public:
  // The tokenizer must outlive the tracker. Not thread-safe: every engine request of one OpenAI request
  // delivers on the engine thread, one output at a time.
  GenerationTracker(const tokenizer::Tokenizer& tok, const PreparedGeneration& g);

  struct Step {
    std::optional<GenerationOutput> event;  // to send (nothing after the finished event)
    // The output's choice (its index in its engine request) finished here while the engine still decodes
    // it: end it there too (Engine::finish_choice, finish kStop).
    std::optional<int> finish_engine_choice;
  };
  // One output of the engine request of prompt `prompt`.
  Step on_engine_output(size_t prompt, const EngineOutput& o);
  // The request failed (a detokeniser error, say): its last event, carrying `error`.
  GenerationOutput fail(ApiError error);

  bool finished() const { return finished_; }
  // Whether a choice of this request may still be running in the engine (not finished there, nor
  // asked to finish).
  bool engine_running() const;
  const Usage& usage() const { return usage_; }

 private:
  struct PromptState {
    int engine_open = 0;          // choices the engine has not finished nor been asked to finish
    bool cached_counted = false;  // its prefix-cache hit is in usage_.cached_tokens
    std::vector<int32_t> ids;     // the prompt, kept when prompt_logprobs were asked for
    std::optional<std::vector<PromptPositionLogprobs>> prompt_logprobs;  // from choice 0's first output
  };
  const tokenizer::Tokenizer& tok_;
  int n_ = 1;
  std::vector<ChoicePipeline> choices_;  // [prompts * n]
  std::vector<bool> engine_ended_;       // [prompts * n]: the engine finished it, or was asked to
  std::vector<bool> prompt_logprobs_sent_;  // [prompts * n]: its delta carried its prompt's logprobs
  std::vector<PromptState> prompts_;
  int64_t open_ = 0;                     // choices not finished here
  Usage usage_;
  bool finished_ = false;
};

}  // namespace lathe::serve
