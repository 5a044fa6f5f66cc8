// TrainLoop::run: one LoopRun per run (model, optimizer, run folder, metrics), whose train() is the step
// loop; the objective supplies data, loss and eval (objective.h).
#include "lathe/train/train_loop.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <optional>
#include <thread>

#include "lathe/autograd/node.h"
#include "lathe/backend/cpu/peak_flops.h"
#include "lathe/base/error.h"
#include "lathe/base/rng.h"
#include "lathe/io/mapped_file.h"
#include "lathe/ops/elementwise.h"
#include "lathe/train/checkpoint.h"
#include "lathe/train/grad_bucketer.h"
#include "lathe/train/lora_params.h"
#include "lathe/train/memory_plan.h"
#include "lathe/train/param_groups.h"
#include "lathe/train/rank_sync.h"
#include "lathe/train/run_metrics.h"
#include "lathe/train/step_beacon.h"
#include "lathe/train/zero.h"

namespace lathe::train {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// Set by request_stop(), from a signal handler: a process-wide flag, read once per step.
std::atomic<bool> stop_requested{false};

// bf16 compute: the key of the stochastic rounding that writes the bf16 weight copies after `step`
// updates; a pure function, so a resumed run rebuilds the same copies. Not per rank, unlike llm.c `-w 1`
// (where each rank rounds only the shard it owns and then gathers it): here every rank rounds the whole
// replicated master, and the ranks must compute with the same weights for data parallelism to equal
// one process on the global batch.
uint64_t bf16_rounding_key(uint64_t seed, int64_t step) {
  return derive_key(derive_key(seed, hash_name("bf16 weights")), static_cast<uint64_t>(step));
}

std::string fmt(const char* f, double x) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), f, x);
  return buf;
}

// A step's micro-batches, summed on this rank, then (mean) averaged over micro-batches and ranks.
struct StepTotals {
  double loss = 0;
  double tokens = 0;  // summed, never averaged: the step's tokens over all ranks
  ObjectiveMetrics metrics;     // Σ value·weight, then the weighted mean
  std::vector<double> weights;  // [metrics.size()]: Σ weight (ObjectiveResult::metric_weights)
  void add(const ObjectiveResult& r);
  void average(int64_t grad_accum, dist::Communicator& comm);
};

void StepTotals::add(const ObjectiveResult& r) {
  loss += static_cast<double>(r.loss.item());
  tokens += static_cast<double>(r.tokens);
  LATHE_ASSERT(r.metric_weights.empty() || r.metric_weights.size() == r.metrics.size());
  if (metrics.empty()) {
    metrics = r.metrics;
    weights.assign(metrics.size(), 0.0);
    for (auto& m : metrics) m.second = 0;
  }
  LATHE_ASSERT(metrics.size() == r.metrics.size());  // an objective reports the same metrics every time
  for (size_t i = 0; i < metrics.size(); ++i) {
    const double w = r.metric_weights.empty() ? 1.0 : r.metric_weights[i];
    if (w != 0) metrics[i].second += r.metrics[i].second * w;  // a weight-0 value may be NaN
    weights[i] += w;
  }
}

// Every micro-batch holds as many counted tokens, so the step's mean is the mean of the micro means; a
// weighted metric is Σ value·weight / Σ weight (with unit weights the same division by accum, then world).
void StepTotals::average(int64_t grad_accum, dist::Communicator& comm) {
  const double accum = static_cast<double>(grad_accum);
  loss /= accum;
  for (size_t i = 0; i < metrics.size(); ++i) {
    metrics[i].second /= accum;
    weights[i] /= accum;
  }
  if (comm.size() > 1) {
    const double world = comm.size();
    std::vector<double> sums = {loss, tokens};  // one all-reduce for all of them
    for (const auto& m : metrics) sums.push_back(m.second);
    sums.insert(sums.end(), weights.begin(), weights.end());
    comm.all_reduce_sum(sums.data(), static_cast<int64_t>(sums.size()));
    loss = sums[0] / world;
    tokens = sums[1];
    for (size_t i = 0; i < metrics.size(); ++i) {
      metrics[i].second = sums[2 + i];
      weights[i] = sums[2 + metrics.size() + i];
    }
  }
  for (size_t i = 0; i < metrics.size(); ++i)
    metrics[i].second = weights[i] > 0 ? metrics[i].second / weights[i] : std::numeric_limits<double>::quiet_NaN();
}

