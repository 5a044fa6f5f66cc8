// Test doubles for the scheduler tests: a deterministic model runner that sees only SchedulerOutput,
// and a loop that steps schedule -> execute -> update until every request is done.
//
// FakeRunner keeps each sequence's tokens and block table from the outputs alone, "writes K/V" (the
// token id) into its block slots, and on every step checks that the slots of the positions already
// computed hold the right tokens (what attention would read). Its sampled token is a hash of that
// context and the choice index, so a sequence's tokens depend on its KV blocks being right, and are the
// same whenever its context is, preempted and recomputed or not.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "lathe/serve/sched/scheduler.h"

namespace lathe::sched_test {

// FNV-1a over the context and the index, into [100, 1100): never one of the small ids tests use as EOS.
inline int32_t hash_token(std::span<const int32_t> context, int index) {
  uint64_t h = 1469598103934665603ull ^ static_cast<uint64_t>(index);
  for (const int32_t t : context) h = (h ^ static_cast<uint32_t>(t)) * 1099511628211ull;
  return 100 + static_cast<int32_t>(h % 1000);
}

class FakeRunner {
 public:
  using TokenFn = std::function<int32_t(std::span<const int32_t> context, int index)>;
  explicit FakeRunner(int block_size, TokenFn fn = hash_token) : P_(block_size), fn_(std::move(fn)) {}

  ModelRunnerOutput execute(const SchedulerOutput& out) {
    for (const uint64_t id : out.finished_ids) EXPECT_EQ(seqs_.erase(id), 1u) << "finished seq " << id << " unknown";
    std::unordered_map<uint64_t, int64_t> computed;
    for (const NewSeqData& n : out.new_seqs) {
      EXPECT_FALSE(seqs_.count(n.seq_id)) << "seq " << n.seq_id << " sent as new twice";
      seqs_[n.seq_id] = {.tokens = n.token_ids, .table = n.block_ids, .index = n.index};
      computed[n.seq_id] = n.num_computed_tokens;
    }
    for (const CachedSeqData& c : out.cached_seqs) {
      Seq& s = seqs_.at(c.seq_id);
      if (c.resumed) s.table = c.block_ids;
      else s.table.insert(s.table.end(), c.block_ids.begin(), c.block_ids.end());
      computed[c.seq_id] = c.num_computed_tokens;
    }
    ModelRunnerOutput r;
    for (const auto& [id, n] : out.num_scheduled_tokens) {
      Seq& s = seqs_.at(id);
      const int64_t c = computed.at(id), end = c + n;
      EXPECT_LE(end, static_cast<int64_t>(s.tokens.size())) << "seq " << id;
      EXPECT_LE(end, static_cast<int64_t>(s.table.size()) * P_) << "seq " << id << ": too few blocks";
      if (end > static_cast<int64_t>(s.tokens.size()) || end > static_cast<int64_t>(s.table.size()) * P_) continue;
      for (int64_t pos = 0; pos < c; ++pos) kv_mismatches_ += slot(s, pos) != s.tokens[pos];  // attention's read
      for (int64_t pos = c; pos < end; ++pos) slot(s, pos) = s.tokens[pos];                   // this step's write
      if (end == static_cast<int64_t>(s.tokens.size())) {
        const int32_t t = fn_(s.tokens, s.index);
        s.tokens.push_back(t);
        r.sampled[id] = t;
      }
    }
    return r;
  }

  int64_t kv_mismatches() const { return kv_mismatches_; }
  int64_t n_known() const { return static_cast<int64_t>(seqs_.size()); }

 private:
  struct Seq {
    std::vector<int32_t> tokens;
    std::vector<int32_t> table;
    int index = 0;
  };
  int32_t& slot(const Seq& s, int64_t pos) {
    const int32_t block = s.table[pos / P_];
    EXPECT_NE(block, 0) << "the null block holds no K/V";
    std::vector<int32_t>& b = blocks_[block];
    b.resize(P_, -1);
    return b[pos % P_];
  }

  int P_;
  TokenFn fn_;
  std::unordered_map<uint64_t, Seq> seqs_;
  std::unordered_map<int32_t, std::vector<int32_t>> blocks_;  // block id -> [P] token ids written
  int64_t kv_mismatches_ = 0;
};

// What a run produced for one choice of one request.
struct ChoiceResult {
  std::vector<int32_t> tokens;
  std::optional<FinishReason> finish;
  int64_t finish_step = -1;
};
using RunResults = std::map<std::pair<uint64_t, int>, ChoiceResult>;  // (request id, index) -> result

inline void record(RunResults& results, const std::vector<SeqOutput>& outs, int64_t step) {
  for (const SeqOutput& o : outs) {
    ChoiceResult& c = results[{o.request_id, o.index}];
    if (o.new_token) c.tokens.push_back(*o.new_token);
    if (o.finish) {
      EXPECT_FALSE(c.finish) << "request " << o.request_id << " finished twice";
      c.finish = o.finish;
      c.finish_step = step;
    }
  }
}

// One engine step; `check` sees the output before the runner and the update.
inline void step_once(Scheduler& s, FakeRunner& r, RunResults& results,
                      const std::function<void(const SchedulerOutput&)>& check = {}) {
  const SchedulerOutput out = s.schedule();
  if (check) check(out);
  record(results, s.update_from_output(out, r.execute(out)), out.step);
}

inline RunResults run_to_completion(Scheduler& s, FakeRunner& r,
                                    const std::function<void(const SchedulerOutput&)>& check = {},
                                    int max_steps = 100000) {
  RunResults results;
  for (int i = 0; i < max_steps && s.has_unfinished(); ++i) step_once(s, r, results, check);
  EXPECT_FALSE(s.has_unfinished()) << "requests left after " << max_steps << " steps";
  return results;
}

}  // namespace lathe::sched_test
