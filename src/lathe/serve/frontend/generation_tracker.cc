#include "lathe/serve/frontend/generation_tracker.h"

#include <utility>

namespace lathe::serve {

ApiError engine_failure(const std::string& error) {
  // Engine::admit reports the scheduler's InvalidArgument: the only refusal left after submit's checks
  // is the output reservation that no amount of waiting can make fit.
  if (error.find("[Scheduler::add_request]") != std::string::npos)
    return invalid_request("The request cannot fit in the server's KV cache: " + error, "max_tokens");
  return server_error("The engine failed: " + error);
}

namespace {

// The engine's prompt logprobs of one prompt as vLLM reports them: per prompt token 1..T-1, the top
// alternatives (ranks 1..k) and the prompt token with its own rank, each with its text.
std::vector<PromptPositionLogprobs> prompt_logprobs_entries(const tokenizer::Tokenizer& tok,
                                                            const std::vector<int32_t>& prompt,
                                                            const std::vector<SampledLogprobs>& lps) {
  auto text = [&](int32_t id) {
    const uint32_t ids[1] = {static_cast<uint32_t>(id)};
    return tok.decode(ids, /*skip_special_tokens=*/false);
  };
  std::vector<PromptPositionLogprobs> out;
  for (size_t i = 0; i < lps.size() && i + 1 < prompt.size(); ++i) {
    const int32_t token = prompt[i + 1];
    PromptPositionLogprobs entries;
    for (size_t j = 0; j < lps[i].top.size(); ++j) {
      const TopLogprob& t = lps[i].top[j];
      entries.push_back({.token_id = t.token, .token = text(t.token), .logprob = t.logprob,
                         .rank = t.token == token ? lps[i].rank : static_cast<int64_t>(j) + 1});
    }
    out.push_back(std::move(entries));
  }
  return out;
}

}  // namespace

GenerationTracker::GenerationTracker(const tokenizer::Tokenizer& tok, const PreparedGeneration& g)
    : tok_(tok), n_(g.n), prompts_(g.requests.size(), PromptState{.engine_open = g.n}) {
  for (size_t p = 0; p < g.requests.size(); ++p)
    if (g.requests[p].sampling.prompt_logprobs) prompts_[p].ids = g.requests[p].prompt;
  choices_.reserve(g.requests.size() * static_cast<size_t>(g.n));
  for (size_t p = 0; p < g.requests.size(); ++p)
    for (int i = 0; i < g.n; ++i) choices_.emplace_back(tok, g.text, g.echo[p]);
  open_ = static_cast<int64_t>(choices_.size());
  engine_ended_.assign(choices_.size(), false);
  prompt_logprobs_sent_.assign(choices_.size(), false);
  usage_.prompt_tokens = g.prompt_tokens;
}

GenerationTracker::Step GenerationTracker::on_engine_output(size_t prompt, const EngineOutput& o) {
  PromptState& ps = prompts_[prompt];
  const int index = static_cast<int>(prompt) * n_ + o.index;
  auto end_in_engine = [&] {
    if (engine_ended_[static_cast<size_t>(index)]) return;
    engine_ended_[static_cast<size_t>(index)] = true;
    --ps.engine_open;
  };
  if (o.finish) end_in_engine();
  Step step;
  if (finished_) return step;
  if (!o.error.empty()) {
    step.event = fail(engine_failure(o.error));
    return step;
  }
  // Each prompt counts once, as in prompt_tokens: its first choice's prefix-cache hit (the other choices
  // reuse that choice's blocks, which is sharing, not a cache hit).
  if (o.token && o.index == 0 && !ps.cached_counted) {
    ps.cached_counted = true;
    usage_.cached_tokens += o.n_cached_prompt;
  }
  ChoicePipeline& choice = choices_[static_cast<size_t>(index)];
  const bool was_open = !choice.finished();
  const int64_t tokens_before = choice.n_tokens();
  std::optional<ChoiceDelta> delta = choice.on_engine_output(o);
  usage_.completion_tokens += choice.n_tokens() - tokens_before;
  if (was_open && choice.finished()) {
    --open_;
    // A stop string ended it here (the engine's own finishes come with o.finish): the engine would go on
    // decoding it until max_tokens, for n > 1 as long as a sibling runs, so it is told to end it now.
    if (!engine_ended_[static_cast<size_t>(index)]) {
      end_in_engine();
      step.finish_engine_choice = o.index;
    }
  }
  // The prompt's logprobs come with choice 0's first token; every choice of the prompt reports them.
  if (o.prompt_logprobs && !ps.prompt_logprobs) ps.prompt_logprobs = prompt_logprobs_entries(tok_, ps.ids, *o.prompt_logprobs);
  if (ps.prompt_logprobs && !prompt_logprobs_sent_[static_cast<size_t>(index)]) {
    prompt_logprobs_sent_[static_cast<size_t>(index)] = true;
    if (!delta) delta.emplace();
    delta->prompt_logprobs = ps.prompt_logprobs;
  }
  finished_ = open_ == 0;
  if (!delta && !finished_) return step;
  GenerationOutput out{.finished = finished_, .usage = usage_};
  if (delta) {
    delta->index = index;
    out.choices.push_back(std::move(*delta));
  }
  step.event = std::move(out);
  return step;
}

GenerationOutput GenerationTracker::fail(ApiError error) {
  finished_ = true;
  return {.finished = true, .usage = usage_, .error = std::move(error)};
}

bool GenerationTracker::engine_running() const {
  for (const PromptState& p : prompts_)
    if (p.engine_open > 0) return true;
  return false;
}

}  // namespace lathe::serve
