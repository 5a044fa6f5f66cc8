#include "svg_panel.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace lathe::cli {

std::string svg_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

std::string tick_label(double v) {
  char buf[32];
  if (v != 0 && (std::fabs(v) < 1e-2 || std::fabs(v) >= 1e4)) std::snprintf(buf, sizeof(buf), "%.1e", v);
  else std::snprintf(buf, sizeof(buf), "%.3g", v);
  return buf;
}

std::string svg_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '\'') out += "&apos;";
    else out += c;
  }
  return out;
}

void draw_panel(std::ostringstream& svg, const PanelBox& box, const std::string& title,
                const std::vector<std::pair<Series, std::string>>& lines, const Series* dots, double x_max) {
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
  const auto px = [&](double x) { return box.left + box.width * x / x_max; };
  const auto py = [&](double y) { return box.top + box.height - box.height * (y - y_min) / (y_max - y_min); };
  svg << "<text x='" << box.left << "' y='" << box.top - 8 << "' font-size='14' font-weight='bold'>"
      << svg_escape(title) << "</text>\n";
  svg << "<rect x='" << box.left << "' y='" << box.top << "' width='" << box.width << "' height='" << box.height
      << "' fill='none' stroke='#888'/>\n";
  for (int i = 0; i <= 4; ++i) {
    const double yv = y_min + (y_max - y_min) * i / 4, xv = x_max * i / 4;
    svg << "<line x1='" << box.left << "' x2='" << box.left + box.width << "' y1='" << svg_number(py(yv))
        << "' y2='" << svg_number(py(yv)) << "' stroke='#eee'/>\n";
    svg << "<text x='" << box.left - 6 << "' y='" << svg_number(py(yv) + 4) << "' font-size='11' text-anchor='end'>"
        << tick_label(yv) << "</text>\n";
    svg << "<text x='" << svg_number(px(xv)) << "' y='" << box.top + box.height + 16
        << "' font-size='11' text-anchor='middle'>" << tick_label(std::round(xv)) << "</text>\n";
  }
  for (const auto& [s, color] : lines) {
    svg << "<polyline fill='none' stroke='" << color << "' stroke-width='1.5' points='";
    for (size_t i = 0; i < s.x.size(); ++i) svg << svg_number(px(s.x[i])) << "," << svg_number(py(s.y[i])) << " ";
    svg << "'/>\n";
  }
  if (dots)
    for (size_t i = 0; i < dots->x.size(); ++i)
      svg << "<circle cx='" << svg_number(px(dots->x[i])) << "' cy='" << svg_number(py(dots->y[i]))
          << "' r='3.5' fill='#d62728'/>\n";
}

Series smoothed(const Series& s) {
  Series out = s;
  for (size_t i = 1; i < out.y.size(); ++i) out.y[i] = 0.9 * out.y[i - 1] + 0.1 * s.y[i];
  return out;
}

}  // namespace lathe::cli