// `,"name":value` for each metric, after a metrics.jsonl line's own keys (null for NaN: no items this step).
std::string metrics_json(const ObjectiveMetrics& metrics) {
  std::string out;
  for (const auto& [name, value] : metrics)
    out += str_cat(",", json(name).dump(), ":", std::isfinite(value) ? fmt("%.9g", value) : std::string("null"));
  return out;
}

// A rank's memory budget: memory.budget, or the machine's MemAvailable shared by the ranks that run on it,
// read before the run loads anything (bytes -1: unknown, the plan is printed but not checked).
struct MemoryBudget {
  int64_t bytes = -1;
  std::string source;  // where it came from, for the table
};

MemoryBudget memory_budget(const TrainConfig& cfg, const dist::Communicator& comm) {
  if (cfg.memory_budget > 0) return {cfg.memory_budget, "memory.budget"};
  const int64_t available = memory_available_bytes();
  if (available < 0) return {-1, "no budget: /proc/meminfo has no MemAvailable"};
  const int ranks = std::max(1, comm.local_size());
  return {available / ranks, ranks > 1 ? str_cat("MemAvailable / ", ranks, " ranks") : "MemAvailable"};
}

// One run() of a TrainLoop: everything that lives from the start to the last checkpoint. The constructor
// is the start (run folder, model, optimizer, resumed state, the objective's data, metrics file).
class LoopRun {
 public:
  LoopRun(const TrainConfig& cfg, const TrainerHooks& hooks, Objective& objective, StartMode mode, Context& ctx,
          std::unique_ptr<RunLock>& lock);
  TrainResult train();

 private:
  TrainResult train_steps();
  StepTotals accumulate_gradients(int64_t step);
  double optimizer_step(int64_t step, double lr);
  void report(int64_t step, const StepTotals& totals, double lr, double gnorm, double step_s, double elapsed_s);
  double evaluate(int64_t step);
  void plan_memory(const MemoryBudget& budget, const ForwardOptions& forward);
  std::string checkpoint(int64_t step);
  IoError metrics_stop(int64_t step);
  std::string metrics_problem() const;
  bool metrics_failed() { return any_rank_failed(comm_, !metrics_.error().empty()); }
  void say(const std::string& m) const {
    if (hooks_.on_message && lead_) hooks_.on_message(m);
  }

  const TrainConfig& cfg_;
  const TrainerHooks& hooks_;
  Objective& objective_;
  dist::Communicator& comm_;
  const ThreadPool& pool_;
  const bool lead_;  // rank 0: writes the run folder, metrics and checkpoints
  std::unique_ptr<Model> model_;
  std::unique_ptr<LoraAdapters> lora_;  // a LoRA run (recipe lora:): only these train, the base is frozen
  std::unique_ptr<AdamW> opt_;
  bool zero_ = false;  // ZeRO-1 (train/zero.h): this rank keeps the optimizer state of its range only
  bool bf16_ = false;  // bf16 compute copies of the matmul weights (the optimizer keeps the f32 masters)
  TrainState state_;
  int64_t start_step_ = 0;
  double peak_gflops_ = 0, flops_per_token_ = 0;
  SaveCheckpointOptions ckpt_opts_;
  RunMetrics metrics_;  // rank 0 only
  StepBeacon beacon_{lead_};  // for a supervisor (lathe launch): one line per finished step
  std::unique_ptr<GradBucketer> bucketer_;  // the last micro-batch's backward reduces buckets as they fill
  std::vector<float> grad_buffer_;          // the flat all-reduce's, without a bucketer
  int64_t resident_at_start_ = -1, plan_bytes_ = 0;  // VmRSS before the run loaded anything; the plan's total
};

// A collective timeout says at which step it happened (the communicator knows no steps).
TrainResult LoopRun::train() {
  try {
    return train_steps();
  } catch (const dist::CollectiveTimeout& e) {
    throw dist::CollectiveTimeout(str_cat(e.what(), " (during step ", state_.step + 1, ")"));
  }
}

