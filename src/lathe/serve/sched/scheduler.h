// The serving scheduler (spec serving.md §1, §4): single-threaded and pure over its sequences and the
// KV manager. Each engine step is schedule() -> runner -> update_from_output(). There is no prefill or
// decode phase: every sequence catches its num_computed_tokens up to its known tokens, a chunk at a
// time; a prompt, a prefix hit's remainder, a resumed sequence and a decode differ only in how far
// behind they are.
//
// Per step: running sequences first, decodes before partial prefills (so a long prompt cannot delay
// a token of a running stream), each taking min(remaining, budget left, chunk cap); when blocks run
// out the newest running sequence is preempted by recompute (all its blocks freed, computed tokens
// reset, back at the head of the waiting queue; its full blocks stay cached so re-admission hits).
// Then, only if nothing was preempted, waiting sequences are admitted in FCFS order (prefix lookup,
// admission check of the AdmissionMode, allocation).
//
// n > 1: a request becomes n sequences (choices). Choice 0 is admitted first; choices 1.. wait until
// its prompt has been computed, by which time its full prompt blocks are in the prefix cache, so their
// admission's prefix lookup shares those blocks (ref counts, no copy) and each computes only the last
// partial block of the prompt (at most P tokens). With prefix caching off they compute the prompt
// themselves. Tables are append-only, so shared blocks are never written.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "lathe/serve/kv_cache_manager.h"
#include "lathe/serve/sched/sched_policy.h"
#include "lathe/serve/sched/sched_request.h"
#include "lathe/serve/sched/scheduler_config.h"
#include "lathe/serve/sched/scheduler_output.h"

namespace lathe {

// Reported for every preemption (the server logs it and counts vllm:num_preemptions).
struct PreemptionEvent {
  int64_t step = 0;
  uint64_t seq_id = 0;
  uint64_t request_id = 0;
  int64_t lost_tokens = 0;  // computed tokens whose K/V must be recomputed
  int n_preemptions = 0;    // of this sequence so far, this one included
};
// One structured log line: "event=preemption step=7 request=3 seq=4 lost_tokens=96 seq_preemptions=1".
std::string format_preemption(const PreemptionEvent& e);

struct SchedulerStats {
  int64_t num_preemptions = 0;
};

class Scheduler {
 public:
  using PreemptionCallback = std::function<void(const PreemptionEvent&)>;

  // InvalidArgument naming the field on a bad config, or when one sequence of max_model_len tokens
  // cannot fit in the manager's blocks above the watermark (naming both numbers).
  Scheduler(const SchedulerConfig& config, KvCacheManager& kv, PreemptionCallback on_preemption = {});
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Queues a request's n choices (FCFS) and returns their seq ids. InvalidArgument naming the field:
  // empty prompt, prompt not shorter than max_model_len, n < 1, max_tokens < 1, min_tokens outside
  // [0, max_tokens], a request_id in use, or (kReserveOutput) a reservation larger than the pool.
  std::vector<uint64_t> add_request(SchedRequest request);

  // Decides this step; must be followed by update_from_output before the next schedule().
  SchedulerOutput schedule();
  // Appends the sampled tokens, advances num_computed_tokens, commits newly full blocks to the prefix
  // cache, checks stop conditions and frees finished sequences (their ids go in the next step's
  // finished_ids). InvalidArgument if `runner` samples for a partial chunk or misses a full one.
  std::vector<SeqOutput> update_from_output(const SchedulerOutput& out, const ModelRunnerOutput& runner);
  // Aborts every choice of a request (a client disconnect): frees their blocks; one kAbort output per
  // choice, empty if the request is unknown or finished. Between steps only.
  std::vector<SeqOutput> abort_request(uint64_t request_id);
  // Ends one choice of a request while its siblings go on (the frontend matched a stop string in it):
  // frees its blocks; one output with finish `reason` (not kNone) and no token, none if the choice is
  // unknown or finished. Between steps only.
  std::vector<SeqOutput> finish_choice(uint64_t request_id, int index, FinishReason reason);

  int64_t n_waiting() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t n_running() const { return static_cast<int64_t>(running_.size()); }
  bool has_unfinished() const { return !seqs_.empty(); }
  const SchedSeq* seq(uint64_t seq_id) const;  // nullptr once finished
  std::vector<uint64_t> waiting_ids() const { return {waiting_.begin(), waiting_.end()}; }  // head first
  std::span<const uint64_t> running_ids() const { return running_; }  // admission order, newest last
  int64_t reserved_blocks() const { return reserved_blocks_; }  // kReserveOutput: sum over running
  const SchedulerStats& stats() const { return stats_; }

 private:
  struct Step;  // the step being built (scheduler.cc)

  std::vector<uint64_t> decode_first_order() const;
  void schedule_running(SchedSeq& s, Step& st);
  void admit_waiting(Step& st);
  bool admission_fits(const SchedSeq& s, const KvPrefixHit& hit, int64_t n_tokens) const;
  bool prompt_ready(const SchedSeq& s) const;
  void take(SchedSeq& s, const Chunk& c, Step& st);
  void preempt(SchedSeq& victim, Step& st);
  void finish(SchedSeq& s);
  SchedulerOutput build_output(Step& st);
  KvRequest kv_request(const SchedSeq& s) const;
  int64_t reservation(const SchedSeq& s) const;

  SchedulerConfig config_;
  KvCacheManager& kv_;
  PreemptionCallback on_preemption_;
  int64_t watermark_blocks_ = 0;

  uint64_t next_seq_id_ = 1;
  int64_t step_ = 0;
  bool in_step_ = false;  // schedule() ran, update_from_output() not yet
  std::unordered_map<uint64_t, SchedSeq> seqs_;                  // every unfinished sequence
  std::unordered_map<uint64_t, std::vector<uint64_t>> choices_;  // request id -> its unfinished seq ids
  std::deque<uint64_t> waiting_;                                 // FCFS; preempted ones at the head
  std::vector<uint64_t> running_;                                // admission order
  std::vector<uint64_t> finished_since_step_;
  int64_t reserved_blocks_ = 0;
  SchedulerStats stats_;
};

}  // namespace lathe
