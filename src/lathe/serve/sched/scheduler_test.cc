// Scheduler against the real KvCacheManager and a fake runner (sched_test_runner.h): budgets and caps
// every step, decode-first order, chunked prefill without starvation, preemption by recompute, the two
// admission modes, aborts, n > 1 choices sharing prompt blocks, stop conditions, blocks back to zero.
#include "lathe/serve/sched/scheduler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>

#include "lathe/base/error.h"
#include "lathe/serve/sched/sched_test_runner.h"

namespace lathe {
namespace {

using sched_test::FakeRunner;
using sched_test::RunResults;

constexpr int kP = 4;          // small blocks keep the prompts short
constexpr int32_t kEos = 2;

KvCacheManager make_kv(int64_t n_usable_blocks) {
  return KvCacheManager({.n_blocks = n_usable_blocks + 1, .block_size = kP, .hash_seed = 7});
}

SchedulerConfig make_config(SchedulerConfig c = {}) {
  if (c.max_model_len == 0) c.max_model_len = 64;
  if (c.eos_token_ids.empty()) c.eos_token_ids = {kEos};
  return c;
}

std::vector<int32_t> prompt_of(int n, int32_t first) {
  std::vector<int32_t> t(n);
  std::iota(t.begin(), t.end(), first);
  return t;
}

SchedRequest make_request(uint64_t id, int prompt_len, int64_t max_tokens, SchedRequestParams p = {}) {
  p.max_tokens = max_tokens;
  return {.request_id = id, .prompt = prompt_of(prompt_len, static_cast<int32_t>(10 + 7 * id)), .params = p};
}

void expect_all_blocks_free(const KvCacheManager& kv) { EXPECT_EQ(kv.n_free_blocks(), kv.n_usable_blocks()); }

TEST(Scheduler, BudgetCapSeqsAndPartialSlotsRespectedEveryStep) {
  KvCacheManager kv = make_kv(400);
  const SchedulerConfig cfg = make_config({.max_num_batched_tokens = 32, .max_num_seqs = 6, .max_num_partial_prefills = 2,
                                           .long_prefill_token_threshold = 8, .max_model_len = 128});
  Scheduler s(cfg, kv);
  for (uint64_t i = 0; i < 20; ++i) s.add_request(make_request(i, 3 + static_cast<int>(7 * i % 60), 1 + i % 9));
  FakeRunner runner(kP);
  int64_t n_steps = 0;
  const RunResults results = sched_test::run_to_completion(s, runner, [&](const SchedulerOutput& out) {
    ++n_steps;
    int64_t total = 0, partial = 0;
    for (const auto& [id, n] : out.num_scheduled_tokens) {
      total += n;
      EXPECT_GE(n, 1);
      EXPECT_LE(n, cfg.long_prefill_token_threshold);
      partial += n < s.seq(id)->remaining_tokens();
    }
    EXPECT_EQ(total, out.total_num_scheduled_tokens);
    EXPECT_LE(total, cfg.max_num_batched_tokens);
    EXPECT_LE(partial, cfg.max_num_partial_prefills);
    EXPECT_LE(s.n_running(), cfg.max_num_seqs);
    EXPECT_GT(total, 0) << "a step with work left scheduled nothing";
  });
  ASSERT_EQ(results.size(), 20u);
  for (const auto& [key, r] : results) {
    EXPECT_EQ(r.finish, FinishReason::kLength);
    EXPECT_EQ(static_cast<int64_t>(r.tokens.size()), 1 + static_cast<int64_t>(key.first % 9));
  }
  EXPECT_EQ(runner.kv_mismatches(), 0);
  EXPECT_EQ(s.stats().num_preemptions, 0);
  expect_all_blocks_free(kv);
  EXPECT_GT(n_steps, 10);
}

// A partial prefill admitted before two short requests: once those decode, the batch lists them first.
TEST(Scheduler, DecodesComeBeforePartialPrefills) {
  KvCacheManager kv = make_kv(100);
  Scheduler s(make_config({.max_num_batched_tokens = 8, .long_prefill_token_threshold = 4}), kv);
  const uint64_t c = s.add_request(make_request(1, 40, 4)).front();
  const uint64_t a = s.add_request(make_request(2, 2, 8)).front();
  const uint64_t b = s.add_request(make_request(3, 2, 8)).front();
  FakeRunner runner(kP);
  RunResults results;
  sched_test::step_once(s, runner, results, [&](const SchedulerOutput& out) {
    EXPECT_EQ(out.num_scheduled_tokens.at(c), 4);  // capped
    EXPECT_EQ(out.num_scheduled_tokens.at(a), 2);
    EXPECT_EQ(out.num_scheduled_tokens.at(b), 2);
  });
  ASSERT_EQ(std::vector<uint64_t>(s.running_ids().begin(), s.running_ids().end()), (std::vector<uint64_t>{c, a, b}));
  for (int i = 0; i < 3; ++i)
    sched_test::step_once(s, runner, results, [&](const SchedulerOutput& out) {
      ASSERT_EQ(out.cached_seqs.size(), 3u);
      EXPECT_EQ(out.cached_seqs[0].seq_id, a);  // decodes first, in admission order
      EXPECT_EQ(out.cached_seqs[1].seq_id, b);
      EXPECT_EQ(out.cached_seqs[2].seq_id, c);
      EXPECT_EQ(out.num_scheduled_tokens.at(a), 1);
      EXPECT_EQ(out.num_scheduled_tokens.at(b), 1);
      EXPECT_EQ(out.num_scheduled_tokens.at(c), 4);
    });
}

// One long prompt and short requests behind it: with a chunk cap the long one advances by the cap and
// the short ones run and finish in the same steps; without one, the short ones wait for its prefill.
TEST(Scheduler, ChunkCapKeepsShortRequestsMovingBesideALongPrompt) {
  for (const int64_t cap : {int64_t{8}, int64_t{0}}) {
    SCOPED_TRACE(cap);
    KvCacheManager kv = make_kv(200);
    Scheduler s(make_config({.max_num_batched_tokens = 16, .long_prefill_token_threshold = cap, .max_model_len = 256}), kv);
    const uint64_t long_id = s.add_request(make_request(0, 200, 2)).front();
    std::set<uint64_t> shorts;
    for (uint64_t i = 1; i <= 3; ++i) shorts.insert(s.add_request(make_request(i, 5, 4)).front());
    FakeRunner runner(kP);
    int64_t long_prompt_done_step = -1, steps_long_with_short = 0;
    const RunResults results = sched_test::run_to_completion(s, runner, [&](const SchedulerOutput& out) {
      const auto it = out.num_scheduled_tokens.find(long_id);
      if (it == out.num_scheduled_tokens.end()) return;
      if (cap > 0) {
        EXPECT_LE(it->second, cap);
      }
      const SchedSeq& l = *s.seq(long_id);
      if (long_prompt_done_step < 0 && l.num_computed_tokens + it->second >= l.n_prompt) long_prompt_done_step = out.step;
      for (const auto& [id, n] : out.num_scheduled_tokens) steps_long_with_short += shorts.count(id) > 0 && n >= 1;
    });
    for (uint64_t i = 1; i <= 3; ++i) {
      const auto& r = results.at({i, 0});
      EXPECT_EQ(r.tokens.size(), 4u);
      if (cap > 0) {
        EXPECT_LT(r.finish_step, long_prompt_done_step) << "short request " << i << " starved";
      } else {
        EXPECT_GT(r.finish_step, long_prompt_done_step) << "without a cap the long prefill takes every step's budget";
      }
    }
    if (cap > 0) {
      EXPECT_GT(steps_long_with_short, 3);
    }
    EXPECT_EQ(runner.kv_mismatches(), 0);
    expect_all_blocks_free(kv);
  }
}

// A load that cannot fit at once: 4 requests of 6 + 20 tokens (7 blocks each) in 12 blocks.
void add_growing_load(Scheduler& s) {
  for (uint64_t i = 0; i < 4; ++i) s.add_request(make_request(i, 6, 20));
}
constexpr int64_t kSmallPool = 12;

RunResults run_alone_reference() {
  KvCacheManager kv = make_kv(400);
  Scheduler s(make_config({.max_model_len = 40}), kv);
  add_growing_load(s);
  FakeRunner runner(kP);
  return sched_test::run_to_completion(s, runner);
}

TEST(Scheduler, PreemptionRecomputesTheNewestAndItStillFinishesTheSame) {
  KvCacheManager kv = make_kv(kSmallPool);
  std::vector<PreemptionEvent> events;
  Scheduler s(make_config({.max_model_len = 40, .admission = AdmissionMode::kLoose}), kv,
              [&](const PreemptionEvent& e) { events.push_back(e); });
  add_growing_load(s);
  FakeRunner runner(kP);
  RunResults results;
  for (uint64_t step = 0; s.has_unfinished(); ++step) {
    // A stream of one-token requests, so there is always someone to admit when a step preempts.
    if (step < 40) s.add_request(make_request(100 + step, 1, 1));
    // The sequence preemption must pick: the newest running one when the step starts.
    const std::vector<uint64_t> running_before(s.running_ids().begin(), s.running_ids().end());
    const SchedulerOutput out = s.schedule();
    if (!out.preempted_ids.empty()) {
      EXPECT_EQ(out.preempted_ids.front(), running_before.back());
      EXPECT_TRUE(out.new_seqs.empty()) << "admission in a step that preempted";
      for (const CachedSeqData& c : out.cached_seqs) EXPECT_FALSE(c.resumed) << "admission in a step that preempted";
      const std::vector<uint64_t> waiting = s.waiting_ids();
      ASSERT_GE(waiting.size(), out.preempted_ids.size());
      for (const uint64_t id : out.preempted_ids) {
        EXPECT_FALSE(kv.has_request(id)) << "a preempted sequence keeps blocks";
        EXPECT_EQ(s.seq(id)->num_computed_tokens, 0);
        EXPECT_EQ(s.seq(id)->status, SeqStatus::kWaiting);
        EXPECT_FALSE(out.num_scheduled_tokens.count(id));
        EXPECT_NE(std::find(waiting.begin(), waiting.begin() + static_cast<std::ptrdiff_t>(out.preempted_ids.size()), id),
                  waiting.begin() + static_cast<std::ptrdiff_t>(out.preempted_ids.size()))
            << "a preempted sequence is not at the head of the queue";
      }
    }
    sched_test::record(results, s.update_from_output(out, runner.execute(out)), out.step);
  }
  EXPECT_GT(s.stats().num_preemptions, 0);
  EXPECT_EQ(s.stats().num_preemptions, static_cast<int64_t>(events.size()));
  ASSERT_FALSE(events.empty());
  EXPECT_GT(events.front().lost_tokens, 0);
  EXPECT_EQ(format_preemption(events.front()).rfind("event=preemption step=", 0), 0u);
  EXPECT_EQ(runner.kv_mismatches(), 0);
  const RunResults alone = run_alone_reference();
  for (const auto& [key, r] : alone) {
    EXPECT_EQ(results.at(key).tokens, r.tokens) << "request " << key.first << " changed under preemption";
    EXPECT_EQ(results.at(key).finish, FinishReason::kLength);
  }
  expect_all_blocks_free(kv);
}

// The same load in both admission modes: reserving output never preempts (and still finishes the same
// tokens); the loose mode runs more at once and preempts.
TEST(Scheduler, OutputReservationNeverPreemptsWhereLooseAdmissionDoes) {
  int64_t max_running[2] = {0, 0}, preemptions[2] = {0, 0};
  const RunResults alone = run_alone_reference();
  for (const AdmissionMode mode : {AdmissionMode::kReserveOutput, AdmissionMode::kLoose}) {
    const int m = static_cast<int>(mode);
    KvCacheManager kv = make_kv(kSmallPool);
    Scheduler s(make_config({.max_model_len = 40, .admission = mode}), kv);
    add_growing_load(s);
    FakeRunner runner(kP);
    const RunResults results = sched_test::run_to_completion(s, runner, [&](const SchedulerOutput&) {
      max_running[m] = std::max(max_running[m], s.n_running());
      if (mode == AdmissionMode::kReserveOutput) {
        EXPECT_LE(s.reserved_blocks(), kv.n_usable_blocks() - watermark_blocks(0.01, kv.n_usable_blocks()));
      }
    });
    preemptions[m] = s.stats().num_preemptions;
    for (const auto& [key, r] : alone) EXPECT_EQ(results.at(key).tokens, r.tokens);
    EXPECT_EQ(runner.kv_mismatches(), 0);
    expect_all_blocks_free(kv);
    EXPECT_EQ(s.reserved_blocks(), 0);
  }
  EXPECT_EQ(preemptions[0], 0);
  EXPECT_GT(preemptions[1], 0);
  EXPECT_EQ(max_running[0], 1);  // 12 blocks hold one reservation of 2 + 5 blocks
  EXPECT_GT(max_running[1], 1);
}

TEST(Scheduler, AbortFreesBlocksAndTellsTheRunner) {
  KvCacheManager kv = make_kv(100);
  Scheduler s(make_config({.max_num_seqs = 1}), kv);
  const uint64_t run = s.add_request(make_request(1, 9, 30)).front();
  const uint64_t wait = s.add_request(make_request(2, 5, 30)).front();
  FakeRunner runner(kP);
  RunResults results;
  for (int i = 0; i < 3; ++i) sched_test::step_once(s, runner, results);
  ASSERT_TRUE(kv.has_request(run));
  ASSERT_EQ(s.waiting_ids(), std::vector<uint64_t>{wait});  // max_num_seqs 1 holds it back
  EXPECT_TRUE(s.abort_request(99).empty());

  const std::vector<SeqOutput> aborted = s.abort_request(1);
  ASSERT_EQ(aborted.size(), 1u);
  EXPECT_EQ(aborted[0].finish, FinishReason::kAbort);
  EXPECT_FALSE(aborted[0].new_token);
  EXPECT_FALSE(kv.has_request(run));
  EXPECT_EQ(s.seq(run), nullptr);
  expect_all_blocks_free(kv);
  const SchedulerOutput out = s.schedule();  // the waiting one takes its place
  EXPECT_EQ(out.finished_ids, std::vector<uint64_t>{run});
  ASSERT_EQ(out.new_seqs.size(), 1u);
  EXPECT_EQ(out.new_seqs[0].seq_id, wait);
  EXPECT_THROW(s.abort_request(2), InvalidArgument);  // mid-step
  s.update_from_output(out, runner.execute(out));

  // A request the runner never saw leaves no finished id behind.
  const uint64_t never = s.add_request(make_request(3, 5, 30)).front();
  ASSERT_EQ(s.abort_request(3).size(), 1u);
  EXPECT_EQ(s.seq(never), nullptr);
  s.abort_request(2);
  const SchedulerOutput last = s.schedule();
  EXPECT_EQ(last.finished_ids, std::vector<uint64_t>{wait});
  EXPECT_TRUE(last.num_scheduled_tokens.empty());
  s.update_from_output(last, runner.execute(last));
  EXPECT_FALSE(s.has_unfinished());
  expect_all_blocks_free(kv);
}

// n = 2: choice 1 is admitted once choice 0's prompt is computed and shares its full prompt blocks;
// choice 1 meets a stop id early and ends while choice 0 runs on.
TEST(Scheduler, ChoicesShareThePromptsBlocksAndFinishIndependently) {
  KvCacheManager kv = make_kv(100);
  Scheduler s(make_config(), kv);
  constexpr int kPrompt = 10;  // 2 full blocks (8 tokens) + 2: the hit covers 8
  SchedRequestParams p{.n = 2, .stop_token_ids = {77}};
  const std::vector<uint64_t> ids = s.add_request(make_request(5, kPrompt, 12, p));
  ASSERT_EQ(ids.size(), 2u);
  FakeRunner runner(kP, [](std::span<const int32_t> ctx, int index) {
    const int64_t n_out = static_cast<int64_t>(ctx.size()) - kPrompt;
    return index == 1 && n_out == 2 ? 77 : sched_test::hash_token(ctx, index);
  });
  RunResults results;
  sched_test::step_once(s, runner, results, [&](const SchedulerOutput& out) {
    ASSERT_EQ(out.new_seqs.size(), 1u);  // choice 1 waits for the prompt blocks
    EXPECT_EQ(out.new_seqs[0].seq_id, ids[0]);
  });
  sched_test::step_once(s, runner, results, [&](const SchedulerOutput& out) {
    ASSERT_EQ(out.new_seqs.size(), 1u);
    EXPECT_EQ(out.new_seqs[0].seq_id, ids[1]);
    EXPECT_EQ(out.new_seqs[0].index, 1);
    EXPECT_EQ(out.new_seqs[0].num_computed_tokens, 8);  // prefix hit
    EXPECT_EQ(out.num_scheduled_tokens.at(ids[1]), kPrompt - 8);
  });
  const std::span<const int32_t> t0 = kv.block_table(ids[0]), t1 = kv.block_table(ids[1]);
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(t0[i], t1[i]);
    EXPECT_EQ(kv.pool().block(t0[i]).ref_cnt, 2);
  }
  EXPECT_NE(t0[2], t1[2]);  // the partial last prompt block is each choice's own
  while (s.has_unfinished()) sched_test::step_once(s, runner, results);
  const auto& c0 = results.at({5, 0});
  const auto& c1 = results.at({5, 1});
  EXPECT_EQ(c1.finish, FinishReason::kStop);
  EXPECT_EQ(c1.tokens.size(), 3u);
  EXPECT_EQ(c1.tokens.back(), 77);
  EXPECT_EQ(c0.finish, FinishReason::kLength);
  EXPECT_EQ(c0.tokens.size(), 12u);
  EXPECT_LT(c1.finish_step, c0.finish_step);
  EXPECT_NE(c0.tokens[0], c1.tokens[0]);  // the runner's token depends on the choice index
  EXPECT_EQ(runner.kv_mismatches(), 0);
  expect_all_blocks_free(kv);
}

// A choice the frontend ends (a stop string) leaves at once: its blocks are freed, the runner is told
// in the next step's finished_ids, it is never scheduled again, and its sibling runs on to max_tokens.
TEST(Scheduler, FinishChoiceEndsOneChoiceWhileItsSiblingRunsOn) {
  KvCacheManager kv = make_kv(100);
  Scheduler s(make_config(), kv);
  const std::vector<uint64_t> ids = s.add_request(make_request(5, 10, 20, {.n = 2}));
  FakeRunner runner(kP);
  RunResults results;
  for (int i = 0; i < 4; ++i) sched_test::step_once(s, runner, results);
  ASSERT_EQ(results.at({5, 1}).tokens.size(), 3u);  // choice 1 joined one step after choice 0
  EXPECT_TRUE(s.finish_choice(5, 7, FinishReason::kStop).empty());  // no such choice
  EXPECT_TRUE(s.finish_choice(6, 0, FinishReason::kStop).empty());  // no such request
  const std::vector<SeqOutput> ended = s.finish_choice(5, 1, FinishReason::kStop);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].seq_id, ids[1]);
  EXPECT_EQ(ended[0].finish, FinishReason::kStop);
  EXPECT_FALSE(ended[0].new_token);
  EXPECT_EQ(s.seq(ids[1]), nullptr);
  EXPECT_FALSE(kv.has_request(ids[1]));
  EXPECT_TRUE(s.finish_choice(5, 1, FinishReason::kStop).empty());  // already ended
  sched_test::record(results, ended, -1);
  sched_test::step_once(s, runner, results, [&](const SchedulerOutput& out) {
    EXPECT_EQ(out.finished_ids, std::vector<uint64_t>{ids[1]});
    EXPECT_FALSE(out.num_scheduled_tokens.count(ids[1]));
    EXPECT_THROW(s.finish_choice(5, 0, FinishReason::kStop), InvalidArgument);  // mid-step
  });
  while (s.has_unfinished()) {
    sched_test::step_once(s, runner, results, [&](const SchedulerOutput& out) {
      EXPECT_FALSE(out.num_scheduled_tokens.count(ids[1]));
    });
  }
  EXPECT_EQ(results.at({5, 1}).tokens.size(), 3u);
  EXPECT_EQ(results.at({5, 0}).tokens.size(), 20u);
  EXPECT_EQ(results.at({5, 0}).finish, FinishReason::kLength);
  EXPECT_EQ(runner.kv_mismatches(), 0);
  expect_all_blocks_free(kv);
}

