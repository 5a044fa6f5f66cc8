#include "lathe/train/trainer.h"

#include <chrono>
#include <cmath>
#include <exception>
#include <filesystem>
#include <optional>
#include <set>
#include <thread>

#include "lathe/autograd/node.h"
#include "lathe/backend/cpu/peak_flops.h"
#include "lathe/base/context.h"
#include "lathe/base/error.h"
#include "lathe/base/rng.h"
#include "lathe/dist/communicator.h"
#include "lathe/io/append_file.h"
#include "lathe/io/mapped_file.h"
#include "lathe/models/model.h"
#include "lathe/ops/elementwise.h"
#include "lathe/train/checkpoint.h"
#include "lathe/train/data_loader.h"
#include "lathe/train/grad_bucketer.h"
#include "lathe/train/metrics_file.h"
#include "lathe/train/param_groups.h"
#include "lathe/train/zero.h"

namespace lathe::train {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::atomic<bool> Trainer::stop_requested_{false};

void Trainer::request_stop() { stop_requested_.store(true, std::memory_order_relaxed); }

Trainer::Trainer(TrainConfig cfg, TrainerHooks hooks) : cfg_(std::move(cfg)), hooks_(std::move(hooks)) {}

Trainer::~Trainer() = default;

double Trainer::flops_per_token(const ModelConfig& cfg, int64_t n_matmul, int64_t T) {
  double attn = 0;
  for (int64_t l = 0; l < cfg.n_layers; ++l) {
    const int window = l < static_cast<int64_t>(cfg.layers.size()) ? cfg.layers[l].window : 0;
    double k_mean = 0;  // mean keys visible per query: mean_i min(i + 1, W)
    for (int64_t i = 0; i < T; ++i) k_mean += static_cast<double>(window > 0 ? std::min<int64_t>(i + 1, window) : i + 1);
    k_mean /= static_cast<double>(T);
    attn += 12.0 * static_cast<double>(cfg.q_dim()) * k_mean;
  }
  return 6.0 * static_cast<double>(n_matmul) + attn;
}

namespace {

// Hash of the recipe keys that define the trajectory (not its length, logging or checkpoint cadence), so a
// resume with, e.g., more steps is accepted and one with another learning rate or precision is flagged.
// Of `run`, only the seed and the precision change the losses (threads, recompute, the all-reduce mode
// and ZeRO give the same bits or the same values within float tolerance).
std::string trajectory_hash(json recipe) {
  json run = json::object();
  for (const char* k : {"seed", "precision"})
    if (recipe.contains("run") && recipe["run"].contains(k)) run[k] = recipe["run"][k];
  for (const char* k : {"run", "eval", "checkpoint", "samples"}) recipe.erase(k);
  recipe["run"] = run;
  if (recipe.contains("schedule")) recipe["schedule"].erase("steps");
  return std::to_string(hash_name(recipe.dump()));
}

// Averages every parameter's gradient over the ranks with one all-reduce of a flat buffer (one call
// instead of one per tensor; a fixed layout, so the reduction is deterministic).
void average_gradients(const std::vector<OptimParam>& params, dist::Communicator& comm, std::vector<float>& buf) {
  int64_t total = 0;
  for (const OptimParam& p : params) total += p.value.numel();
  buf.resize(total);
  int64_t off = 0;
  for (const OptimParam& p : params) {
    copy_grad_to(p, buf.data() + off);
    off += p.value.numel();
  }
  comm.all_reduce_sum(buf.data(), total);
  const float inv = 1.f / static_cast<float>(comm.size());
  off = 0;
  for (const OptimParam& p : params) {
    set_grad_from(p, buf.data() + off, inv);
    off += p.value.numel();
  }
}

// Positions restart at each document; a token's first visible key is its document's first token.
DocumentLayout document_layout(const Batch& b) {
  if (b.positions.empty()) return {};
  std::vector<int32_t> key_start(b.positions.size());
  for (size_t i = 0; i < key_start.size(); ++i)
    key_start[i] = static_cast<int32_t>(i % b.seq_len) - b.positions[i];
  return {Tensor::from_data_i32({b.batch, b.seq_len}, b.positions), Tensor::from_data_i32({b.batch, b.seq_len}, key_start)};
}


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

// Whether any rank's `mine` is true (a collective: every rank calls it at the same point).
bool any_rank_failed(dist::Communicator& comm, bool mine) {
  double failed = mine ? 1 : 0;
  comm.all_reduce_sum(&failed, 1);
  return failed > 0;
}

// Runs `fn` on rank 0 only; every rank learns whether it threw, so all of them stop together (rank 0 with
// its own error, the others with a pointer to it) instead of the others waiting in a collective.
void on_lead(dist::Communicator& comm, const std::string& what, const std::function<void()>& fn) {
  std::exception_ptr error;
  if (comm.rank() == 0) {
    try {
      fn();
    } catch (const std::filesystem::filesystem_error& e) {
      error = std::make_exception_ptr(IoError(str_cat(what, ": ", e.what())));
    } catch (...) {
      error = std::current_exception();
    }
  }
  const bool failed = any_rank_failed(comm, error != nullptr);
  if (error) std::rethrow_exception(error);
  if (failed) throw IoError(str_cat(what, ": failed on rank 0 (see its error)"));
}

// "a, b, c and 4 more" for messages.
std::string first_few(const std::vector<std::string>& items, size_t n = 3) {
  std::string out;
  for (size_t i = 0; i < items.size() && i < n; ++i) out += (i ? ", " : "") + items[i];
  if (items.size() > n) out += str_cat(" and ", items.size() - n, " more");
  return out;
}

}  // namespace

TrainResult Trainer::run(StartMode mode) {
  stop_requested_.store(false);
  // Data parallelism: under mpirun every rank runs this loop on its share of each global batch; the
  // gradients are averaged across ranks before the (replicated, identical) optimizer step.
  dist::Communicator& comm = dist::world();
  const int rank = comm.rank(), world = comm.size();
  const bool lead = rank == 0;  // writes the run folder, metrics and checkpoints
  LATHE_CHECK_ARG(cfg_.batch_size % world == 0, "data.batch_size ", cfg_.batch_size, " must be a multiple of the ",
                  world, " ranks (every rank trains on the same number of sequences)");
  int threads = resolve_thread_count(cfg_.threads);  // 0: all cores
  if (threads == 0 && comm.local_size() > 1)  // share the machine's cores between its ranks
    threads = std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / comm.local_size());
  const auto say = [&](const std::string& m) {
    if (hooks_.on_message && lead) hooks_.on_message(m);
  };
  Context ctx(threads);  // declared first: everything below is freed while it is still alive
  ContextScope scope(ctx);
  const ThreadPool& pool = ctx.pool;
  const std::string hash = trajectory_hash(cfg_.resolved);