TrainResult LoopRun::train_steps() {
  TrainResult result;
  if (cfg_.save_initial && state_.step == 0) checkpoint(0);
  const auto t_start = Clock::now();
  int64_t step = state_.step;
  while (step < cfg_.steps) {
    const auto t0 = Clock::now();
    const StepTotals totals = accumulate_gradients(step);
    const double lr = cfg_.schedule.at(step);
    const double gnorm = optimizer_step(step, lr);
    ++step;
    result.final_loss = totals.loss;
    const auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
    report(step, totals, lr, gnorm, seconds_since(t0), seconds_since(t_start));
    state_.step = step;  // the step a collective timeout names
    beacon_.step_done(step);
    if (cfg_.eval_every > 0 && step % cfg_.eval_every == 0 && step < cfg_.steps) evaluate(step);
    // Every rank stops at the same step (a signal reaches the ranks at different moments; a metrics
    // write fails on rank 0 only).
    double stop[2] = {stop_requested.load(std::memory_order_relaxed) ? 1.0 : 0.0, metrics_.error().empty() ? 0.0 : 1.0};
    comm_.all_reduce_sum(stop, 2);
    if (stop[1] > 0) throw metrics_stop(step);
    if (stop[0] > 0) {
      result.last_checkpoint = checkpoint(step);
      result.stopped_early = true;
      break;
    }
    if (cfg_.checkpoint_every > 0 && step % cfg_.checkpoint_every == 0 && step < cfg_.steps)
      result.last_checkpoint = checkpoint(step);
  }
  result.steps_done = step;
  if (!result.stopped_early) {
    result.final_val_loss = evaluate(step);
    if (metrics_failed()) throw metrics_stop(step);
    result.last_checkpoint = checkpoint(step);
    if (metrics_failed())  // the metrics could not be synced with the checkpoint
      throw IoError(str_cat(metrics_problem(), "; training finished at step ", step, " (checkpoint ",
                            result.last_checkpoint, " written)"));
  }
  // How the plan compares with what the process took (VmHWM: the peak resident set).
  if (const int64_t peak = peak_resident_bytes(); plan_bytes_ > 0 && peak > 0 && resident_at_start_ > 0)
    say(str_cat("memory: peak resident ", memory_bytes_human(peak), ", ", memory_bytes_human(peak - resident_at_start_),
                " above the start; planned ", memory_bytes_human(plan_bytes_)));
  return result;
}

