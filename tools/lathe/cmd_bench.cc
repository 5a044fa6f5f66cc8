// lathe bench roofline: this machine's limits (compute peak per ISA, bandwidth per thread count) and
// lathe's own kernels placed against them, as roofline.svg and roofline.json. lathe bench tier: the
// kernels' instruction tier, for the benchmark scripts.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "args.h"
#include "lathe/backend/cpu/gemm.h"
#include "lathe/backend/cpu/machine_limits.h"
#include "lathe/base/context.h"
#include "lathe/io/mapped_file.h"
#include "roofline.h"
#include "roofline_kernels.h"

namespace lathe::cli {

namespace fs = std::filesystem;

const CommandSpec& bench_roofline_spec() {
  static const CommandSpec spec{
      .name = "bench roofline",
      .usage = "[options]",
      .brief = "measure this machine's compute and bandwidth roofs and place lathe's kernels on them",
      .summary =
          "Measures the fp32 FMA peak of each vector ISA the CPU has (AVX2, AVX-512), the bf16 dot (vdpbf16ps)\n"
          "and int8 dot (VNNI) peaks where present, and read / triad bandwidth on 1..N threads; then times\n"
          "lathe's GEMMs (training and prefill shapes), causal attention, decode GEMVs (f32 and bf16 weights),\n"
          "rms_norm and AdamW, and writes OUT/roofline.svg (log-log roofline) and OUT/roofline.json (the same\n"
          "numbers). Progress on stderr; the two paths on stdout. Under a minute (--quick: a few seconds).\n",
      .options = {
          {"--out", "DIR", "output folder (default: runs/roofline)"},
          {"--threads", "N", "threads of the kernels and the top bandwidth row (default: LATHE_NUM_THREADS, else all cores)"},
          {"--quick", "", "short probes, 2 timed calls per kernel, GEMM/attention rows / 8 (a smoke run)"},
      }};
  return spec;
}

namespace {

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(' ', colon + 1));
    }
  return "unknown CPU";
}

void say(const std::string& s) {
  std::fprintf(stderr, "roofline: %s\n", s.c_str());
  std::fflush(stderr);
}

MachineLimits measure_limits(const Context& ctx, bool quick, cpu::BandwidthProbe& probe) {
  MachineLimits m;
  m.cpu_model = cpu_model_name();
  m.threads = ctx.pool.n_threads();
  m.cache_bytes = static_cast<double>(cpu::last_level_cache_bytes());
  m.stream_bytes = static_cast<double>(probe.read_bytes());
  const cpu::CpuFeatures features = cpu::CpuFeatures::detect();
  const double seconds = quick ? 0.05 : 0.5;
  for (int i = 0; i < static_cast<int>(cpu::ComputePeak::kCount); ++i) {
    const auto p = static_cast<cpu::ComputePeak>(i);
    const cpu::ComputePeakInfo& info = cpu::compute_peak_info(p);
    ComputeRoof r{.name = info.name, .instruction = info.instruction, .unit = info.unit,
                  .present = cpu::compute_peak_supported(p, features)};
    r.value = cpu::measure_compute_peak(p, ctx.pool, m.threads, seconds, features);
    char line[160];
    if (r.present)
      std::snprintf(line, sizeof(line), "%-20s %-20s %8.1f %s on %d thread(s)", info.name, info.instruction, r.value,
                    info.unit, m.threads);
    else
      std::snprintf(line, sizeof(line), "%-20s absent on this CPU (skipped)", info.name);
    say(line);
    m.compute.push_back(r);
  }
  const int passes = quick ? 2 : 5;
  for (int n = 1; n <= m.threads; ++n) {
    BandwidthRow b{.threads = n, .read_gbps = probe.read_gbps(ctx.pool, n, passes),
                   .triad_gbps = probe.triad_gbps(ctx.pool, n, passes)};
    char line[160];
    std::snprintf(line, sizeof(line), "bandwidth %2d thread(s): read %6.1f GB/s, triad %6.1f GB/s", n, b.read_gbps,
                  b.triad_gbps);
    say(line);
    m.bandwidth.push_back(b);
  }
  return m;
}