  // --- the run folder: locked for this run (only rank 0 writes it), never silently reused ------------
  on_lead(comm, "run folder " + cfg_.run_dir, [&] {
    fs::create_directories(cfg_.run_dir);
    lock_.reset();  // a second run() of this trainer: flock conflicts with this process's own earlier lock
    lock_ = std::make_unique<RunLock>(RunLock::acquire(cfg_.run_dir));
    // What an earlier run left (read only where it matters: a resume continues it whatever it holds).
    const std::vector<std::string> earlier =
        mode == StartMode::kResume ? std::vector<std::string>{} : earlier_run_contents(cfg_.run_dir);
    // The run writes run.dir/recipe.yaml (the resolved recipe): never over the recipe it was started with,
    // unless it continues the run that saved it.
    std::error_code ec;
    const bool continues_a_run =
        mode == StartMode::kResume && !checkpoint_folders(fs::path(cfg_.run_dir) / "checkpoints").empty();
    LATHE_CHECK_ARG(continues_a_run || cfg_.recipe_path.empty() ||
                        !fs::equivalent(cfg_.recipe_path, fs::path(cfg_.run_dir) / "recipe.yaml", ec),
                    "the recipe ", cfg_.recipe_path, " is run.dir's recipe.yaml, which the run writes (the resolved ",
                    "recipe): copy it elsewhere, or choose another run.dir");
    if (mode == StartMode::kOverwrite) {
      remove_earlier_run(cfg_.run_dir);
      if (!earlier.empty()) say("--overwrite: removed the earlier run in " + cfg_.run_dir + " (" + first_few(earlier) + ")");
    } else if (mode == StartMode::kFresh && !earlier.empty()) {
      throw InvalidArgument(str_cat("run folder ", cfg_.run_dir, " already holds a run (", first_few(earlier),
                                    "): pass --resume to continue it, or --overwrite to delete it and start over, "
                                    "or choose another run.dir"));
    }
  });

