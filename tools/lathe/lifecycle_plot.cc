#include "lifecycle_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <sstream>

#include "lathe/base/error.h"
#include "lathe/io/file_read.h"
#include "lathe/io/mapped_file.h"
#include "lathe/train/metrics_file.h"
#include "svg_panel.h"

namespace lathe::cli {

namespace fs = std::filesystem;

namespace {

// Everything the picture and the table need from one run folder.
struct StageData {
  LifecycleStage stage;
  Series loss, val;                        // pre-training / SFT
  std::map<std::string, Series> rewards;   // GRPO: "mean" and each reward function's name
  double last_step = 0, elapsed_s = -1;
  std::optional<StageAccuracy> accuracy;
  bool is_rl() const { return rewards.count("mean") > 0; }
};

StageData read_stage(const LifecycleStage& stage) {
  StageData d{.stage = stage};
  const std::string metrics = (fs::path(stage.run_dir) / "metrics.jsonl").string();
  LATHE_CHECK_ARG(fs::exists(metrics), metrics, ": cannot read (is ", stage.run_dir,
                  " a lathe pretrain / sft / grpo run folder?)");
  train::MetricsRead m = train::read_metrics(metrics);
  for (const train::MetricsLine& l : m.lines) {
    if (!l.step) continue;
    const double step = static_cast<double>(*l.step);
    const auto num = [&](const std::string& key) { return train::metrics_number(l, key, metrics, &m.problems); };
    if (const auto e = num("elapsed_s")) d.elapsed_s = std::max(d.elapsed_s, *e);
    if (const auto v = num("val_loss")) d.val.x.push_back(step), d.val.y.push_back(*v);
    if (const auto v = num("loss"); v && !l.record.contains("rewards/mean"))
      d.loss.x.push_back(step), d.loss.y.push_back(*v);
    for (const auto& [key, value] : l.record.items()) {
      if (key.rfind("rewards/", 0) != 0 || !value.is_number()) continue;
      const std::string name = key.substr(8);
      if (name == "std" || name == "min" || name == "max") continue;
      d.rewards[name].x.push_back(step);
      d.rewards[name].y.push_back(value.get<double>());
    }
    d.last_step = std::max(d.last_step, step);
  }
  for (size_t i = 0; i < m.problems.size() && i < 5; ++i)
    std::fprintf(stderr, "plot: warning: %s\n", m.problems[i].c_str());
  const fs::path eval = fs::path(stage.run_dir) / "eval_tool_calls.json";
  if (fs::exists(eval)) {
    const nlohmann::json j = read_json_object_file(eval.string());
    const auto number = [&](const char* key) {
      LATHE_CHECK_FORMAT(j.contains(key) && j[key].is_number(), eval.string(), ": \"", key, "\" must be a number");
      return j[key].get<double>();
    };
    d.accuracy = StageAccuracy{.accuracy = number("accuracy"),
                               .accuracy_stderr = number("accuracy_stderr"),
                               .call_rate = number("call_rate"),
                               .partial = number("checks_passed"),
                               .n = static_cast<long>(number("n"))};
  }
  return d;
}

struct Color {
  const char* hex;
  const char* name;  // for the legend
};
constexpr Color kRewardColors[] = {{"#2ca02c", "green"}, {"#ff7f0e", "orange"}, {"#9467bd", "purple"},
                                   {"#8c564b", "brown"}, {"#e377c2", "pink"}};

void draw_stage(std::ostringstream& svg, const PanelBox& box, const StageData& d) {
  const double x_max = std::max(1.0, d.last_step);
  if (!d.is_rl()) {
    draw_panel(svg, box, d.stage.name + ": loss (val: red)", {{d.loss, "#9ecae1"}, {smoothed(d.loss), "#08519c"}},
               d.val.x.empty() ? nullptr : &d.val, x_max);
    return;
  }
  std::vector<std::pair<Series, std::string>> lines = {{d.rewards.at("mean"), "#bbbbbb"},
                                                       {smoothed(d.rewards.at("mean")), "#000000"}};
  std::string legend = "smoothed; total: black";
  size_t color = 0;
  for (const auto& [name, s] : d.rewards) {
    if (name == "mean") continue;
    const Color& c = kRewardColors[color++ % std::size(kRewardColors)];
    lines.push_back({smoothed(s), c.hex});
    legend += ", " + name + ": " + c.name;
  }
  draw_panel(svg, box, d.stage.name + ": reward", lines, nullptr, x_max);
  svg << "<text x='" << box.left << "' y='" << box.top + box.height + 32 << "' font-size='11'>"
      << svg_escape(legend) << "</text>\n";
}

// Bars of held-out exact accuracy per stage, with +-1 s.e. whiskers and the value written above each bar.
void draw_accuracy(std::ostringstream& svg, const PanelBox& box, const std::vector<StageData>& stages) {
  svg << "<text x='" << box.left << "' y='" << box.top - 8 << "' font-size='14' font-weight='bold'>"
      << "held-out exact tool-call accuracy per stage (+-1 s.e.)</text>\n";
  svg << "<rect x='" << box.left << "' y='" << box.top << "' width='" << box.width << "' height='" << box.height
      << "' fill='none' stroke='#888'/>\n";
  const auto py = [&](double a) { return box.top + box.height * (1 - a); };
  for (int i = 0; i <= 4; ++i) {
    const double a = i / 4.0;
    svg << "<line x1='" << box.left << "' x2='" << box.left + box.width << "' y1='" << svg_number(py(a))
        << "' y2='" << svg_number(py(a)) << "' stroke='#eee'/>\n";
    svg << "<text x='" << box.left - 6 << "' y='" << svg_number(py(a) + 4) << "' font-size='11' text-anchor='end'>"
        << static_cast<int>(a * 100) << "%</text>\n";
  }
  const double slot = box.width / static_cast<double>(stages.size()), bar = std::min(90.0, slot * 0.5);
  for (size_t i = 0; i < stages.size(); ++i) {
    const double cx = box.left + slot * (i + 0.5);
    svg << "<text x='" << svg_number(cx) << "' y='" << box.top + box.height + 16
        << "' font-size='12' text-anchor='middle'>" << svg_escape(stages[i].stage.name) << "</text>\n";
    if (!stages[i].accuracy) {
      svg << "<text x='" << svg_number(cx) << "' y='" << svg_number(py(0) - 6)
          << "' font-size='11' text-anchor='middle' fill='#888'>not evaluated</text>\n";
      continue;
    }
    const StageAccuracy& a = *stages[i].accuracy;
    svg << "<rect x='" << svg_number(cx - bar / 2) << "' y='" << svg_number(py(a.accuracy)) << "' width='"
        << svg_number(bar) << "' height='" << svg_number(box.height * a.accuracy) << "' fill='#4c78a8'/>\n";
    const double lo = std::max(0.0, a.accuracy - a.accuracy_stderr), hi = std::min(1.0, a.accuracy + a.accuracy_stderr);
    svg << "<line x1='" << svg_number(cx) << "' x2='" << svg_number(cx) << "' y1='" << svg_number(py(lo))
        << "' y2='" << svg_number(py(hi)) << "' stroke='#222' stroke-width='1.5'/>\n";
    char text[32];
    std::snprintf(text, sizeof(text), "%.1f%%", 100 * a.accuracy);
    svg << "<text x='" << svg_number(cx) << "' y='" << svg_number(py(hi) - 6)
        << "' font-size='12' font-weight='bold' text-anchor='middle'>" << text << "</text>\n";
  }
}

std::string duration(double s) {
  if (s < 0) return "";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%dm%02ds", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
  return buf;
}

// Mean of the first / last (up to) 5 values: a curve's start and end through its step noise.
double head_mean(const Series& s, bool last) {
  const size_t n = std::min<size_t>(5, s.y.size());
  if (n == 0) return NAN;
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += last ? s.y[s.y.size() - 1 - i] : s.y[i];
  return sum / n;
}

std::string table(const std::vector<StageData>& stages) {
  std::ostringstream t;
  t << "| stage | run | steps | time | training | held-out exact accuracy | well-formed calls | checks passed |\n"
    << "| --- | --- | --- | --- | --- | --- | --- | --- |\n";
  char buf[160];
  for (const StageData& d : stages) {
    std::string training;
    if (d.is_rl()) {
      std::snprintf(buf, sizeof(buf), "reward %.3f -> %.3f", head_mean(d.rewards.at("mean"), false),
                    head_mean(d.rewards.at("mean"), true));
      training = buf;
    } else if (!d.loss.y.empty()) {
      std::snprintf(buf, sizeof(buf), "loss %.3f -> %.3f", head_mean(d.loss, false), head_mean(d.loss, true));
      training = buf;
      if (!d.val.y.empty()) std::snprintf(buf, sizeof(buf), " (val %.3f)", d.val.y.back()), training += buf;
    }
    t << "| " << d.stage.name << " | `" << d.stage.run_dir << "` | " << static_cast<long>(d.last_step) << " | "
      << duration(d.elapsed_s) << " | " << training << " | ";
    if (d.accuracy) {
      std::snprintf(buf, sizeof(buf), "%.1f%% +- %.1f%% (of %ld) | %.1f%% | %.1f%% |", 100 * d.accuracy->accuracy,
                    100 * d.accuracy->accuracy_stderr, d.accuracy->n, 100 * d.accuracy->call_rate,
                    100 * d.accuracy->partial);
      t << buf << "\n";
    } else {
      t << "not evaluated | | |\n";
    }
  }
  return t.str();
}

}  // namespace

LifecycleStage parse_lifecycle_stage(const std::string& arg) {
  const size_t eq = arg.find('=');
  LifecycleStage s = eq == std::string::npos ? LifecycleStage{"", arg} : LifecycleStage{arg.substr(0, eq), arg.substr(eq + 1)};
  LATHE_CHECK_ARG(!s.run_dir.empty() && (eq == std::string::npos || eq > 0), "--lifecycle stage '", arg,
                  "': expected NAME=RUN_DIR or RUN_DIR");
  if (s.name.empty()) s.name = fs::path(s.run_dir).lexically_normal().filename().string();
  return s;
}

std::string write_lifecycle_plot(const std::vector<LifecycleStage>& stages, const std::string& svg_path) {
  LATHE_CHECK_ARG(!stages.empty(), "--lifecycle: name at least one run folder");
  std::vector<StageData> data;
  for (const LifecycleStage& s : stages) data.push_back(read_stage(s));
  // Columns of 320 px (a 250 px panel and its axis labels); the accuracy bars span the row below.
  const double column = 320, panel_width = 250, curves_top = 40, curves_height = 220;
  const double width = std::max(720.0, 20 + column * data.size());
  const PanelBox bars{.left = 70, .top = curves_top + curves_height + 90, .width = width - 100, .height = 200};
  std::ostringstream svg;
  svg << "<svg xmlns='http://www.w3.org/2000/svg' width='" << width << "' height='" << bars.top + bars.height + 40
      << "' font-family='sans-serif'>\n<rect width='100%' height='100%' fill='white'/>\n";
  for (size_t i = 0; i < data.size(); ++i)
    draw_stage(svg, {.left = 60 + column * i, .top = curves_top, .width = panel_width, .height = curves_height}, data[i]);
  draw_accuracy(svg, bars, data);
  svg << "</svg>\n";
  write_file_atomic(svg_path, svg.str());
  return table(data);
}

}  // namespace lathe::cli