int cmd_bench_roofline(int argc, char** argv) {
  const Args a = Args::parse(argc, argv, 3, bench_roofline_spec());
  if (a.help() || !a.positional.empty()) {
    std::fputs(help_text(bench_roofline_spec()).c_str(), stderr);
    return a.help() ? 0 : 2;
  }
  const bool quick = a.has("--quick");
  const fs::path out = a.str("--out", "runs/roofline");
  fs::create_directories(out);
  Context ctx(a.threads());
  const size_t stream = cpu::stream_bytes_for_cache(cpu::last_level_cache_bytes());
  say("threads " + std::to_string(ctx.pool.n_threads()) + ", gemm tier " + cpu::gemm_isa() + ", working set " +
      std::to_string(stream >> 20) + " MiB (8x the " + std::to_string(cpu::last_level_cache_bytes() >> 20) +
      " MiB last-level cache)");
  cpu::BandwidthProbe probe(stream, ctx.pool);
  MachineLimits m = measure_limits(ctx, quick, probe);

  const KernelRunOptions opt{.quick = quick, .stream_bytes = stream, .min_seconds = quick ? 0.0 : 0.5,
                             .min_reps = quick ? 2 : 5};
  const std::vector<KernelTiming> timings = time_lathe_kernels(opt, ctx, say);
  // The bandwidth again after the kernels: a shared host's bandwidth drifts; the roof is the better one.
  m.after = {.threads = m.threads, .read_gbps = probe.read_gbps(ctx.pool, m.threads, quick ? 2 : 5),
             .triad_gbps = probe.triad_gbps(ctx.pool, m.threads, quick ? 2 : 5)};
  char line[200];
  std::snprintf(line, sizeof(line), "bandwidth after the kernels: read %.1f GB/s, triad %.1f GB/s", m.after.read_gbps,
                m.after.triad_gbps);
  say(line);

  std::vector<RooflinePoint> points;
  for (const KernelTiming& t : timings) points.push_back(place_on_roofline(t, m));
  for (const RooflinePoint& p : points) {
    std::snprintf(line, sizeof(line), "%-44s %-7s-bound  %5.1f flop/B  %3.0f%% of %s", p.k.name.c_str(),
                  p.compute_bound ? "compute" : "memory", p.intensity, 100 * p.fraction,
                  (p.compute_bound ? p.compute_roof : p.memory_roof).c_str());
    say(line);
  }
  nlohmann::json doc = roofline_json(m, points);
  doc["quick"] = quick;
  doc["gemm_tier"] = cpu::gemm_isa();
  const fs::path json_path = out / "roofline.json", svg_path = out / "roofline.svg";
  write_file_atomic(json_path.string(), doc.dump(2) + "\n");
  write_file_atomic(svg_path.string(), roofline_svg(m, points));
  std::printf("%s\n%s\n", json_path.string().c_str(), svg_path.string().c_str());
  return 0;
}

}  // namespace

const CommandSpec& bench_tier_spec() {
  static const CommandSpec spec{
      .name = "bench tier",
      .usage = "",
      .brief = "print the instruction tier lathe's kernels run at here (avx512bf16, avx512, avx2, scalar)",
      .summary = "Prints the tier the CPU kernels dispatch to on this machine (LATHE_CPU=avx2|avx512|scalar caps it),\n"
                 "so benchmark scripts can print it beside every lathe figure.\n",
      .options = {}};
  return spec;
}

namespace {

int cmd_bench_tier(int argc, char** argv) {
  const Args a = Args::parse(argc, argv, 3, bench_tier_spec());
  if (a.help() || !a.positional.empty()) {
    std::fputs(help_text(bench_tier_spec()).c_str(), stderr);
    return a.help() ? 0 : 2;
  }
  std::printf("%s\n", cpu::gemm_isa());
  return 0;
}

}  // namespace

int cmd_bench_serve(int argc, char** argv);     // cmd_bench_serve.cc
int cmd_bench_episodes(int argc, char** argv);  // cmd_bench_episodes.cc

int cmd_bench(int argc, char** argv) {
  const std::string sub = argc > 2 ? argv[2] : "";
  if (sub == "roofline") return cmd_bench_roofline(argc, argv);
  if (sub == "tier") return cmd_bench_tier(argc, argv);
  if (sub == "serve") return cmd_bench_serve(argc, argv);
  if (sub == "episodes") return cmd_bench_episodes(argc, argv);
  std::fputs(
      "usage: lathe bench roofline [--out DIR] [--threads N] [--quick]\n"
      "       lathe bench tier\n"
      "       lathe bench serve --base-url http://HOST:PORT [options]\n"
      "       lathe bench episodes MODEL_DIR [options]\n"
      "(each with --help)\n",
      stderr);
  return sub == "--help" || sub == "-h" ? 0 : 2;
}

}  // namespace lathe::cli