  // --- model and optimizer (from the newest intact checkpoint when resuming) --------------------------
  std::optional<std::string> ckpt;
  if (mode == StartMode::kResume) {
    const ResumePoint rp = find_resume_checkpoint(cfg_.run_dir);
    for (const std::string& s : rp.skipped) say("resume: skipped checkpoint " + s);
    if (!rp.dir && !rp.skipped.empty())
      throw IoError(str_cat(cfg_.run_dir, ": no intact checkpoint to resume from (", rp.skipped.size(),
                            " damaged; the newest: ", rp.skipped.front(), "); `lathe checkpoint verify ", cfg_.run_dir,
                            "` checks every file; --overwrite starts the run over"));
    ckpt = rp.dir;
  }
  std::unique_ptr<Model> model_owner;
  if (ckpt) {
    model_owner = Model::load(*ckpt, {.force_f32 = true, .writable = true});
  } else if (!cfg_.model_base.empty()) {
    model_owner = Model::load(cfg_.model_base, {.force_f32 = true, .writable = true});
  } else {
    model_owner = Model::create(cfg_.model_config.dump(2), cfg_.seed);
  }
  Model& model = *model_owner;
  validate_recipe_for_model(cfg_, model.config());  // data.seq_len, samples.max_tokens vs the context
  model.set_requires_grad(true);
  // ZeRO-1 (train/zero.h): this rank keeps and updates the optimizer state of its range of elements only.
  const bool zero = cfg_.zero == 1 && world > 1;
  std::vector<OptimParam> params = optim_params(model, cfg_.decay_embeddings);
  const ElementRange owned = zero ? zero_owned_range(params, rank, world) : ElementRange{};
  AdamW opt(std::move(params), cfg_.adamw, owned);
  if (zero) say(str_cat("ZeRO-1: each rank keeps the optimizer state of ", owned.end - owned.begin, " elements"));
  TrainState state;
  state.seed = cfg_.seed;
  state.recipe_hash = hash;
  if (ckpt) {
    state = load_checkpoint_state(*ckpt, opt);  // this rank's part of the state under ZeRO-1
    if (state.recipe_hash != hash)
      say("warning: the recipe differs from the one that wrote " + *ckpt + " (resuming anyway)");
    state.recipe_hash = hash;  // later checkpoints record the recipe they continue with
    say("resumed from " + *ckpt + " at step " + std::to_string(state.step));
  } else if (mode == StartMode::kResume) {
    say("no checkpoint in " + cfg_.run_dir + ": starting from step 0");
  }
  // Pruning deletes only checkpoints with this id: a resumed run keeps its id (older checkpoints have none).
  if (state.run_id.empty()) state.run_id = new_run_id();
  const int64_t start_step = state.step;
  const bool bf16 = cfg_.precision == "bf16";  // the optimizer keeps the f32 masters either way
  if (bf16) {
    model.make_bf16_copies();
    model.round_bf16_copies(bf16_rounding_key(cfg_.seed, state.step));
  }
  const ForwardOptions fwd{.recompute = cfg_.recompute_layers, .bf16 = bf16};  // every forward of the run
  const int64_t n_matmul = matmul_params(model);
  double peak_gflops = cpu::measure_fma_peak_gflops(pool, 0.2);
  comm.all_reduce_sum(&peak_gflops, 1);  // the job's peak: every rank's threads
  const double flops_tok = flops_per_token(model.config(), n_matmul, cfg_.seq_len);

