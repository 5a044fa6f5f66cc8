#include "lathe/serve/engine/prometheus_text.h"

#include <charconv>

namespace lathe {
namespace {

// Label values escape backslash, double quote and newline (the exposition format's rule).
std::string escaped(std::string_view v) {
  std::string s;
  for (const char c : v) {
    if (c == '\\' || c == '"') s += '\\';
    if (c == '\n') {
      s += "\\n";
      continue;
    }
    s += c;
  }
  return s;
}

// The shortest text that reads back as v (0.005, not 0.0050000000000000001).
std::string number(double v) {
  char buf[32];
  const std::to_chars_result r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

class Writer {
 public:
  explicit Writer(std::string_view model) : label_("model_name=\"" + escaped(model) + "\"") {}

  void header(std::string_view name, std::string_view type, std::string_view help) {
    out_ += str("# HELP ", name, " ", help, "\n# TYPE ", name, " ", type, "\n");
  }
  void sample(std::string_view name, double v, std::string_view extra_label = {}) {
    out_ += str(name, "{", extra_label, extra_label.empty() ? "" : ",", label_, "} ", number(v), "\n");
  }
  void gauge(std::string_view name, double v, std::string_view help) {
    header(name, "gauge", help);
    sample(name, v);
  }
  void counter(std::string_view name, double v, std::string_view help) {
    const std::string total = str(name, "_total");
    header(total, "counter", help);
    sample(total, v);
  }
  void histogram(std::string_view name, const Histogram& h, std::string_view help) {
    header(name, "histogram", help);
    const std::string bucket = str(name, "_bucket");
    int64_t cumulative = 0;
    for (size_t i = 0; i < h.bounds.size(); ++i) {
      cumulative += h.counts[i];
      sample(bucket, static_cast<double>(cumulative), str("le=\"", number(h.bounds[i]), "\""));
    }
    sample(bucket, static_cast<double>(h.count), "le=\"+Inf\"");
    sample(str(name, "_sum"), h.sum);
    sample(str(name, "_count"), static_cast<double>(h.count));
  }
  std::string& out() { return out_; }

 private:
  template <class... A>
  static std::string str(const A&... a) {
    std::string s;
    (s.append(a), ...);
    return s;
  }
  std::string label_;
  std::string out_;
};

}  // namespace

std::string prometheus_text(const EngineMetrics& m, std::string_view model_name) {
  Writer w(model_name);
  const EngineCoreStats& c = m.core;
  w.gauge("vllm:num_requests_running", static_cast<double>(c.n_running), "Sequences running (computing this step).");
  w.gauge("vllm:num_requests_waiting", static_cast<double>(c.n_waiting), "Sequences waiting for admission.");
  w.gauge("vllm:kv_cache_usage_perc", c.kv_cache_usage, "Fraction of KV blocks in use (1 = all).");
  w.counter("vllm:prefix_cache_queries", static_cast<double>(c.prefix_cache_queries),
            "Prompt tokens looked up in the prefix cache.");
  w.counter("vllm:prefix_cache_hits", static_cast<double>(c.prefix_cache_hits), "Prompt tokens found in the prefix cache.");
  w.counter("vllm:num_preemptions", static_cast<double>(c.num_preemptions), "Preemptions by recompute.");
  w.counter("vllm:prompt_tokens", static_cast<double>(m.prompt_tokens), "Prompt tokens processed.");
  w.counter("vllm:generation_tokens", static_cast<double>(m.generation_tokens), "Tokens generated.");
  w.header("vllm:request_success_total", "counter", "Finished sequences by finish reason.");
  for (const FinishReason r : {FinishReason::kStop, FinishReason::kLength, FinishReason::kAbort}) {
    const char* name = r == FinishReason::kStop ? "stop" : r == FinishReason::kLength ? "length" : "abort";
    w.sample("vllm:request_success_total", static_cast<double>(m.request_success[static_cast<size_t>(r)]),
             std::string("finished_reason=\"") + name + "\"");
  }
  w.histogram("vllm:time_to_first_token_seconds", m.ttft, "Time from submit to the first token, per choice.");
  w.histogram("vllm:inter_token_latency_seconds", m.inter_token, "Time between consecutive tokens of a choice.");
  w.histogram("vllm:e2e_request_latency_seconds", m.e2e, "Time from submit to the last token, per choice.");
  return std::move(w.out());
}

}  // namespace lathe
