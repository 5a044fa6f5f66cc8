// EngineMetrics in the Prometheus text exposition format with vLLM's metric names (spec serving.md §10),
// so dashboards built for vLLM read lathe unchanged: gauges, `_total` counters, and `_bucket` / `_sum` /
// `_count` histograms with cumulative `le` buckets, every series labelled model_name.
#pragma once

#include <string>
#include <string_view>

#include "lathe/serve/engine/engine_metrics.h"

namespace lathe {

std::string prometheus_text(const EngineMetrics& m, std::string_view model_name);

}  // namespace lathe