LoopRun::LoopRun(const TrainConfig& cfg, const TrainerHooks& hooks, Objective& objective, StartMode mode,
                 Context& ctx, std::unique_ptr<RunLock>& lock)
    : cfg_(cfg), hooks_(hooks), objective_(objective), comm_(dist::world()), pool_(ctx.pool), lead_(comm_.rank() == 0) {
  const int rank = comm_.rank(), world = comm_.size();
  const auto note = [this](const std::string& m) { say(m); };
  comm_.set_timeout(cfg_.collective_timeout);
  resident_at_start_ = resident_bytes();
  const MemoryBudget budget = memory_budget(cfg_, comm_);  // before anything is loaded
  prepare_run_folder(cfg_, mode, comm_, lock, note);

  // --- model and optimizer (from the newest intact checkpoint when resuming) --------------------------
  const std::optional<std::string> ckpt = resume_checkpoint(cfg_.run_dir, mode, note);
  // A LoRA run's checkpoints hold the adapter only (a PEFT folder): the base always comes from model.base.
  const bool lora_run = !cfg_.lora.is_null();
  model_ = open_model(cfg_, lora_run ? std::nullopt : ckpt);
  Model& model = *model_;
  validate_recipe_for_model(cfg_, model.config());  // data.seq_len, samples.max_tokens vs the context
  std::vector<OptimParam> params;
  if (lora_run) {
    LATHE_CHECK_ARG(!cfg_.model_base.empty(), "recipe lora: LoRA adapts a pretrained model: set model.base");
    LoraConfig lc = lora_config_from_json(cfg_.lora, "recipe lora", /*strict_keys=*/true);
    if (lc.base_model_name_or_path.empty()) lc.base_model_name_or_path = cfg_.model_base;
    lora_ = std::make_unique<LoraAdapters>(ckpt ? LoraAdapters::load(model, *ckpt) : LoraAdapters::create(model, lc, cfg_.seed));
    freeze_base_for_lora(model, *lora_);
    if (!cfg_.model_quantize.empty()) {  // QLoRA: open_model quantised the base's decoder Linears as they loaded
      int n = 0;
      for_each_linear_module(model.weights(), [&](const Linear& l) { n += l.quant.defined(); });
      say(str_cat("model.quantize: ", n, " Linear weights held as ", cfg_.model_quantize, " (frozen, f32 compute)"));
    }
    params = lora_optim_params(*lora_);
    ckpt_opts_.lora = lora_.get();
    say(str_cat("LoRA: rank ", lora_->config().r, " on ", lora_->modules().size(), " modules, ", lora_->n_params(),
                " trainable parameters (the base frozen)"));
  } else {
    model.set_requires_grad(true);
    params = optim_params(model, cfg_.decay_embeddings);
  }
  zero_ = cfg_.zero == 1 && world > 1;
  const ElementRange owned = zero_ ? zero_owned_range(params, rank, world) : ElementRange{};
  opt_ = std::make_unique<AdamW>(std::move(params), cfg_.adamw, owned);
  if (zero_) say(str_cat("ZeRO-1: each rank keeps the optimizer state of ", owned.end - owned.begin, " elements"));
  const std::string hash = trajectory_hash(cfg_.resolved);
  state_.seed = cfg_.seed;
  state_.recipe_hash = hash;
  if (ckpt) {
    state_ = load_checkpoint_state(*ckpt, *opt_);  // this rank's part of the state under ZeRO-1
    if (state_.recipe_hash != hash) say("warning: the recipe differs from the one that wrote " + *ckpt + " (resuming anyway)");
    state_.recipe_hash = hash;  // later checkpoints record the recipe they continue with
    say("resumed from " + *ckpt + " at step " + std::to_string(state_.step));
  } else if (mode == StartMode::kResume) {
    say("no checkpoint in " + cfg_.run_dir + ": starting from step 0");
  }
  // Pruning deletes only checkpoints with this id: a resumed run keeps its id (older checkpoints have none).
  if (state_.run_id.empty()) state_.run_id = new_run_id();
  start_step_ = state_.step;
  model.set_weight_version(static_cast<uint64_t>(state_.step));  // one version per optimizer step, across resumes
  bf16_ = cfg_.precision == "bf16";
  if (bf16_) {
    model.make_bf16_copies();
    model.round_bf16_copies(bf16_rounding_key(cfg_.seed, state_.step));
  }
  // Every forward of the run; LoRA dropout keys: the objective varies this one per micro-batch.
  const ForwardOptions forward{.recompute = cfg_.recompute_layers, .bf16 = bf16_,
                               .lora_dropout = lora_ && lora_->config().lora_dropout > 0,
                               .dropout_key = derive_key(cfg_.seed, 0x10AD)};  // the label of the dropout stream
  const int64_t n_matmul = matmul_params(model);
  peak_gflops_ = cpu::measure_fma_peak_gflops(pool_, 0.2);
  comm_.all_reduce_sum(&peak_gflops_, 1);  // the job's peak: every rank's threads

  // --- the objective's data, at the resumed position ----------------------------------------------------
  objective_.start({.model = model, .comm = comm_, .forward = forward, .note = note});
  objective_.seek(state_.data_cursor);
  flops_per_token_ = objective_.flops_per_token(model, n_matmul);
  plan_memory(budget, forward);  // models and data loaded; no step, checkpoint or metrics file yet
  // Checkpoints carry the tokenizer the data was prepared with and a generation_config.json, read once.
  on_lead(comm_, "checkpoint files", [&] {
    ckpt_opts_.companion_files = checkpoint_companion_files(model.config(), objective_.data_tokenizer());
  });

  // --- run folder: resolved recipe, metrics (truncated to the resumed step) -----------------------------
  on_lead(comm_, "run folder " + cfg_.run_dir, [&] {
    write_file_atomic((fs::path(cfg_.run_dir) / "recipe.yaml").string(), json_to_yaml(cfg_.resolved));
    write_file_atomic((fs::path(cfg_.run_dir) / "recipe.json").string(), cfg_.resolved.dump(2) + "\n");  // for scripts
    metrics_.open(cfg_.run_dir, state_.step, note);
  });
  if (state_.step == 0)
    metrics_.log(json{{"event", "start"},          {"params", model.n_params()},    {"matmul_params", n_matmul},
                      {"flops_per_token", flops_per_token_}, {"peak_gflops", peak_gflops_}, {"threads", pool_.n_threads()},
                      {"ranks", world}}
                     .dump());
  if (metrics_failed()) throw metrics_stop(state_.step);
  if (overlap_allreduce_enabled(cfg_.overlap_allreduce, comm_))
    bucketer_ = std::make_unique<GradBucketer>(opt_->params(), comm_,
                                               static_cast<int64_t>(cfg_.allreduce_bucket_mb * (1 << 20)));
}