  // --- data --------------------------------------------------------------------------------------------
  const uint64_t vocab = static_cast<uint64_t>(model.config().vocab_size);
  const json manifest = read_manifest(cfg_.train_data);  // null without `lathe data prepare`'s manifest
  // Checkpoints carry the tokenizer the data was prepared with and a generation_config.json, read once.
  SaveCheckpointOptions ckpt_opts;
  on_lead(comm, "checkpoint files", [&] {
    ckpt_opts.companion_files = checkpoint_companion_files(model.config(), manifest_tokenizer(manifest));
  });
  int32_t delimiter = -1;  // document masking needs the token that opens each document
  if (cfg_.document_masking) {
    delimiter = cfg_.delimiter_id;
    if (delimiter < 0) {
      LATHE_CHECK_ARG(manifest.is_object() && manifest.contains("delimiter_id"), cfg_.train_data,
                      ": data.document_masking needs the document delimiter: no manifest from `lathe data prepare`"
                      " next to the shards; set data.delimiter_id");
      delimiter = manifest["delimiter_id"].get<int32_t>();  // read_manifest checked: an id of the vocabulary
    }
  }
  DataLoader train(DataLoaderOptions{.shards = find_shards(cfg_.train_data, "train", say),
                                     .seq_len = cfg_.seq_len,
                                     .seed = cfg_.seed,
                                     .shuffle = cfg_.shuffle,
                                     .vocab_limit = vocab,
                                     .delimiter_id = delimiter});
  train.seek(state.data_cursor);
  std::unique_ptr<DataLoader> val;  // none without validation data
  if (!cfg_.val_data.empty())
    val = std::make_unique<DataLoader>(DataLoaderOptions{.shards = find_shards(cfg_.val_data, "val", say),
                                                         .seq_len = cfg_.seq_len,
                                                         .shuffle = false,
                                                         .vocab_limit = vocab,
                                                         .delimiter_id = delimiter});

  // --- run folder: resolved recipe, metrics (truncated to the resumed step) -----------------------------
  AppendFile metrics;        // rank 0 only; every append is checked
  std::string metrics_error;  // rank 0: the first failed metrics write ("<path>: write failed: <errno text>")
  on_lead(comm, "run folder " + cfg_.run_dir, [&] {
    write_file_atomic((fs::path(cfg_.run_dir) / "recipe.yaml").string(), json_to_yaml(cfg_.resolved));
    write_file_atomic((fs::path(cfg_.run_dir) / "recipe.json").string(), cfg_.resolved.dump(2) + "\n");  // for scripts
    const fs::path metrics_path = fs::path(cfg_.run_dir) / "metrics.jsonl";
    std::error_code ec;
    if (fs::is_regular_file(metrics_path, ec) && fs::file_size(metrics_path, ec) > 0) {  // a resume
      std::string kept;
      if (state.step > 0) {
        MetricsRead m = read_metrics(metrics_path.string());
        for (const MetricsLine& l : m.lines) {
          if (l.step.value_or(0) > state.step) continue;  // logged after the checkpoint: trained again
          const size_t n_bad = m.problems.size();          // a loss that is not a number is dropped too
          for (const char* key : {"loss", "val_loss"}) metrics_number(l, key, metrics_path.string(), &m.problems);
          if (m.problems.size() == n_bad) kept += l.text + "\n";
        }
        for (const std::string& p : m.problems) say("warning: " + p);
      }
      write_file_atomic(metrics_path.string(), kept);
    }
    metrics = AppendFile::open(metrics_path.string());
  });
  const auto log_metrics = [&](const std::string& line) {
    if (!lead || !metrics_error.empty()) return;
    try {
      metrics.append(line + "\n");
    } catch (const IoError& e) {
      metrics_error = e.what();
    }
  };
  // Every rank learns whether rank 0's metrics writes failed, so all of them stop at the same step.
  const auto metrics_failed = [&] { return any_rank_failed(comm, !metrics_error.empty()); };
  if (state.step == 0)
    log_metrics(json{{"event", "start"},        {"params", model.n_params()}, {"matmul_params", n_matmul},
                     {"flops_per_token", flops_tok}, {"peak_gflops", peak_gflops}, {"threads", pool.n_threads()}, {"ranks", world}}
                    .dump());