struct StopCase {
  const char* name;
  SchedRequestParams params;
  int64_t max_tokens;
  int64_t expect_tokens;
  FinishReason expect_finish;
  int32_t expect_stop_token;  // -1: none
};

TEST(Scheduler, StopConditions) {
  constexpr int kPrompt = 5;
  // EOS at every output from the 3rd on; 77 (a stop id when asked) at the 2nd.
  const auto token_fn = [](std::span<const int32_t> ctx, int index) {
    const int64_t n_out = static_cast<int64_t>(ctx.size()) - kPrompt + 1;  // position of the token sampled
    return n_out >= 3 ? kEos : n_out == 2 ? 77 : sched_test::hash_token(ctx, index);
  };
  const StopCase cases[] = {
      {"eos", {}, 10, 3, FinishReason::kStop, kEos},
      {"stop_token_ids", {.stop_token_ids = {77}}, 10, 2, FinishReason::kStop, 77},
      {"min_tokens", {.min_tokens = 5}, 10, 5, FinishReason::kStop, kEos},
      {"ignore_eos", {.ignore_eos = true}, 7, 7, FinishReason::kLength, -1},
      {"max_tokens", {}, 2, 2, FinishReason::kLength, -1},
  };
  for (const StopCase& c : cases) {
    SCOPED_TRACE(c.name);
    KvCacheManager kv = make_kv(100);
    Scheduler s(make_config(), kv);
    s.add_request(make_request(1, kPrompt, c.max_tokens, c.params));
    FakeRunner runner(kP, token_fn);
    std::optional<int32_t> stop_token;
    while (s.has_unfinished()) {
      const SchedulerOutput out = s.schedule();
      for (const SeqOutput& o : s.update_from_output(out, runner.execute(out)))
        if (o.finish) stop_token = o.stop_token;
    }
    EXPECT_EQ(stop_token.value_or(-1), c.expect_stop_token);
    expect_all_blocks_free(kv);
  }
  for (const StopCase& c : cases) {
    SCOPED_TRACE(c.name);
    KvCacheManager kv = make_kv(100);
    Scheduler s(make_config(), kv);
    s.add_request(make_request(1, kPrompt, c.max_tokens, c.params));
    FakeRunner runner(kP, token_fn);
    const RunResults r = sched_test::run_to_completion(s, runner);
    EXPECT_EQ(static_cast<int64_t>(r.at({1, 0}).tokens.size()), c.expect_tokens);
    EXPECT_EQ(r.at({1, 0}).finish, c.expect_finish);
  }
}