// The plan of this rank (train/memory_plan.h), printed by rank 0. memory.check error: when any rank's plan
// exceeds its budget, every rank throws (InvalidArgument with the table, the biggest items and their knobs).
void LoopRun::plan_memory(const MemoryBudget& budget, const ForwardOptions& forward) {
  if (cfg_.memory_check == "off") return;
  const Model& model = *model_;
  const ObjectiveMemory om = objective_.memory(model);
  MemoryPlanInputs in{.policy_bytes = memory_plan_weight_bytes(model),
                      .bf16_copy_bytes = memory_plan_bf16_copy_bytes(model),
                      .adapter_params = lora_ ? lora_->n_params() : 0,
                      .world = comm_.size(),
                      .zero_gather = zero_ && lead_,
                      .activations = memory_plan_activations(model, om.tokens, forward),
                      .vocab = model.config().vocab_size,
                      .fused_head = om.fused_head,
                      .varying_lengths = om.varying_lengths,
                      .objective = om.items};
  for (const OptimParam& p : opt_->params()) in.trainable_params += p.value.numel();
  for (const Tensor& m : opt_->exp_avg()) in.optimizer_params += m.numel();  // this rank's range under ZeRO-1
  const std::vector<MemoryPlanItem> items = memory_plan_items(in);
  plan_bytes_ = memory_plan_total(items);
  const std::string over = budget.bytes > 0 ? memory_plan_check(items, budget.bytes, budget.source) : "";
  const bool stop = cfg_.memory_check == "error";
  if (over.empty() || !stop) say(memory_plan_table(items, budget.bytes, budget.source));
  if (!over.empty() && !stop)
    say(str_cat("warning: the memory plan exceeds the budget (", memory_bytes_human(plan_bytes_), " of ",
                memory_bytes_human(budget.bytes), "); training anyway (memory.check: warn)"));
  if (stop && any_rank_failed(comm_, !over.empty()))
    throw InvalidArgument(over.empty() ? "the memory plan of another rank exceeds its budget (memory.check: error)"
                                       : over);
}

StepTotals LoopRun::accumulate_gradients(int64_t step) {
  StepTotals totals;
  for (int64_t micro = 0; micro < cfg_.grad_accum; ++micro) {
    const ObjectiveResult r = objective_.next_loss(*model_);
    totals.add(r);
    const Tensor micro_loss = cfg_.grad_accum == 1 ? r.loss : scale(r.loss, 1.f / static_cast<float>(cfg_.grad_accum));
    std::optional<LeafGradHookScope> on_final_grad;  // the last micro-batch reduces buckets as they fill
    if (bucketer_ && micro + 1 == cfg_.grad_accum)
      on_final_grad.emplace([this](TensorImpl& p) { bucketer_->on_grad_ready(p); });
    backward(micro_loss);
  }
  totals.average(cfg_.grad_accum, comm_);
  if (comm_.size() > 1) {
    if (bucketer_)
      bucketer_->finish();
    else
      average_gradients(opt_->params(), comm_, grad_buffer_);
  }
  LATHE_CHECK_ARG(std::isfinite(totals.loss), "training diverged: loss ", totals.loss, " at step ", step + 1,
                  " (lower optimizer.lr or raise schedule.warmup_steps)");
  return totals;
}

// Step `step` + 1: clip, update, and make the weights the next forward reads; returns the gradient norm
// before clipping.
double LoopRun::optimizer_step(int64_t step, double lr) {
  const double gnorm = global_grad_norm(opt_->params(), pool_);
  const float clip = cfg_.grad_clip > 0 && gnorm > cfg_.grad_clip ? static_cast<float>(cfg_.grad_clip / gnorm) : 1.f;
  opt_->step(lr, clip, pool_);
  if (zero_) zero_all_gather_params(*opt_, comm_);
  // The model's parameters and whatever else the optimizer steps (a LoRA run's adapters are not the model's).
  model_->zero_grad();
  for (const OptimParam& p : opt_->params()) Tensor(p.value).zero_grad();
  if (bf16_) model_->round_bf16_copies(bf16_rounding_key(cfg_.seed, step + 1));
  model_->bump_weight_version();  // the weights (and their bf16 copies) of the next step are complete
  return gnorm;
}