  const int64_t B = cfg_.batch_size, T = cfg_.seq_len;
  const auto evaluate = [&](int64_t step) -> double {
    if (!val) return -1;
    const int64_t n = std::min<int64_t>(cfg_.eval_batches, std::max<int64_t>(1, val->samples_per_epoch() / B));
    if (n <= 0) return -1;  // no eval batches: nothing to average (0 / 0 would log a NaN)
    NoGradGuard no_grad;
    double sum = 0;
    for (int64_t i = rank; i < n; i += world) {  // the ranks share the (always the same) eval batches
      const Batch b = val->batch_at((i * B) % val->samples_per_epoch(), B);
      const DocumentLayout docs = document_layout(b);
      sum += model.loss(Tensor::from_data_i32({b.batch, T}, b.inputs), Tensor::from_data_i32({b.batch, T}, b.targets),
                        b.positions.empty() ? nullptr : &docs, fwd)
                 .item();
    }
    comm.all_reduce_sum(&sum, 1);
    const double v = sum / static_cast<double>(n);
    log_metrics(json{{"step", step}, {"val_loss", v}}.dump());  // a NaN is written as null (readers skip it)
    if (hooks_.on_eval && lead) hooks_.on_eval({step, v});
    return v;
  };
  // Rank 0 writes; every rank learns whether it succeeded, so a failed write stops all of them.
  const auto checkpoint = [&](int64_t step) {
    state.step = step;
    state.data_cursor = train.cursor();
    state.world_size = world;
    std::string dir, error;
    const std::optional<AdamW> whole = zero ? zero_gather_state(opt, comm) : std::nullopt;  // every rank takes part
    if (lead) {
      if (metrics_error.empty()) {  // the metrics up to this checkpoint are durable with it
        try {
          metrics.sync();
        } catch (const IoError& e) {
          metrics_error = e.what();
        }
      }
      try {
        dir = save_checkpoint(cfg_.run_dir, model, whole ? *whole : opt, state, ckpt_opts);
      } catch (const std::exception& e) {
        error = str_cat("checkpoint of step ", step, " not written (earlier checkpoints are intact): ", e.what());
      }
      if (!dir.empty()) {
        try {  // a checkpoint that cannot be pruned is still written: warn and train on
          prune_checkpoints(cfg_.run_dir, state, cfg_.keep_checkpoints);
        } catch (const std::exception& e) {
          say(str_cat("warning: checkpoint ", dir, " written, but pruning older ones failed: ", e.what()));
        }
      }
    }
    if (any_rank_failed(comm, !error.empty()))
      throw IoError(error.empty() ? "checkpoint write failed on rank 0" : error);
    say("checkpoint " + dir);
    return dir;
  };
  // A failed metrics write ends the run: after a last checkpoint (when a step was trained since the
  // start), so the run can be resumed once the disk has room; the error names the file and errno text.
  const auto metrics_problem = [&] { return metrics_error.empty() ? "metrics write failed on rank 0" : metrics_error; };
  const auto metrics_stop = [&](int64_t step) {
    std::string note = "no step trained since the start: no checkpoint written";
    if (step > start_step) {
      try {
        note = "checkpoint " + checkpoint(step) + " written; --resume continues from it";
      } catch (const IoError& e) {
        note = e.what();
      }
    }
    return IoError(str_cat(metrics_problem(),
                           "; training stopped at step ", step, " (", note, ")"));
  };
  if (metrics_failed()) throw metrics_stop(state.step);