TEST(Scheduler, MaxModelLenCapsTheOutput) {
  KvCacheManager kv = make_kv(100);
  Scheduler s(make_config({.max_model_len = 32}), kv);
  s.add_request(make_request(1, 29, 100));
  FakeRunner runner(kP);
  const RunResults r = sched_test::run_to_completion(s, runner);
  EXPECT_EQ(r.at({1, 0}).tokens.size(), 3u);
  EXPECT_EQ(r.at({1, 0}).finish, FinishReason::kLength);
}

TEST(Scheduler, RejectsBadRequestsAndConfigs) {
  KvCacheManager kv = make_kv(20);
  Scheduler s(make_config({.max_model_len = 40}), kv);
  const auto rejects = [&](SchedRequest r, const char* field) {
    try {
      s.add_request(std::move(r));
      ADD_FAILURE() << "accepted a request with a bad " << field;
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  rejects(make_request(1, 0, 4), "prompt");
  rejects(make_request(1, 40, 4), "max_model_len");
  rejects(make_request(1, 4, 0), "max_tokens");
  rejects(make_request(1, 4, 4, {.n = 0}), "n must");
  rejects(make_request(1, 4, 4, {.min_tokens = 5}), "min_tokens");
  rejects(make_request(1, 4, 4, {.sampling = {.top_p = 0.f}}), "top_p");
  s.add_request(make_request(1, 4, 4));
  rejects(make_request(1, 4, 4), "request_id");
  EXPECT_EQ(s.n_waiting(), 1);

  KvCacheManager tiny = make_kv(8);  // 32 tokens
  EXPECT_THROW(Scheduler(make_config({.max_model_len = 40}), tiny), InvalidArgument);
  EXPECT_THROW(Scheduler(make_config({.max_num_batched_tokens = 0}), kv), InvalidArgument);
  EXPECT_THROW(Scheduler(make_config({.watermark = 1.0}), kv), InvalidArgument);
  // Reserving output: a request whose prompt and max_tokens outgrow the pool is refused up front.
  KvCacheManager small = make_kv(10);
  Scheduler r(make_config({.max_model_len = 36}), small);
  EXPECT_THROW(r.add_request(make_request(1, 21, 16)), InvalidArgument);  // 6 + ceil(15 / 4) blocks > 10 - 1
  r.add_request(make_request(2, 16, 16));                                 // 4 + 4 blocks fit
}

TEST(Scheduler, StepsMustAlternate) {
  KvCacheManager kv = make_kv(20);
  Scheduler s(make_config(), kv);
  s.add_request(make_request(1, 4, 4));
  const SchedulerOutput out = s.schedule();
  EXPECT_THROW(s.schedule(), InvalidArgument);
  EXPECT_THROW(s.update_from_output(out, {}), InvalidArgument);  // the full prompt needs a sampled token
  ModelRunnerOutput stray;
  stray.sampled[999] = 5;
  stray.sampled[out.num_scheduled_tokens.begin()->first] = 5;
  EXPECT_THROW(s.update_from_output(out, stray), InvalidArgument);  // a token for an unscheduled sequence
  FakeRunner runner(kP);
  EXPECT_EQ(s.update_from_output(out, runner.execute(out)).size(), 1u);  // the step survived both refusals
}

}  // namespace
}  // namespace lathe