void LoopRun::report(int64_t step, const StepTotals& totals, double lr, double gnorm, double step_s, double elapsed_s) {
  StepReport r{.step = step,
               .steps = cfg_.steps,
               .loss = totals.loss,
               .lr = lr,
               .grad_norm = gnorm,
               .tokens_per_s = totals.tokens / step_s,
               .mfu = 0,
               .elapsed_s = elapsed_s,
               .metrics = totals.metrics,
               .weight_version = model_->weight_version()};
  r.mfu = r.tokens_per_s * flops_per_token_ / (peak_gflops_ * 1e9);
  if (step % cfg_.log_every == 0 || step == cfg_.steps) {
    // %.9g keeps every bit of the float loss, so runs can be compared exactly from the JSONL.
    metrics_.log(str_cat("{\"step\":", step, ",\"loss\":", fmt("%.9g", r.loss), ",\"lr\":", fmt("%.9g", lr),
                         ",\"grad_norm\":", fmt("%.6g", gnorm), ",\"tokens_per_s\":", fmt("%.1f", r.tokens_per_s),
                         ",\"mfu\":", fmt("%.4f", r.mfu), ",\"step_s\":", fmt("%.4f", step_s),
                         ",\"elapsed_s\":", fmt("%.2f", r.elapsed_s),
                         metrics_json(r.metrics), "}"));
  }
  if (hooks_.on_step && lead_) hooks_.on_step(r);
}

// The objective's held-out loss (-1 when it has nothing to evaluate), logged and reported.
double LoopRun::evaluate(int64_t step) {
  std::optional<ObjectiveEval> e;
  {
    NoGradGuard no_grad;
    e = objective_.evaluate(*model_);
  }
  if (!e) return -1;
  json line = {{"step", step}, {"val_loss", e->loss}};  // a NaN is written as null (readers skip it)
  for (const auto& [name, value] : e->metrics) line[name] = value;
  metrics_.log(line.dump());
  if (hooks_.on_eval && lead_) hooks_.on_eval({.step = step, .val_loss = e->loss, .metrics = e->metrics});
  return e->loss;
}

// Rank 0 writes; every rank learns whether it succeeded, so a failed write stops all of them.
std::string LoopRun::checkpoint(int64_t step) {
  state_.step = step;
  state_.data_cursor = objective_.data_position();
  state_.world_size = comm_.size();
  std::string dir, error;
  const std::optional<AdamW> whole = zero_ ? zero_gather_state(*opt_, comm_) : std::nullopt;  // every rank takes part
  if (lead_) {
    metrics_.sync();  // the metrics up to this checkpoint are durable with it
    try {
      dir = save_checkpoint(cfg_.run_dir, *model_, whole ? *whole : *opt_, state_, ckpt_opts_);
    } catch (const std::exception& e) {
      error = str_cat("checkpoint of step ", step, " not written (earlier checkpoints are intact): ", e.what());
    }
    if (!dir.empty()) {
      try {  // a checkpoint that cannot be pruned is still written: warn and train on
        prune_checkpoints(cfg_.run_dir, state_, cfg_.keep_checkpoints);
      } catch (const std::exception& e) {
        say(str_cat("warning: checkpoint ", dir, " written, but pruning older ones failed: ", e.what()));
      }
    }
  }
  if (any_rank_failed(comm_, !error.empty())) throw IoError(error.empty() ? "checkpoint write failed on rank 0" : error);
  say("checkpoint " + dir);
  return dir;
}

std::string LoopRun::metrics_problem() const {
  return metrics_.error().empty() ? "metrics write failed on rank 0" : metrics_.error();
}

// A failed metrics write ends the run: after a last checkpoint (when a step was trained since the
// start), so the run can be resumed once the disk has room; the error names the file and errno text.
IoError LoopRun::metrics_stop(int64_t step) {
  std::string note = "no step trained since the start: no checkpoint written";
  if (step > start_step_) {
    try {
      note = "checkpoint " + checkpoint(step) + " written; --resume continues from it";
    } catch (const IoError& e) {
      note = e.what();
    }
  }
  return IoError(str_cat(metrics_problem(), "; training stopped at step ", step, " (", note, ")"));
}

}  // namespace

int train_thread_count(int requested, const dist::Communicator& comm) {
  int threads = resolve_thread_count(requested);  // 0: all cores
  if (threads == 0 && comm.local_size() > 1)  // share the machine's cores between its ranks
    threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / comm.local_size());
  return threads;
}

TrainLoop::TrainLoop(TrainConfig cfg, TrainerHooks hooks) : cfg_(std::move(cfg)), hooks_(std::move(hooks)) {}

TrainLoop::~TrainLoop() = default;

void TrainLoop::request_stop() { stop_requested.store(true, std::memory_order_relaxed); }

TrainResult TrainLoop::run(Objective& objective, StartMode mode, Context& ctx) {
  stop_requested.store(false);
  return LoopRun(cfg_, hooks_, objective, mode, ctx, lock_).train();
}

}  // namespace lathe::train
