// Scheduler: one step's decisions (schedule), the step's results (update_from_output), aborts.
#include "lathe/serve/sched/scheduler.h"

#include <algorithm>
#include <iterator>
#include <limits>

#include "lathe/base/error.h"
#include "lathe/models/paged_kv_store.h"

namespace lathe {

struct Scheduler::Step {
  StepBudget budget;
  std::vector<uint64_t> order;                   // scheduled sequences, in scheduling order
  std::unordered_map<uint64_t, Chunk> chunks;    // seq id -> its chunk
  std::vector<uint64_t> preempted;
};

namespace {

const SchedulerConfig& checked(const SchedulerConfig& c) {
  LATHE_CHECK_ARG(c.max_num_batched_tokens >= 1, "[Scheduler] max_num_batched_tokens must be >= 1, got ",
                  c.max_num_batched_tokens);
  LATHE_CHECK_ARG(c.max_num_seqs >= 1, "[Scheduler] max_num_seqs must be >= 1, got ", c.max_num_seqs);
  LATHE_CHECK_ARG(c.max_num_partial_prefills >= 1, "[Scheduler] max_num_partial_prefills must be >= 1, got ",
                  c.max_num_partial_prefills);
  LATHE_CHECK_ARG(c.long_prefill_token_threshold >= 0, "[Scheduler] long_prefill_token_threshold must be >= 0, got ",
                  c.long_prefill_token_threshold);
  LATHE_CHECK_ARG(c.max_model_len >= 2, "[Scheduler] max_model_len must be >= 2, got ", c.max_model_len);
  LATHE_CHECK_ARG(c.watermark >= 0 && c.watermark < 1, "[Scheduler] watermark must be in [0, 1), got ", c.watermark);
  LATHE_CHECK_ARG(static_cast<uint8_t>(c.admission) < static_cast<uint8_t>(AdmissionMode::kCount),
                  "[Scheduler] admission must be an AdmissionMode");
  return c;
}

template <class C>
void erase_value(C& c, uint64_t v) {
  const auto it = std::find(c.begin(), c.end(), v);
  LATHE_ASSERT(it != c.end(), "sequence ", v, " missing from its queue");
  c.erase(it);
}

}  // namespace

std::string format_preemption(const PreemptionEvent& e) {
  return str_cat("event=preemption step=", e.step, " request=", e.request_id, " seq=", e.seq_id,
                 " lost_tokens=", e.lost_tokens, " seq_preemptions=", e.n_preemptions);
}

Scheduler::Scheduler(const SchedulerConfig& config, KvCacheManager& kv, PreemptionCallback on_preemption)
    : config_(checked(config)), kv_(kv), on_preemption_(std::move(on_preemption)),
      watermark_blocks_(watermark_blocks(config.watermark, kv.n_usable_blocks())) {
  // One sequence alone must always fit, or it could be preempted forever.
  const int64_t need = kv_blocks_for(config_.max_model_len, kv.block_size());
  LATHE_CHECK_ARG(need <= kv.n_usable_blocks() - watermark_blocks_, "[Scheduler] max_model_len ",
                  config_.max_model_len, " needs ", need, " KV blocks of ", kv.block_size(), " tokens, but the pool has ",
                  kv.n_usable_blocks(), " usable blocks (", watermark_blocks_, " kept free by the watermark)");
}

const SchedSeq* Scheduler::seq(uint64_t seq_id) const {
  const auto it = seqs_.find(seq_id);
  return it == seqs_.end() ? nullptr : &it->second;
}

KvRequest Scheduler::kv_request(const SchedSeq& s) const {
  return {.id = s.seq_id, .tokens = s.tokens, .n_computed = s.num_computed_tokens};
}

int64_t Scheduler::reservation(const SchedSeq& s) const {
  return output_reservation_blocks(s.n_prompt, s.max_output, kv_.block_size());
}

std::vector<uint64_t> Scheduler::add_request(SchedRequest r) {
  const int64_t n_prompt = static_cast<int64_t>(r.prompt.size());
  const SchedRequestParams& p = r.params;
  LATHE_CHECK_ARG(n_prompt >= 1, "[Scheduler::add_request] prompt must not be empty");
  LATHE_CHECK_ARG(n_prompt < config_.max_model_len, "[Scheduler::add_request] prompt has ", n_prompt,
                  " tokens; max_model_len ", config_.max_model_len, " leaves no room for output");
  LATHE_CHECK_ARG(p.n >= 1, "[Scheduler::add_request] n must be >= 1, got ", p.n);
  LATHE_CHECK_ARG(p.max_tokens >= 1, "[Scheduler::add_request] max_tokens must be >= 1, got ", p.max_tokens);
  LATHE_CHECK_ARG(p.min_tokens >= 0 && p.min_tokens <= p.max_tokens, "[Scheduler::add_request] min_tokens must be in [0, max_tokens = ",
                  p.max_tokens, "], got ", p.min_tokens);
  LATHE_CHECK_ARG(!choices_.count(r.request_id), "[Scheduler::add_request] request_id ", r.request_id, " is in use");
  // Ranges only: the engine checks token ids (logit_bias, stop_token_ids) against the model's vocabulary.
  check_sampling_params(p.sampling, std::numeric_limits<int32_t>::max());

  SchedSeq s{.request_id = r.request_id, .tokens = std::move(r.prompt), .n_prompt = n_prompt,
             .max_output = std::min(p.max_tokens, config_.max_model_len - n_prompt),
             .params = std::make_shared<const SchedRequestParams>(std::move(r.params)),
             .cache_keys = std::move(r.cache_keys)};
  if (config_.admission == AdmissionMode::kReserveOutput) {
    const int64_t need = reservation(s), room = kv_.n_usable_blocks() - watermark_blocks_;
    LATHE_CHECK_ARG(need <= room, "[Scheduler::add_request] prompt (", n_prompt, " tokens) and max_tokens (", s.max_output,
                    ") reserve ", need, " KV blocks; the pool admits at most ", room);
  }
  std::vector<uint64_t>& ids = choices_[r.request_id];
  for (int i = 0; i < s.params->n; ++i) {
    SchedSeq c = s;
    c.seq_id = next_seq_id_++;
    c.index = i;
    if (i > 0) c.wait_for_prompt_of = ids.front();
    ids.push_back(c.seq_id);
    waiting_.push_back(c.seq_id);
    seqs_.emplace(c.seq_id, std::move(c));
  }
  return ids;
}

SchedulerOutput Scheduler::schedule() {
  LATHE_CHECK_ARG(!in_step_, "[Scheduler::schedule] step ", step_, " awaits its update_from_output");
  Step st{.budget = {.tokens_left = config_.max_num_batched_tokens,
                     .partial_slots_left = config_.max_num_partial_prefills}};
  for (const uint64_t id : decode_first_order()) {
    if (st.budget.tokens_left == 0) break;
    SchedSeq& s = seqs_.at(id);
    if (s.status == SeqStatus::kRunning) schedule_running(s, st);  // else preempted earlier this step
  }
  // Blocks taken back by a preemption are for the running sequences, not for newcomers.
  if (st.preempted.empty()) admit_waiting(st);
  ++step_;
  in_step_ = true;
  return build_output(st);
}

// Running sequences with one token to catch up (decodes) first, then the partial prefills, each group
// in admission order.
std::vector<uint64_t> Scheduler::decode_first_order() const {
  std::vector<uint64_t> order = running_;
  std::stable_partition(order.begin(), order.end(),
                        [this](uint64_t id) { return seqs_.at(id).remaining_tokens() == 1; });
  return order;
}

void Scheduler::schedule_running(SchedSeq& s, Step& st) {
  const Chunk c = chunk_for(s.remaining_tokens(), st.budget, config_);
  if (c.n_tokens == 0) return;
  while (!kv_.allocate_slots(kv_request(s), c.n_tokens)) {
    // Out of blocks: recompute the newest running sequence later (FCFS), possibly s itself.
    const uint64_t victim = running_.back();
    preempt(seqs_.at(victim), st);
    if (victim == s.seq_id) return;
  }
  take(s, c, st);
}

void Scheduler::admit_waiting(Step& st) {
  for (auto it = waiting_.begin(); it != waiting_.end();) {
    if (st.budget.tokens_left == 0 || n_running() >= config_.max_num_seqs) return;
    SchedSeq& s = seqs_.at(*it);
    if (!prompt_ready(s)) {  // a later choice waits for choice 0's prompt blocks
      ++it;
      continue;
    }
    KvPrefixHit hit = kv_.find_cached_prefix(s.tokens, s.cache_keys);
    // Prompt logprobs need the logits of every prompt row: choice 0 of such a request computes its
    // prompt whole, as vLLM skips the prefix cache for it (a re-admission after its prompt was computed
    // may hit: its prompt logprobs are out already).
    if (s.index == 0 && s.params->sampling.prompt_logprobs && !s.prompt_computed) {
      hit.blocks.clear();
      hit.hashes.clear();
      hit.n_tokens = 0;
    }
    const Chunk c = chunk_for(s.num_tokens() - hit.n_tokens, st.budget, config_);
    if (c.n_tokens == 0) {  // no partial-prefill slot left: a shorter request behind it may finish
      ++it;
      continue;
    }
    // FCFS: nothing overtakes a request that waits for blocks.
    if (!admission_fits(s, hit, c.n_tokens)) return;
    if (!kv_.allocate_slots({.id = s.seq_id, .tokens = s.tokens, .n_computed = 0}, c.n_tokens, &hit)) return;
    it = waiting_.erase(it);
    s.status = SeqStatus::kRunning;
    s.num_computed_tokens = hit.n_tokens;
    // A re-admission after preemption finds its own blocks: only the first admission counts as cached.
    if (s.n_preemptions == 0) s.n_cached_prompt = std::min(hit.n_tokens, s.n_prompt);
    s.reserved_blocks = config_.admission == AdmissionMode::kReserveOutput ? reservation(s) : 0;
    reserved_blocks_ += s.reserved_blocks;
    running_.push_back(s.seq_id);
    take(s, c, st);
  }
}

bool Scheduler::admission_fits(const SchedSeq& s, const KvPrefixHit& hit, int64_t n_tokens) const {
  if (config_.admission == AdmissionMode::kReserveOutput)
    return reservation_fits(reserved_blocks_, reservation(s), kv_.n_usable_blocks(), watermark_blocks_);
  const int64_t n_new = kv_.n_blocks_to_allocate({.id = s.seq_id, .tokens = s.tokens, .n_computed = 0}, n_tokens, &hit);
  return chunk_fits(n_new, kv_.n_free_blocks(), watermark_blocks_);
}

bool Scheduler::prompt_ready(const SchedSeq& s) const {
  if (!s.wait_for_prompt_of) return true;
  const auto first = seqs_.find(*s.wait_for_prompt_of);
  return first == seqs_.end() || first->second.prompt_computed;
}

void Scheduler::take(SchedSeq& s, const Chunk& c, Step& st) {
  st.budget.tokens_left -= c.n_tokens;
  if (c.partial) --st.budget.partial_slots_left;
  st.chunks[s.seq_id] = c;
  st.order.push_back(s.seq_id);
}

void Scheduler::preempt(SchedSeq& v, Step& st) {
  kv_.free(v.seq_id);
  erase_value(running_, v.seq_id);
  reserved_blocks_ -= v.reserved_blocks;
  v.reserved_blocks = 0;
  if (const auto it = st.chunks.find(v.seq_id); it != st.chunks.end()) {  // scheduled earlier this step
    st.budget.tokens_left += it->second.n_tokens;
    if (it->second.partial) ++st.budget.partial_slots_left;
    st.chunks.erase(it);
    erase_value(st.order, v.seq_id);
  }
  const PreemptionEvent e{.step = step_, .seq_id = v.seq_id, .request_id = v.request_id,
                          .lost_tokens = v.num_computed_tokens, .n_preemptions = ++v.n_preemptions};
  v.status = SeqStatus::kWaiting;
  v.num_computed_tokens = 0;
  v.resumed = true;
  v.n_blocks_sent = 0;
  waiting_.push_front(v.seq_id);
  ++stats_.num_preemptions;
  st.preempted.push_back(v.seq_id);
  if (on_preemption_) on_preemption_(e);
}

SchedulerOutput Scheduler::build_output(Step& st) {
  SchedulerOutput out{.step = step_, .preempted_ids = std::move(st.preempted),
                      .finished_ids = std::move(finished_since_step_)};
  finished_since_step_.clear();
  for (const uint64_t id : st.order) {
    SchedSeq& s = seqs_.at(id);
    const std::span<const int32_t> table = kv_.block_table(id);
    if (!s.sent_to_runner) {
      out.new_seqs.push_back({.seq_id = id, .request_id = s.request_id, .index = s.index, .token_ids = s.tokens,
                              .params = s.params, .adapter_id = s.cache_keys.adapter_id,
                              .block_ids = {table.begin(), table.end()}, .num_computed_tokens = s.num_computed_tokens});
    } else {
      const auto first_new = table.begin() + (s.resumed ? 0 : s.n_blocks_sent);
      out.cached_seqs.push_back({.seq_id = id, .resumed = s.resumed, .block_ids = {first_new, table.end()},
                                 .num_computed_tokens = s.num_computed_tokens});
    }
    s.sent_to_runner = true;
    s.resumed = false;
    s.n_blocks_sent = static_cast<int64_t>(table.size());
    const int64_t n = st.chunks.at(id).n_tokens;
    out.num_scheduled_tokens[id] = n;
    out.total_num_scheduled_tokens += n;
  }
  return out;
}

std::vector<SeqOutput> Scheduler::update_from_output(const SchedulerOutput& out, const ModelRunnerOutput& runner) {
  LATHE_CHECK_ARG(in_step_ && out.step == step_, "[Scheduler::update_from_output] output of step ", out.step,
                  " but the scheduled step is ", step_, in_step_ ? "" : " (already updated)");
  // Checked whole before any change, so a bad runner output leaves the step pending and intact.
  for (const auto& [id, n] : out.num_scheduled_tokens) {
    const SchedSeq& s = seqs_.at(id);
    const bool reached = s.num_computed_tokens + n == s.num_tokens();
    LATHE_CHECK_ARG(reached == (runner.sampled.count(id) > 0), "[Scheduler::update_from_output] sequence ", id,
                    reached ? " computed all its tokens but has no sampled token" : " is mid-prefill but has a sampled token");
  }
  for (const auto& [id, token] : runner.sampled)
    LATHE_CHECK_ARG(out.num_scheduled_tokens.count(id), "[Scheduler::update_from_output] sampled token for sequence ", id,
                    ", which was not scheduled");
  in_step_ = false;
  std::vector<SeqOutput> outputs;
  for (const auto& [id, n] : out.num_scheduled_tokens) {
    SchedSeq& s = seqs_.at(id);
    s.num_computed_tokens += n;
    const auto sampled = runner.sampled.find(id);
    const bool reached = sampled != runner.sampled.end();
    if (s.num_computed_tokens >= s.n_prompt) s.prompt_computed = true;
    kv_.commit_full_blocks(kv_request(s));
    if (!reached) continue;
    s.tokens.push_back(sampled->second);
    SeqOutput o{.seq_id = id, .request_id = s.request_id, .index = s.index, .new_token = sampled->second,
                .n_cached_prompt = s.n_cached_prompt};
    o.finish = check_stop(s, config_.eos_token_ids, config_.max_model_len);
    if (o.finish == FinishReason::kStop) o.stop_token = sampled->second;
    if (o.finish) finish(s);
    outputs.push_back(o);
  }
  return outputs;
}

std::vector<SeqOutput> Scheduler::abort_request(uint64_t request_id) {
  LATHE_CHECK_ARG(!in_step_, "[Scheduler::abort_request] step ", step_, " awaits its update_from_output");
  std::vector<SeqOutput> outputs;
  const auto it = choices_.find(request_id);
  if (it == choices_.end()) return outputs;
  for (const uint64_t id : std::vector<uint64_t>(it->second)) {
    SchedSeq& s = seqs_.at(id);
    outputs.push_back({.seq_id = id, .request_id = request_id, .index = s.index, .finish = FinishReason::kAbort});
    finish(s);
  }
  return outputs;
}

std::vector<SeqOutput> Scheduler::finish_choice(uint64_t request_id, int index, FinishReason reason) {
  LATHE_CHECK_ARG(!in_step_, "[Scheduler::finish_choice] step ", step_, " awaits its update_from_output");
  LATHE_CHECK_ARG(reason != FinishReason::kNone && reason != FinishReason::kCount,
                  "[Scheduler::finish_choice] the reason must be stop, length or abort");
  std::vector<SeqOutput> outputs;
  const auto it = choices_.find(request_id);
  if (it == choices_.end()) return outputs;
  for (const uint64_t id : it->second) {
    SchedSeq& s = seqs_.at(id);
    if (s.index != index) continue;
    outputs.push_back({.seq_id = id, .request_id = request_id, .index = index, .finish = reason});
    finish(s);  // may erase choices_[request_id]: leave the loop at once
    break;
  }
  return outputs;
}

void Scheduler::finish(SchedSeq& s) {
  const uint64_t id = s.seq_id, request_id = s.request_id;
  if (s.status == SeqStatus::kRunning) {
    kv_.free(id);
    erase_value(running_, id);
    reserved_blocks_ -= s.reserved_blocks;
  } else {
    erase_value(waiting_, id);
  }
  if (s.sent_to_runner) finished_since_step_.push_back(id);
  std::vector<uint64_t>& ids = choices_.at(request_id);
  erase_value(ids, id);
  if (ids.empty()) choices_.erase(request_id);
  seqs_.erase(id);  // s is gone from here on
}

}  // namespace lathe
