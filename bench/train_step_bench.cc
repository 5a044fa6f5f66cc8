// One training step, forward + backward: model->zero_grad(); loss = next_token_loss(ids); backward(loss).
// fp32 (weights widened at load), random token ids, fixed seed. Two options, which compose:
//   --optimizer     + the update as `lathe pretrain` / `lathe sft` do it: global-norm clipping (1.0) and
//                   AdamW (lr 3e-4, betas 0.9 / 0.95, decay 0.1 on matrices, not on embeddings or norms),
//                   as bench/torch_train_step.py --optimizer
//   --lora_rank=R   LoRA instead of full training, through the API `lathe sft` uses (LoraAdapters::create,
//                   freeze_base_for_lora, lora_optim_params): adapters on every Linear of the decoder layers
//                   (PEFT's all-linear: Llama's q, k, v, o, gate, up, down; GPT-2's c_attn, c_proj, c_fc,
//                   mlp c_proj), alpha --lora_alpha (default 32), no dropout, A as PEFT (kaiming-uniform),
//                   B = 0; the base frozen (no gradient, and with --optimizer no optimizer state: AdamW
//                   steps the adapters only, all with decay 0.1 as lora_optim_params), as
//                   bench/torch_train_step.py --lora-rank R
//
//   BM_TrainStep_GPT2_124M_B4_T64/threads:N    a GPT-2 124M folder (bench/make_gpt2_model.py)
//   BM_TrainStep_Llama110M_B4_T256/threads:N   the Llama-style tiny-110M (../shared/tools/make_bench_model.py)
//   with the options: BM_TrainStep_Llama110M_LoRA16_AdamW_B8_T256/threads:N and so on
//
// Model folders: --gpt2=DIR / --llama110m=DIR, or the environment variables LATHE_BENCH_GPT2 and
// LATHE_BENCH_LLAMA110M; a benchmark whose folder is not given is skipped (a note goes to stderr).
// --batch_gpt2 / --seq_gpt2 / --batch_llama / --seq_llama override the shapes.
//
// Counters: tokens/s = B*T / step time; GFLOP/s = FLOPs per step / step time, with
//   FLOPs per step = 6 * N * B*T + 12 * L * T * C * B*T
// N = Model::n_params() (every parameter once; the tied embedding counts once, for the head matmul);
// the second term is attention's QK^T and AV (2 matmuls x 2 FLOPs x T*C per token per layer forward,
// x3 for forward + backward) counted over the full T x T square as in the PaLM paper's appendix B (a causal
// kernel does about half of it). The same formula is in bench/torch_train_step.py. With LoRA the frozen
// base has no weight gradient and the adapters have all three matmuls:
//   FLOPs per LoRA step = (4 * N + 6 * N_lora) * B*T + 12 * L * T * C * B*T
// (N_lora = LoraAdapters::n_params(); layer 0's input gradient, which nothing needs, is counted anyway).
// The optimizer's FLOPs are not counted (a few per parameter).
// peak_RSS_MiB = getrusage's ru_maxrss after the timed steps: the peak of the whole process so far, so
// compare full and LoRA training from separate processes, one benchmark each (--benchmark_filter, one
// model folder, one thread count).
//
// Each benchmark runs one untimed warm-up step, then one step per repetition; the reported figure is the
// median over --benchmark_repetitions (default 3 here).
// Build: cmake --build build/release --target train_step_bench
// Run:   build/release/train_step_bench --gpt2=bench/out/gpt2-124M --llama110m=bench/out/tiny-110M-f32 --threads=2
//        build/release/train_step_bench --llama110m=bench/out/tiny-110M-f32 --batch_llama=8 --threads=2
//          --optimizer --lora_rank=16                             (LoRA at issue 13's shape; one command line)
//
// Profiling only the timed steps (not the load or warm-up): start perf disabled with a control FIFO and
// point LATHE_BENCH_PERF_FIFO at it; the benchmark writes "enable" / "disable" around its timed loop:
//   mkfifo /tmp/ctl; LATHE_BENCH_PERF_FIFO=/tmp/ctl perf record -D -1 --control fifo:/tmp/ctl
//     --call-graph dwarf -F 200 -- build/release/train_step_bench --gpt2=DIR --threads=1
//     --benchmark_repetitions=1                                                       (one command line)
#include <benchmark/benchmark.h>

#include "bench_defaults.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "lathe/autograd/node.h"
#include "lathe/base/context.h"
#include "lathe/models/lora_adapters.h"
#include "lathe/models/model.h"
#include "lathe/tensor/tensor.h"
#include "lathe/train/adamw.h"
#include "lathe/train/lora_params.h"
#include "lathe/train/param_groups.h"

