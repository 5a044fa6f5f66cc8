#include "roofline.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace lathe::cli {

double MachineLimits::read_roof() const {
  const double before = bandwidth.empty() ? 0 : bandwidth.back().read_gbps;
  return std::max(before, after.read_gbps);
}
double MachineLimits::triad_roof() const {
  const double before = bandwidth.empty() ? 0 : bandwidth.back().triad_gbps;
  return std::max(before, after.triad_gbps);
}

const ComputeRoof* fp32_roof_for_tier(const MachineLimits& m, const std::string& tier) {
  const auto find = [&](const std::string& name) -> const ComputeRoof* {
    for (const ComputeRoof& r : m.compute)
      if (r.name == name && r.present && r.value > 0) return &r;
    return nullptr;
  };
  // The avx512bf16 tier runs its f32 products on the fp32 FMA units too.
  if (tier == "avx512" || tier == "avx512bf16")
    if (const ComputeRoof* r = find("fp32_fma_avx512")) return r;
  if (tier == "avx2")
    if (const ComputeRoof* r = find("fp32_fma_avx2")) return r;
  // Scalar or unknown tiers: the compiler may still vectorise, so the ceiling is the best fp32 roof.
  const ComputeRoof* best = nullptr;
  for (const char* name : {"fp32_fma_avx512", "fp32_fma_avx2"})
    if (const ComputeRoof* r = find(name); r && (!best || r->value > best->value)) best = r;
  return best;
}

RooflinePoint place_on_roofline(const KernelTiming& k, const MachineLimits& m) {
  RooflinePoint p;
  p.k = k;
  const double bytes = k.bytes_read + k.bytes_written;
  p.gflops = k.seconds > 0 ? k.flops / k.seconds / 1e9 : 0;
  p.gbps = k.seconds > 0 ? bytes / k.seconds / 1e9 : 0;
  p.intensity = bytes > 0 ? k.flops / bytes : 0;
  if (const ComputeRoof* r = fp32_roof_for_tier(m, k.tier)) {
    p.compute_roof = r->name;
    p.compute_roof_gflops = r->value;
  }
  const bool mostly_reads = k.bytes_written < 0.1 * bytes;
  p.memory_roof = mostly_reads ? "read" : "triad";
  p.memory_roof_gbps = mostly_reads ? m.read_roof() : m.triad_roof();
  const double memory_ceiling = p.intensity * p.memory_roof_gbps;
  p.compute_bound = p.compute_roof_gflops > 0 && p.compute_roof_gflops <= memory_ceiling;
  p.roof_gflops = p.compute_roof_gflops > 0 ? std::min(p.compute_roof_gflops, memory_ceiling) : memory_ceiling;
  p.fraction = p.roof_gflops > 0 ? p.gflops / p.roof_gflops : 0;
  return p;
}

nlohmann::json roofline_json(const MachineLimits& m, const std::vector<RooflinePoint>& points) {
  nlohmann::json compute = nlohmann::json::array();
  for (const ComputeRoof& r : m.compute)
    compute.push_back({{"name", r.name}, {"instruction", r.instruction}, {"unit", r.unit}, {"present", r.present},
                       {"value", r.value}, {"threads", m.threads}});
  nlohmann::json bandwidth = nlohmann::json::array();
  for (const BandwidthRow& b : m.bandwidth)
    bandwidth.push_back({{"threads", b.threads}, {"read_gbps", b.read_gbps}, {"triad_gbps", b.triad_gbps}});
  nlohmann::json kernels = nlohmann::json::array();
  for (const RooflinePoint& p : points)
    kernels.push_back({{"name", p.k.name},
                       {"kind", p.k.kind},
                       {"tier", p.k.tier},
                       {"flops", p.k.flops},
                       {"bytes", p.k.bytes_read + p.k.bytes_written},
                       {"bytes_read", p.k.bytes_read},
                       {"bytes_written", p.k.bytes_written},
                       {"seconds", p.k.seconds},
                       {"reps", p.k.reps},
                       {"gflops", p.gflops},
                       {"gbps", p.gbps},
                       {"intensity", p.intensity},
                       {"bound", p.compute_bound ? "compute" : "memory"},
                       {"compute_roof", p.compute_roof},
                       {"compute_roof_gflops", p.compute_roof_gflops},
                       {"memory_roof", p.memory_roof},
                       {"memory_roof_gbps", p.memory_roof_gbps},
                       {"roof_gflops", p.roof_gflops},
                       {"fraction_of_roof", p.fraction}});
  return {{"machine",
           {{"cpu", m.cpu_model},
            {"threads", m.threads},
            {"cache_bytes", m.cache_bytes},
            {"stream_bytes", m.stream_bytes},
            {"compute", compute},
            {"bandwidth", bandwidth},
            {"bandwidth_after", {{"threads", m.after.threads}, {"read_gbps", m.after.read_gbps},
                                 {"triad_gbps", m.after.triad_gbps}}},
            {"read_roof_gbps", m.read_roof()},
            {"triad_roof_gbps", m.triad_roof()}}},
          {"kernels", kernels}};
}