  TrainResult result;
  std::vector<float> grad_buffer;
  // Under MPI, the last micro-batch's backward starts reducing gradient buckets as they become final.
  std::unique_ptr<GradBucketer> bucketer;
  if (overlap_allreduce_enabled(cfg_.overlap_allreduce, comm))
    bucketer = std::make_unique<GradBucketer>(opt.params(), comm,
                                              static_cast<int64_t>(cfg_.allreduce_bucket_mb * (1 << 20)));
  if (cfg_.save_initial && state.step == 0) checkpoint(0);
  const auto t_start = Clock::now();
  double loss = 0;
  int64_t step = state.step;
  while (step < cfg_.steps) {
    const auto t0 = Clock::now();
    loss = 0;
    for (int64_t micro = 0; micro < cfg_.grad_accum; ++micro) {
      const Batch b = train.next(B, rank, world);
      const DocumentLayout docs = document_layout(b);
      Tensor l = model.loss(Tensor::from_data_i32({b.batch, T}, b.inputs), Tensor::from_data_i32({b.batch, T}, b.targets),
                            b.positions.empty() ? nullptr : &docs, fwd);
      loss += static_cast<double>(l.item());
      // Every micro-batch holds B*T counted tokens, so the step's mean is the mean of the micro means.
      const Tensor micro_loss = cfg_.grad_accum == 1 ? l : scale(l, 1.f / static_cast<float>(cfg_.grad_accum));
      std::optional<LeafGradHookScope> on_final_grad;  // the last micro-batch reduces buckets as they fill
      if (bucketer && micro + 1 == cfg_.grad_accum)
        on_final_grad.emplace([&](TensorImpl& p) { bucketer->on_grad_ready(p); });
      backward(micro_loss);
    }
    loss /= static_cast<double>(cfg_.grad_accum);
    if (world > 1) {
      comm.all_reduce_sum(&loss, 1);
      loss /= world;
      if (bucketer)
        bucketer->finish();
      else
        average_gradients(opt.params(), comm, grad_buffer);
    }
    LATHE_CHECK_ARG(std::isfinite(loss), "training diverged: loss ", loss, " at step ", step + 1,
                    " (lower optimizer.lr or raise schedule.warmup_steps)");
    const double gnorm = global_grad_norm(opt.params(), pool);
    const float clip = cfg_.grad_clip > 0 && gnorm > cfg_.grad_clip ? static_cast<float>(cfg_.grad_clip / gnorm) : 1.f;
    const double lr = cfg_.schedule.at(step);
    opt.step(lr, clip, pool);
    if (zero) zero_all_gather_params(opt, comm);
    model.zero_grad();
    ++step;
    if (bf16) model.round_bf16_copies(bf16_rounding_key(cfg_.seed, step));
    model.bump_weight_version();  // the weights (and their bf16 copies) of the next step are complete

    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    StepReport r;
    r.step = step;
    r.steps = cfg_.steps;
    r.weight_version = model.weight_version();
    r.loss = loss;
    r.lr = lr;
    r.grad_norm = gnorm;
    r.tokens_per_s = static_cast<double>(B * T * cfg_.grad_accum) / dt;
    r.mfu = r.tokens_per_s * flops_tok / (peak_gflops * 1e9);
    r.elapsed_s = std::chrono::duration<double>(Clock::now() - t_start).count();
    if (step % cfg_.log_every == 0 || step == cfg_.steps) {
      // %.9g keeps every bit of the float loss, so runs can be compared exactly from the JSONL.
      log_metrics(str_cat("{\"step\":", step, ",\"loss\":", fmt("%.9g", loss), ",\"lr\":", fmt("%.9g", lr),
                          ",\"grad_norm\":", fmt("%.6g", gnorm), ",\"tokens_per_s\":", fmt("%.1f", r.tokens_per_s),
                          ",\"mfu\":", fmt("%.4f", r.mfu), ",\"elapsed_s\":", fmt("%.2f", r.elapsed_s), "}"));
    }
    if (hooks_.on_step && lead) hooks_.on_step(r);
    if (cfg_.eval_every > 0 && step % cfg_.eval_every == 0 && step < cfg_.steps) evaluate(step);
    // Every rank stops at the same step (a signal reaches the ranks at different moments; a metrics
    // write fails on rank 0 only).
    double stop[2] = {stop_requested_.load(std::memory_order_relaxed) ? 1.0 : 0.0, metrics_error.empty() ? 0.0 : 1.0};
    comm.all_reduce_sum(stop, 2);
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
  result.final_loss = loss;
  if (!result.stopped_early) {
    result.final_val_loss = evaluate(step);
    if (metrics_failed()) throw metrics_stop(step);
    result.last_checkpoint = checkpoint(step);
    if (metrics_failed())  // the metrics could not be synced with the checkpoint
      throw IoError(str_cat(metrics_problem(),
                            "; training finished at step ", step, " (checkpoint ", result.last_checkpoint, " written)"));
  }
  return result;
}

}  // namespace lathe::train