namespace {

using lathe::Context;
using lathe::ContextScope;
using lathe::LoraAdapters;
using lathe::Model;
using lathe::Tensor;
using lathe::train::AdamW;

struct Flags {
  std::string gpt2_dir, llama_dir;
  int gpt2_b = 4, gpt2_t = 64, llama_b = 4, llama_t = 256;
  std::vector<int> threads = {1, 2};
  bool optimizer = false;  // + clipping and AdamW
  int lora_rank = 0;       // > 0: LoRA adapters of this rank train, the base is frozen
  double lora_alpha = 32;
};

std::string env_or(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

// Parses the flags Google Benchmark left in argv. Unknown flags are an error.
bool parse_flags(int argc, char** argv, Flags& f) {
  f.gpt2_dir = env_or("LATHE_BENCH_GPT2");
  f.llama_dir = env_or("LATHE_BENCH_LLAMA110M");
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* key, std::string& out) {
      const std::string k = std::string("--") + key + "=";
      if (a.rfind(k, 0) != 0) return false;
      out = a.substr(k.size());
      return true;
    };
    std::string v;
    if (value("gpt2", f.gpt2_dir) || value("llama110m", f.llama_dir)) continue;
    if (value("batch_gpt2", v)) { f.gpt2_b = std::stoi(v); continue; }
    if (value("seq_gpt2", v)) { f.gpt2_t = std::stoi(v); continue; }
    if (value("batch_llama", v)) { f.llama_b = std::stoi(v); continue; }
    if (value("seq_llama", v)) { f.llama_t = std::stoi(v); continue; }
    if (a == "--optimizer") { f.optimizer = true; continue; }
    if (value("lora_rank", v)) { f.lora_rank = std::stoi(v); continue; }
    if (value("lora_alpha", v)) { f.lora_alpha = std::stod(v); continue; }
    if (value("threads", v)) {  // comma-separated list, e.g. --threads=1,2
      f.threads.clear();
      for (size_t p = 0; p < v.size();) {
        size_t q = v.find(',', p);
        if (q == std::string::npos) q = v.size();
        f.threads.push_back(std::stoi(v.substr(p, q - p)));
        p = q + 1;
      }
      continue;
    }
    std::fprintf(stderr, "train_step_bench: unknown flag %s\n", a.c_str());
    return false;
  }
  return true;
}

Tensor random_ids(int64_t B, int64_t T, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> dist(0, static_cast<int32_t>(vocab - 1));
  std::vector<int32_t> v(static_cast<size_t>(B * T));
  for (auto& x : v) x = dist(rng);
  return Tensor::from_data_i32({B, T}, v);
}

// n_lora = 0: full training (6 N per token); else the frozen base's 4 N plus the adapters' 6 N_lora.
double step_flops(const Model& m, int64_t n_lora, int64_t B, int64_t T) {
  const auto& c = m.config();
  const double tokens = static_cast<double>(B * T);
  const double n = static_cast<double>(m.n_params());
  const double weights = n_lora == 0 ? 6.0 * n : 4.0 * n + 6.0 * static_cast<double>(n_lora);
  return weights * tokens +
         12.0 * static_cast<double>(c.n_layers) * static_cast<double>(T) * static_cast<double>(c.hidden) * tokens;
}

double peak_rss_mib() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // Linux: KiB
}

// perf's control FIFO (see the header comment); a no-op when LATHE_BENCH_PERF_FIFO is not set.
void perf_control(const char* cmd) {
  static FILE* fifo = [] {
    const char* path = std::getenv("LATHE_BENCH_PERF_FIFO");
    return path ? std::fopen(path, "w") : nullptr;
  }();
  if (fifo) {
    std::fputs(cmd, fifo);
    std::fflush(fifo);
  }
}

// What one step trains: the model (full training) or its adapters, with or without the optimizer.
struct Trainee {
  std::shared_ptr<Model> model;
  std::shared_ptr<LoraAdapters> lora;  // null: full training
  std::shared_ptr<AdamW> opt;          // null: forward + backward only
};

void train_step(const Trainee& t, const Tensor& ids) {
  t.model->zero_grad();
  if (t.lora) t.lora->for_each_param([](const std::string&, Tensor& p, int) { p.zero_grad(); });
  Tensor loss = t.model->next_token_loss(ids);
  lathe::backward(loss);
  benchmark::DoNotOptimize(loss.item());  // the step is complete once the loss value is read
  if (t.opt) {  // as the training loop's optimizer_step: clip to global norm 1.0, then AdamW
    const lathe::ThreadPool& pool = lathe::current_context().pool;
    const double gnorm = lathe::train::global_grad_norm(t.opt->params(), pool);
    t.opt->step(3e-4, gnorm > 1.0 ? static_cast<float>(1.0 / gnorm) : 1.f, pool);
  }
}

