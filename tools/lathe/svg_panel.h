// Plot panels drawn as SVG text (any browser or image viewer shows them; no plotting library needed): a
// framed box with 5 ticks per axis, series as polylines, optional dots. Shared by `lathe plot` (one run's
// curves) and `lathe plot --lifecycle` (every stage of the lifecycle on one picture).
#pragma once

#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace lathe::cli {

struct Series {
  std::vector<double> x, y;
};

// Where a panel sits in the picture, in SVG pixels (the box itself; title above, x ticks below).
struct PanelBox {
  double left = 70, top = 40, width = 620, height = 300;
};

std::string svg_number(double v);  // "%.1f", for coordinates
std::string tick_label(double v);  // 3 significant digits, or %.1e for the very small / large
std::string svg_escape(const std::string& text);

// lines: (series, stroke colour); dots (red circles) may be null; x runs from 0 to x_max.
void draw_panel(std::ostringstream& svg, const PanelBox& box, const std::string& title,
                const std::vector<std::pair<Series, std::string>>& lines, const Series* dots, double x_max);

// An exponential moving average (weight 0.9 on the past), so a noisy curve's trend shows through.
Series smoothed(const Series& s);

}  // namespace lathe::cli
