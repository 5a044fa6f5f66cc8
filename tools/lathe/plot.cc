#include "plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <vector>

#include "args.h"
#include "lifecycle_plot.h"
#include "svg_panel.h"
#include "lathe/base/error.h"
#include "lathe/io/mapped_file.h"
#include "lathe/train/metrics_file.h"

namespace lathe::cli {

namespace fs = std::filesystem;

int write_training_plot(const std::string& run_dir, const std::string& svg_path) {
  const fs::path metrics = fs::path(run_dir) / "metrics.jsonl";
  // Present but a FIFO or folder: read_metrics says what it is (and never blocks).
  LATHE_CHECK_ARG(fs::exists(metrics), metrics.string(), ": cannot read (is ", run_dir,
                  " a lathe pretrain run folder?)");
  // Bad lines (a torn last line of a killed run, a NaN written as null, a damaged file) are skipped and
  // reported by file:line; the curve is drawn from the rest.
  train::MetricsRead m = train::read_metrics(metrics.string());
  Series loss, lr, val;
  for (const train::MetricsLine& l : m.lines) {
    if (!l.step) continue;
    const double step = static_cast<double>(*l.step);
    if (const auto v = train::metrics_number(l, "loss", metrics.string(), &m.problems)) {
      loss.x.push_back(step);
      loss.y.push_back(*v);
      lr.x.push_back(step);
      lr.y.push_back(train::metrics_number(l, "lr", metrics.string(), &m.problems).value_or(0.0));
    }
    if (const auto v = train::metrics_number(l, "val_loss", metrics.string(), &m.problems)) {
      val.x.push_back(step);
      val.y.push_back(*v);
    }
  }
  constexpr size_t kShown = 5;
  for (size_t i = 0; i < m.problems.size() && i < kShown; ++i)
    std::fprintf(stderr, "plot: warning: %s\n", m.problems[i].c_str());
  if (m.problems.size() > kShown)
    std::fprintf(stderr, "plot: warning: %zu more unreadable values in %s\n", m.problems.size() - kShown,
                 metrics.string().c_str());
  // A smoothed train curve (EMA) over the raw one, so the trend is readable through step noise.
  const Series smooth = smoothed(loss);
  double x_max = 1;
  for (double x : loss.x) x_max = std::max(x_max, x);
  for (double x : val.x) x_max = std::max(x_max, x);
  std::ostringstream svg;
  svg << "<svg xmlns='http://www.w3.org/2000/svg' width='720' height='560' font-family='sans-serif'>\n"
      << "<rect width='100%' height='100%' fill='white'/>\n";
  draw_panel(svg, {.top = 40, .height = 300}, "loss (train: blue, smoothed: dark blue; val: red dots) - " + fs::path(run_dir).filename().string(),
        {{loss, "#9ecae1"}, {smooth, "#08519c"}}, val.x.empty() ? nullptr : &val, x_max);
  draw_panel(svg, {.top = 400, .height = 120}, "learning rate", {{lr, "#2ca02c"}}, nullptr, x_max);
  svg << "<text x='380' y='550' font-size='12' text-anchor='middle'>step</text>\n</svg>\n";
  write_file_atomic(svg_path, svg.str());
  return static_cast<int>(loss.x.size());
}

const CommandSpec& plot_spec() {
  static const CommandSpec spec{
      .name = "plot",
      .usage = "RUN_DIR [options] | --lifecycle [NAME=]RUN_DIR... [options]",
      .brief = "loss and learning-rate curves of a run as SVG; or the whole lifecycle on one picture",
      .summary = "Draws the train/val loss and learning-rate curves of a `lathe pretrain` run (RUN_DIR/metrics.jsonl)\n"
                 "as SVG. With --lifecycle, one picture of several runs (pretrain, sft, grpo: loss or reward curves)\n"
                 "and the held-out tool-call accuracy of each (RUN_DIR/eval_tool_calls.json, from `lathe eval MODEL\n"
                 "--tool-calls FILE --out RUN_DIR/eval_tool_calls.json`) as bars, and prints the same as a markdown table.\n",
      .options = {
          {"--out", "FILE.svg", "where to write the plot (default: RUN_DIR/loss.svg; --lifecycle: lifecycle.svg)"},
          {"--lifecycle", "", "every positional is a stage, NAME=RUN_DIR or RUN_DIR"},
          {"--table", "FILE.md", "--lifecycle: also write the markdown table there"},
      }};
  return spec;
}

int cmd_plot(int argc, char** argv) {
  const Args a = Args::parse(argc, argv, 2, plot_spec());
  if (a.has("--lifecycle") && !a.help()) {
    std::vector<LifecycleStage> stages;
    for (const std::string& p : a.positional) stages.push_back(parse_lifecycle_stage(p));
    const std::string out = a.str("--out", "lifecycle.svg");
    const std::string md = write_lifecycle_plot(stages, out);
    std::printf("%s\n%s", out.c_str(), md.c_str());
    if (a.has("--table")) write_file_atomic(a.str("--table", ""), md);
    return 0;
  }
  if (a.help() || a.positional.size() != 1) {
    std::fputs(help_text(plot_spec()).c_str(), stderr);
    return a.help() ? 0 : 2;
  }
  const std::string out = a.str("--out", (fs::path(a.positional[0]) / "loss.svg").string());
  const int n = write_training_plot(a.positional[0], out);
  std::printf("%s (%d steps)\n", out.c_str(), n);
  return 0;
}

}  // namespace lathe::cli