void register_model(const std::string& label, const std::string& dir, int64_t B, int64_t T, const Flags& f) {
  if (dir.empty()) {
    std::fprintf(stderr, "train_step_bench: skipping %s (no model folder: pass --%s=DIR or set %s)\n", label.c_str(),
                 label.find("GPT2") != std::string::npos ? "gpt2" : "llama110m",
                 label.find("GPT2") != std::string::npos ? "LATHE_BENCH_GPT2" : "LATHE_BENCH_LLAMA110M");
    return;
  }
  std::shared_ptr<Model> model;
  try {
    // In the model's huge-page arena as `lathe pretrain` and `lathe sft` load it (a frozen LoRA base too).
    model = Model::load(dir, {.force_f32 = true});
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_step_bench: skipping %s: cannot load %s: %s\n", label.c_str(), dir.c_str(), e.what());
    return;
  }
  Trainee tr{.model = model};
  std::vector<lathe::train::OptimParam> params;
  std::string variant;
  if (f.lora_rank > 0) {
    lathe::LoraConfig lc{.r = f.lora_rank, .lora_alpha = f.lora_alpha, .target_regex = "all-linear"};
    tr.lora = std::make_shared<LoraAdapters>(LoraAdapters::create(*model, lc, 1234));
    lathe::train::freeze_base_for_lora(*model, *tr.lora);
    params = lathe::train::lora_optim_params(*tr.lora);
    variant += "_LoRA" + std::to_string(f.lora_rank);
    std::fprintf(stderr, "train_step_bench: %s LoRA rank %d alpha %g on %zu modules, %lld trainable parameters\n",
                 label.c_str(), f.lora_rank, f.lora_alpha, tr.lora->modules().size(),
                 static_cast<long long>(tr.lora->n_params()));
  } else {
    model->set_requires_grad(true);
    params = lathe::train::optim_params(*model, /*decay_embeddings=*/false);
  }
  if (f.optimizer) {
    tr.opt = std::make_shared<AdamW>(std::move(params), lathe::train::AdamWConfig{.weight_decay = 0.1});
    variant += "_AdamW";
  }
  const Tensor ids = random_ids(B, T, model->config().vocab_size, 1234);
  const double flops = step_flops(*model, tr.lora ? tr.lora->n_params() : 0, B, T);
  std::fprintf(stderr, "train_step_bench: %s from %s: %lld params, B=%lld T=%lld, %.1f GFLOP per step\n", label.c_str(),
               dir.c_str(), static_cast<long long>(model->n_params()), static_cast<long long>(B),
               static_cast<long long>(T), flops / 1e9);
  const std::string name = "BM_TrainStep_" + label + variant + "_B" + std::to_string(B) + "_T" + std::to_string(T);
  for (int n : f.threads) {
    // One Context per (model, threads), kept across repetitions as a training loop keeps it: its pool
    // and its allocator's block cache stay warm; the first repetition runs the untimed warm-up step.
    auto ctx_slot = std::make_shared<std::unique_ptr<Context>>();
    benchmark::RegisterBenchmark(
        (name + "/threads:" + std::to_string(n)).c_str(),
        [tr, ids, flops, B, T, n, ctx_slot](benchmark::State& st) {
          const bool warm = *ctx_slot != nullptr;
          if (!warm) *ctx_slot = std::make_unique<Context>(n);
          ContextScope scope(**ctx_slot);
          if (!warm) train_step(tr, ids);
          perf_control("enable\n");
          for (auto _ : st) train_step(tr, ids);
          perf_control("disable\n");
          st.counters["peak_RSS_MiB"] = peak_rss_mib();
          // Tensor blocks of >= 1 MiB: the most live at once, and freed ones kept for reuse (also in the RSS).
          const lathe::AllocatorStats as = (*ctx_slot)->alloc.stats();
          st.counters["peak_live_MiB"] = static_cast<double>(as.peak_live_bytes) / (1 << 20);
          st.counters["cached_MiB"] = static_cast<double>(as.cached_bytes) / (1 << 20);
          st.counters["tokens/s"] =
              benchmark::Counter(static_cast<double>(B * T), benchmark::Counter::kIsIterationInvariantRate);
          st.counters["GFLOP/s"] = benchmark::Counter(flops / 1e9, benchmark::Counter::kIsIterationInvariantRate);
          st.counters["threads"] = n;
          st.SetItemsProcessed(st.iterations() * B * T);
        })
        ->UseRealTime()
        ->MeasureProcessCPUTime()  // CPU time of all threads: less sensitive than wall time to a shared host
        ->Unit(benchmark::kMillisecond)
        ->Iterations(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  // Default: 3 repetitions, medians only (a flag given on the command line wins).
  std::vector<std::string> default_flags;
  std::vector<char*> args = lathe::bench::args_with_median_defaults(argc, argv, default_flags);
  int n = static_cast<int>(args.size());
  benchmark::Initialize(&n, args.data());
  Flags f;
  if (!parse_flags(n, args.data(), f)) return 2;
  register_model("GPT2_124M", f.gpt2_dir, f.gpt2_b, f.gpt2_t, f);
  register_model("Llama110M", f.llama_dir, f.llama_b, f.llama_t, f);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
