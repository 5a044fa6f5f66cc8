#include "lathe/serve/engine/model_runner.h"

#include <algorithm>
#include <utility>

#include "lathe/autograd/node.h"
#include "lathe/base/error.h"
#include "lathe/base/rng.h"
#include "lathe/serve/engine/lora_registry.h"

namespace lathe {

uint64_t choice_seed(uint64_t seed, int index) {
  return index == 0 ? seed : derive_key(seed, static_cast<uint64_t>(index));
}

ModelRunner::ModelRunner(const Model& model, const ModelRunnerConfig& config)
    : model_(model),
      config_(config),
      store_(paged_kv_store_config(model.config(), config.n_blocks, config.block_size, config.kv_dtype)),
      sampler_(model.config().vocab_size) {}

void ModelRunner::add_seq(const NewSeqData& d) {
  LATHE_CHECK_ARG(!seqs_.count(d.seq_id), "[ModelRunner] new sequence ", d.seq_id, " is already known");
  LATHE_CHECK_ARG(d.params != nullptr, "[ModelRunner] new sequence ", d.seq_id, " has no params");
  const SamplingParams& p = d.params->sampling;
  LATHE_CHECK_ARG(p.seed.has_value(), "[ModelRunner] sequence ", d.seq_id,
                  " has no sampling seed (the engine resolves one when the request is submitted)");
  SamplingState state(p, {.prompt = d.token_ids,
                          .eos_token_ids = config_.eos_token_ids,
                          .seed = choice_seed(*p.seed, d.index),
                          .vocab = model_.config().vocab_size});
  LATHE_CHECK_ARG(d.adapter_id == 0 || config_.loras != nullptr, "[ModelRunner] sequence ", d.seq_id,
                  " names LoRA adapter ", d.adapter_id, " but the runner serves none");
  const int32_t slot = d.adapter_id == 0 ? 0 : config_.loras->slot_of(d.adapter_id);
  seqs_.emplace(d.seq_id, Seq{.tokens = d.token_ids, .block_table = d.block_ids,
                              .num_computed = d.num_computed_tokens, .sampling = std::move(state),
                              .lora_slot = slot, .n_prompt = static_cast<int64_t>(d.token_ids.size()),
                              .prompt_logprobs = p.prompt_logprobs.has_value() && d.index == 0});
}

void ModelRunner::update_seq(const CachedSeqData& d) {
  const auto it = seqs_.find(d.seq_id);
  LATHE_CHECK_ARG(it != seqs_.end(), "[ModelRunner] cached sequence ", d.seq_id, " is unknown");
  Seq& s = it->second;
  // A resumed sequence lost its blocks to a preemption: its new table replaces the old one whole, and
  // its tokens (which the runner sampled) stay, to be recomputed from num_computed_tokens.
  if (d.resumed) s.block_table.clear();
  s.block_table.insert(s.block_table.end(), d.block_ids.begin(), d.block_ids.end());
  s.num_computed = d.num_computed_tokens;
}

ModelRunnerOutput ModelRunner::execute(const SchedulerOutput& out) {
  for (const uint64_t id : out.finished_ids) seqs_.erase(id);
  for (const NewSeqData& d : out.new_seqs) add_seq(d);
  for (const CachedSeqData& d : out.cached_seqs) update_seq(d);
  ModelRunnerOutput result;
  if (out.total_num_scheduled_tokens == 0) return result;

  // One chunk per scheduled sequence, in scheduling order (new ones first, as the scheduler lists them),
  // grouped by LoRA slot when adapters are served.
  chunks_.clear();
  rows_.clear();
  row_seqs_.clear();
  plan_.clear();
  int64_t n_out = 0;
  bool prompt_rows = false;
  auto add_chunk = [&](uint64_t id) {
    const auto n_it = out.num_scheduled_tokens.find(id);
    LATHE_CHECK_ARG(n_it != out.num_scheduled_tokens.end() && n_it->second >= 1, "[ModelRunner] sequence ", id,
                    " is listed but has no scheduled tokens");
    Seq& s = seqs_.at(id);
    const int64_t n = n_it->second, end = s.num_computed + n, known = static_cast<int64_t>(s.tokens.size());
    LATHE_CHECK_ARG(end <= known, "[ModelRunner] sequence ", id, " is scheduled up to token ", end, " but knows ",
                    known);
    // Only a chunk that reaches the last known token yields a token: a partial prefill's last row
    // predicts a prompt token that is already known.
    const bool samples = end == known;
    // The row at position p predicts token p + 1: prompt logprobs want p + 1 in (reported, n_prompt).
    RowPlan r{.id = id, .row0 = n_out, .start = s.num_computed, .samples = samples};
    if (s.prompt_logprobs) {
      r.lp_from = std::max(s.num_computed, s.n_prompt_logprobs);
      r.lp_to = std::min(end, s.n_prompt - 1);
    }
    const bool all = r.lp_from < r.lp_to;
    r.n_rows = all ? n : samples ? 1 : 0;
    prompt_rows = prompt_rows || all;
    n_out += r.n_rows;
    plan_.push_back(r);
    chunks_.push_back({.tokens = std::span<const int32_t>(s.tokens).subspan(s.num_computed, n),
                       .start = s.num_computed,
                       .block_table = s.block_table,
                       .want_last = samples,
                       .want_all = all,
                       .lora_slot = s.lora_slot});
    if (samples) {
      rows_.push_back(&s.sampling);
      row_seqs_.push_back(id);
    }
  };
  order_.clear();
  for (const NewSeqData& d : out.new_seqs) order_.push_back(d.seq_id);
  for (const CachedSeqData& d : out.cached_seqs) order_.push_back(d.seq_id);
  // Each adapter's rows one run: two small GEMMs per adapted Linear, whatever the batch.
  if (config_.loras && config_.loras->n_slots_used() > 0)
    std::stable_sort(order_.begin(), order_.end(),
                     [&](uint64_t a, uint64_t b) { return seqs_.at(a).lora_slot < seqs_.at(b).lora_slot; });
  for (const uint64_t id : order_) add_chunk(id);
  LATHE_CHECK_ARG(static_cast<int64_t>(chunks_.size()) == static_cast<int64_t>(out.num_scheduled_tokens.size()),
                  "[ModelRunner] ", out.num_scheduled_tokens.size(), " sequences have scheduled tokens but ",
                  chunks_.size(), " are listed in new_seqs and cached_seqs");

  NoGradGuard no_grad;
  const Tensor logits = model_.forward(cached_batch(store_, chunks_));  // [n_out, V]
  const int64_t V = model_.config().vocab_size;
  const float* x = logits.data<float>();
  const float* sample_rows = x;  // [rows_.size(), V]
  if (prompt_rows) {
    // Prompt rows sit between the sampled rows: gather the sampled ones (steps with prompt logprobs only).
    sample_logits_.resize(rows_.size() * static_cast<size_t>(V));
    size_t j = 0;
    for (const RowPlan& r : plan_)
      if (r.samples)
        std::copy_n(x + (r.row0 + r.n_rows - 1) * V, V, sample_logits_.data() + static_cast<int64_t>(j++) * V);
    sample_rows = sample_logits_.data();
  }
  sampled_.resize(rows_.size());
  if (!rows_.empty()) sampler_.sample(sample_rows, rows_, sampled_);

  for (const RowPlan& r : plan_) {
    Seq& s = seqs_.at(r.id);
    // The chunk that samples the first token is listed even with no prompt rows (a one-token prompt).
    if (s.prompt_logprobs && r.samples && static_cast<int64_t>(s.tokens.size()) == s.n_prompt)
      result.prompt_logprobs[r.id];
    if (r.lp_from >= r.lp_to) continue;
    const int k = *s.sampling.params().prompt_logprobs;
    prompt_top_.resize(k < 0 ? static_cast<size_t>(V) + 1 : static_cast<size_t>(k) + 1);
    std::vector<SampledLogprobs>& lps = result.prompt_logprobs[r.id];
    for (int64_t pos = r.lp_from; pos < r.lp_to; ++pos) {
      const float* row = x + (r.row0 + pos - r.start) * V;  // position pos predicts token pos + 1
      const SampledToken t = sampler_.prompt_logprobs(row, s.tokens[pos + 1], k, prompt_top_);
      lps.push_back({.logprob = t.logprob, .rank = t.rank, .top = {t.top.begin(), t.top.end()}});
    }
    s.n_prompt_logprobs = r.lp_to;
  }
  for (size_t j = 0; j < rows_.size(); ++j) {
    const uint64_t id = row_seqs_[j];
    const SampledToken& t = sampled_[j];
    seqs_.at(id).tokens.push_back(t.token);
    result.sampled.emplace(id, t.token);
    if (rows_[j]->params().logprobs)
      result.logprobs.emplace(id, SampledLogprobs{.logprob = t.logprob, .rank = t.rank,
                                                  .top = {t.top.begin(), t.top.end()}});
  }
  for (const auto& [id, n] : out.num_scheduled_tokens) seqs_.at(id).num_computed += n;
  return result;
}

}  // namespace lathe
