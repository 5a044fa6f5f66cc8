#include "plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <vector>

#include "args.h"
#include "lathe/base/error.h"
#include "lathe/io/mapped_file.h"
#include "lathe/train/metrics_file.h"

namespace lathe::cli {

namespace fs = std::filesystem;

namespace {

struct Series {
  std::vector<double> x, y;
};

std::string f(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}
std::string label(double v) {
  char buf[32];
  if (v != 0 && (std::fabs(v) < 1e-2 || std::fabs(v) >= 1e4)) std::snprintf(buf, sizeof(buf), "%.1e", v);
  else std::snprintf(buf, sizeof(buf), "%.3g", v);
  return buf;
}

// One panel: axes, 5 ticks per axis, the series as polylines (or dots).
void panel(std::ostringstream& svg, double top, double height, const std::string& title,
           const std::vector<std::pair<Series, std::string>>& lines, const Series* dots, double x_max) {
  const double left = 70, width = 620;
  double y_min = INFINITY, y_max = -INFINITY;
  for (const auto& [s, color] : lines)
    for (double v : s.y) y_min = std::min(y_min, v), y_max = std::max(y_max, v);
  if (dots)
    for (double v : dots->y) y_min = std::min(y_min, v), y_max = std::max(y_max, v);
  if (!std::isfinite(y_min)) y_min = 0, y_max = 1;
  if (y_max - y_min < 1e-12) y_max = y_min + 1e-12 + std::fabs(y_min) * 0.1;
  const double pad = 0.05 * (y_max - y_min);
  y_min -= pad, y_max += pad;
  if (x_max <= 0) x_max = 1;
  const auto px = [&](double x) { return left + width * x / x_max; };
  const auto py = [&](double y) { return top + height - height * (y - y_min) / (y_max - y_min); };
  svg << "<text x='" << left << "' y='" << top - 8 << "' font-size='14' font-weight='bold'>" << title << "</text>\n";
  svg << "<rect x='" << left << "' y='" << top << "' width='" << width << "' height='" << height
      << "' fill='none' stroke='#888'/>\n";
  for (int i = 0; i <= 4; ++i) {
    const double yv = y_min + (y_max - y_min) * i / 4, xv = x_max * i / 4;
    svg << "<line x1='" << left << "' x2='" << left + width << "' y1='" << f(py(yv)) << "' y2='" << f(py(yv))
        << "' stroke='#eee'/>\n";
    svg << "<text x='" << left - 6 << "' y='" << f(py(yv) + 4) << "' font-size='11' text-anchor='end'>" << label(yv)
        << "</text>\n";
    svg << "<text x='" << f(px(xv)) << "' y='" << top + height + 16 << "' font-size='11' text-anchor='middle'>"
        << label(std::round(xv)) << "</text>\n";
  }
  for (const auto& [s, color] : lines) {
    svg << "<polyline fill='none' stroke='" << color << "' stroke-width='1.5' points='";
    for (size_t i = 0; i < s.x.size(); ++i) svg << f(px(s.x[i])) << "," << f(py(s.y[i])) << " ";
    svg << "'/>\n";
  }
  if (dots)
    for (size_t i = 0; i < dots->x.size(); ++i)
      svg << "<circle cx='" << f(px(dots->x[i])) << "' cy='" << f(py(dots->y[i])) << "' r='3.5' fill='#d62728'/>\n";
}

}  // namespace

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
  Series smooth = loss;
  for (size_t i = 1; i < smooth.y.size(); ++i) smooth.y[i] = 0.9 * smooth.y[i - 1] + 0.1 * loss.y[i];
  double x_max = 1;
  for (double x : loss.x) x_max = std::max(x_max, x);
  for (double x : val.x) x_max = std::max(x_max, x);
  std::ostringstream svg;
  svg << "<svg xmlns='http://www.w3.org/2000/svg' width='720' height='560' font-family='sans-serif'>\n"
      << "<rect width='100%' height='100%' fill='white'/>\n";
  panel(svg, 40, 300, "loss (train: blue, smoothed: dark blue; val: red dots) - " + fs::path(run_dir).filename().string(),
        {{loss, "#9ecae1"}, {smooth, "#08519c"}}, val.x.empty() ? nullptr : &val, x_max);
  panel(svg, 400, 120, "learning rate", {{lr, "#2ca02c"}}, nullptr, x_max);
  svg << "<text x='380' y='550' font-size='12' text-anchor='middle'>step</text>\n</svg>\n";
  write_file_atomic(svg_path, svg.str());
  return static_cast<int>(loss.x.size());
}

const CommandSpec& plot_spec() {
  static const CommandSpec spec{
      .name = "plot",
      .usage = "RUN_DIR [options]",
      .brief = "loss and learning-rate curves of a run as SVG",
      .summary = "Draws the train/val loss and learning-rate curves of a `lathe pretrain` run (RUN_DIR/metrics.jsonl)\n"
                 "as SVG.\n",
      .options = {
          {"--out", "FILE.svg", "where to write the plot (default: RUN_DIR/loss.svg)"},
      }};
  return spec;
}

int cmd_plot(int argc, char** argv) {
  const Args a = Args::parse(argc, argv, 2, plot_spec());
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