namespace {

std::string num(double v, const char* fmt = "%.1f") {
  char buf[48];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else if (c == '\'') out += "&apos;";
    else out += c;
  }
  return out;
}

}  // namespace

std::string roofline_svg(const MachineLimits& m, const std::vector<RooflinePoint>& points) {
  // Axis ranges in decades, covering every point and roof with a margin.
  double x_lo = 1, x_hi = 100, y_lo = 1, y_hi = 10;
  double top_roof = 0, top_flop_roof = 0;  // the int8 roofs count GOP/s, not flops: bandwidth lines stop below
  for (const ComputeRoof& r : m.compute) {
    if (!r.present) continue;
    top_roof = std::max(top_roof, r.value);
    if (r.unit == "GFLOP/s") top_flop_roof = std::max(top_flop_roof, r.value);
  }
  const double bw_hi = std::max(m.read_roof(), m.triad_roof());
  for (const RooflinePoint& p : points) {
    if (p.intensity > 0) x_lo = std::min(x_lo, p.intensity), x_hi = std::max(x_hi, p.intensity);
    if (p.gflops > 0) y_lo = std::min(y_lo, p.gflops);
  }
  if (bw_hi > 0 && top_flop_roof > 0) x_hi = std::max(x_hi, 4 * top_flop_roof / bw_hi);  // past the ridge
  const double bw_lo = std::min(m.read_roof() > 0 ? m.read_roof() : bw_hi, m.triad_roof() > 0 ? m.triad_roof() : bw_hi);
  if (bw_lo > 0) y_lo = std::min(y_lo, bw_lo * x_lo);
  y_hi = std::max({y_hi, top_roof});
  const double lx0 = std::floor(std::log10(x_lo / 1.5)), lx1 = std::ceil(std::log10(x_hi * 1.5));
  const double ly0 = std::floor(std::log10(y_lo / 1.5)), ly1 = std::ceil(std::log10(y_hi * 1.5));
  const double left = 80, top = 50, width = 560, height = 440;
  const auto px = [&](double x) { return left + width * (std::log10(x) - lx0) / (lx1 - lx0); };
  const auto py = [&](double y) { return top + height - height * (std::log10(y) - ly0) / (ly1 - ly0); };
  const double x_min = std::pow(10, lx0), x_max = std::pow(10, lx1);

  // The legend, one line per point, sizes the picture (~6.2 px per character at font-size 11).
  std::vector<std::string> legend;
  size_t longest = 48;
  for (size_t i = 0; i < points.size(); ++i) {
    const RooflinePoint& p = points[i];
    legend.push_back(std::to_string(i + 1) + ". " + p.k.name + " (" + p.k.tier + "): " + num(p.gflops) + " GFLOP/s, " +
                     num(p.gbps) + " GB/s, " + num(100 * p.fraction, "%.0f") + "% of " +
                     (p.compute_bound ? p.compute_roof : p.memory_roof));
    longest = std::max(longest, legend.back().size());
  }
  const double legend_x = left + width + 20, svg_width = legend_x + 6.2 * static_cast<double>(longest) + 20;
  const double legend_h = 40 + 16.0 * static_cast<double>(points.size());
  std::ostringstream svg;
  svg << "<svg xmlns='http://www.w3.org/2000/svg' width='" << num(svg_width, "%.0f") << "' height='"
      << num(std::max(560.0, legend_h + 60), "%.0f")
      << "' font-family='sans-serif'>\n<rect width='100%' height='100%' fill='white'/>\n";
  svg << "<text x='" << left << "' y='24' font-size='15' font-weight='bold'>lathe roofline: " << escape(m.cpu_model)
      << ", " << m.threads << " thread(s)</text>\n";
  svg << "<rect x='" << left << "' y='" << top << "' width='" << width << "' height='" << height
      << "' fill='none' stroke='#888'/>\n";
  // Decade grid and tick labels.
  for (double e = lx0; e <= lx1; ++e) {
    const double x = px(std::pow(10, e));
    svg << "<line x1='" << num(x) << "' x2='" << num(x) << "' y1='" << top << "' y2='" << top + height
        << "' stroke='#eee'/>\n<text x='" << num(x) << "' y='" << top + height + 16
        << "' font-size='11' text-anchor='middle'>" << num(std::pow(10, e), "%g") << "</text>\n";
  }
  for (double e = ly0; e <= ly1; ++e) {
    const double y = py(std::pow(10, e));
    svg << "<line x1='" << left << "' x2='" << left + width << "' y1='" << num(y) << "' y2='" << num(y)
        << "' stroke='#eee'/>\n<text x='" << left - 6 << "' y='" << num(y + 4) << "' font-size='11' text-anchor='end'>"
        << num(std::pow(10, e), "%g") << "</text>\n";
  }
  svg << "<text x='" << left + width / 2 << "' y='" << top + height + 36
      << "' font-size='12' text-anchor='middle'>arithmetic intensity (flop / byte of compulsory traffic)</text>\n";
  svg << "<text x='20' y='" << top + height / 2 << "' font-size='12' text-anchor='middle' transform='rotate(-90 20 "
      << top + height / 2 << ")'>GFLOP/s (int8 roofs: GOP/s)</text>\n";
  // Compute roofs: horizontal lines, labelled at the left end (the compute-bound points crowd the right).
  static const char* kRoofColors[] = {"#1f77b4", "#08306b", "#6a3d9a", "#b15928", "#e31a1c"};
  int i_roof = 0;
  for (const ComputeRoof& r : m.compute) {
    const char* color = kRoofColors[i_roof++ % 5];
    if (!r.present || r.value <= 0) continue;
    const double y = py(r.value);
    const bool fp32 = r.name.rfind("fp32", 0) == 0;
    svg << "<line x1='" << left << "' x2='" << left + width << "' y1='" << num(y) << "' y2='" << num(y) << "' stroke='"
        << color << "' stroke-width='1.5'" << (fp32 ? "" : " stroke-dasharray='6,4'") << "/>\n";
    svg << "<text x='" << left + 6 << "' y='" << num(y - 4) << "' font-size='11' fill='"
        << color << "'>" << escape(r.name) << " " << num(r.value, "%.0f") << " " << r.unit << "</text>\n";
  }
  // Bandwidth roofs: y = bw * x from the left edge up to the top compute roof (or the plot's top).
  // Labels: read above the line (ending left of it), triad below it, so close lines keep readable labels.
  const auto bw_line = [&](double bw, const char* name, const char* color, bool above) {
    if (bw <= 0) return;
    const double y_end = top_flop_roof > 0 ? top_flop_roof : std::pow(10, ly1);
    const double x_end = std::min(x_max, y_end / bw), x_start = std::max(x_min, std::pow(10, ly0) / bw);
    if (x_end <= x_start) return;
    svg << "<line x1='" << num(px(x_start)) << "' y1='" << num(py(bw * x_start)) << "' x2='" << num(px(x_end))
        << "' y2='" << num(py(bw * x_end)) << "' stroke='" << color << "' stroke-width='1.5'/>\n";
    const double xl = std::sqrt(x_start * x_end);
    svg << "<text x='" << num(px(xl) + (above ? -8 : 8)) << "' y='" << num(py(bw * xl) + (above ? -4 : 12))
        << "' font-size='11' text-anchor='" << (above ? "end" : "start") << "' fill='" << color << "'>" << name << " "
        << num(bw) << " GB/s</text>\n";
  };
  bw_line(m.read_roof(), "read", "#2ca02c", true);
  bw_line(m.triad_roof(), "triad", "#8c564b", false);
  // Points, numbered; the legend on the right repeats the number with the figures.
  for (size_t i = 0; i < points.size(); ++i) {
    const RooflinePoint& p = points[i];
    if (p.intensity <= 0 || p.gflops <= 0) continue;
    const char* color = p.compute_bound ? "#1f77b4" : "#ff7f0e";
    svg << "<circle cx='" << num(px(p.intensity)) << "' cy='" << num(py(p.gflops)) << "' r='4.5' fill='" << color
        << "' stroke='black' stroke-width='0.5'><title>" << escape(p.k.name) << "</title></circle>\n";
    svg << "<text x='" << num(px(p.intensity) + 6) << "' y='" << num(py(p.gflops) - 5) << "' font-size='11'>" << i + 1
        << "</text>\n";
  }
  svg << "<text x='" << legend_x << "' y='" << top << "' font-size='12' font-weight='bold'>kernel (tier): achieved, "
      << "and the fraction of its roof</text>\n";
  for (size_t i = 0; i < points.size(); ++i)
    svg << "<text x='" << legend_x << "' y='" << num(top + 20 + 16.0 * static_cast<double>(i)) << "' font-size='11' fill='"
        << (points[i].compute_bound ? "#1f77b4" : "#c45a00") << "'>" << escape(legend[i]) << "</text>\n";
  svg << "<text x='" << legend_x << "' y='" << num(top + 30 + 16.0 * static_cast<double>(points.size()))
      << "' font-size='11' fill='#555'>blue: compute-bound, orange: memory-bound (roof = min(compute, intensity x "
      << "bandwidth))</text>\n";
  svg << "</svg>\n";
  return svg.str();
}

}  // namespace lathe::cli
