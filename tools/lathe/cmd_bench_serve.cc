// lathe bench serve --base-url URL: a load generator for any OpenAI-compatible server (lathe serve,
// vLLM, llama.cpp's llama-server), after `vllm bench serve`: random token-id prompts, Poisson arrivals or
// a concurrency cap, streamed responses; TTFT, TPOT, ITL and end-to-end latency, throughputs.
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <limits>

#include "args.h"
#include "lathe/serve/loadgen/dataset.h"
#include "lathe/serve/loadgen/driver.h"
#include "lathe/serve/loadgen/http_client.h"
#include "lathe/serve/loadgen/report.h"

namespace lathe::cli {

const CommandSpec& bench_serve_spec() {
  static const CommandSpec spec{
      .name = "bench serve",
      .usage = "--base-url http://HOST:PORT [options]",
      .brief = "load-test an OpenAI-compatible server: TTFT, TPOT, ITL, throughput",
      .summary = "Sends random token-id prompts to POST /v1/completions (streamed, ignore_eos, so each output has\n"
                 "exactly its length) at --request-rate (Poisson; inf = all at once) and at most --max-concurrency\n"
                 "at a time, then prints vLLM's serving report (and --json FILE).\n",
      .options = {
          {"--base-url", "URL", "the server, e.g. http://127.0.0.1:8000 (required)"},
          {"--model", "NAME", "the request's model (default: the first of GET /v1/models)"},
          {"--endpoint", "PATH", "completions endpoint (default: /v1/completions)"},
          {"--num-prompts", "N", "requests to send, >= 1 (default: 100)"},
          {"--input-len", "N", "prompt tokens per request after the shared prefix, >= 1 (default: 256)"},
          {"--output-len", "N", "output tokens per request, >= 1 (default: 128)"},
          {"--range-ratio", "R", "lengths uniform in [len (1 - R), len (1 + R)], R in [0, 1) (default: 0)"},
          {"--prefix-len", "N", "tokens every prompt shares at its start, >= 0 (default: 0)"},
          {"--vocab-size", "N", "prompt ids are drawn from [0, N) (default: 32000)"},
          {"--request-rate", "R", "requests per second, > 0, or inf: all at once (default: inf)"},
          {"--burstiness", "B", "gamma shape of the arrival gaps; 1 = Poisson (default: 1)"},
          {"--max-concurrency", "N", "requests in flight at most; 0 = no limit (default: 0)"},
          {"--seed", "S", "dataset and arrival seed, >= 0 (default: 0)"},
          {"--api-key", "KEY", "sent as Authorization: Bearer KEY"},
          {"--timeout", "S", "seconds a request may take at most (default: 600)"},
          {"--json", "FILE", "also write the report, with the run's settings, as JSON"},
          {"--extra-body", "JSON", "a JSON object whose fields are added to every request, e.g. '{\"logit_bias\": {\"3\": -100}}'"},
      }};
  return spec;
}

int cmd_bench_serve(int argc, char** argv) {
  const Args a = Args::parse(argc, argv, 3, bench_serve_spec());
  if (a.help() || !a.positional.empty() || !a.has("--base-url")) {
    std::fputs(help_text(bench_serve_spec()).c_str(), stderr);
    return a.help() ? 0 : 2;
  }
  loadgen::HttpTarget target = loadgen::parse_base_url(a.str("--base-url", ""));
  target.endpoint = a.str("--endpoint", "/v1/completions");
  target.api_key = a.str("--api-key", "");
  target.timeout_s = a.number("--timeout", 600, {.min = 0, .max = 1e7, .min_open = true});
  target.model = a.has("--model") ? a.str("--model", "") : loadgen::first_model_id(target);
  if (a.has("--extra-body")) {
    target.extra_body = nlohmann::json::parse(a.str("--extra-body", ""), nullptr, /*allow_exceptions=*/false);
    LATHE_CHECK_ARG(target.extra_body.is_object(), "option --extra-body must be a JSON object, got '",
                    a.str("--extra-body", ""), "'");
  }

  loadgen::RandomDatasetOptions d;
  d.n_requests = a.integer("--num-prompts", 100, 1, kIntMax);
  d.input_len = a.integer("--input-len", 256, 1, kIntMax);
  d.output_len = a.integer("--output-len", 128, 1, kIntMax);
  d.range_ratio = a.number("--range-ratio", 0, {.min = 0, .max = 1, .max_open = true});
  d.prefix_len = a.integer("--prefix-len", 0, 0, kIntMax);
  d.vocab_size = a.integer("--vocab-size", 32000, 1, kIntMax);
  d.seed = static_cast<uint64_t>(a.integer("--seed", 0, 0));
  const std::string rate_text = a.str("--request-rate", "inf");
  const double rate = rate_text == "inf" ? std::numeric_limits<double>::infinity()
                                         : a.number("--request-rate", 0, {.min = 0, .max = 1e9, .min_open = true});
  const double burstiness = a.number("--burstiness", 1, {.min = 0, .max = 1e6, .min_open = true});
  const int64_t max_concurrency = a.integer("--max-concurrency", 0, 0, kIntMax);

  const std::vector<loadgen::BenchRequest> requests = loadgen::random_dataset(d);
  const std::vector<double> arrivals = loadgen::arrival_times(d.n_requests, rate, burstiness, d.seed);
  std::fprintf(stderr, "bench serve: %lld requests (%lld + %lld prompt, %lld output tokens) to http://%s:%d%s, model '%s', "
               "rate %s, max concurrency %s\n",
               static_cast<long long>(d.n_requests), static_cast<long long>(d.prefix_len), static_cast<long long>(d.input_len),
               static_cast<long long>(d.output_len), target.host.c_str(), target.port, target.endpoint.c_str(),
               target.model.c_str(), rate_text.c_str(), max_concurrency ? std::to_string(max_concurrency).c_str() : "none");
  loadgen::HttpCompletionClient client(target);
  loadgen::RunOptions run;
  run.max_concurrency = max_concurrency;
  const int64_t step = std::max<int64_t>(1, d.n_requests / 10);
  run.on_progress = [&](int64_t done, int64_t total) {
    if (done % step == 0 || done == total) std::fprintf(stderr, "bench serve: %lld / %lld done\n", static_cast<long long>(done), static_cast<long long>(total));
  };
  const loadgen::RunResult result = loadgen::run_requests(client, requests, arrivals, run);
  const loadgen::ServeBenchReport report = loadgen::summarize(result.records, result.duration_s);
  std::fputs(loadgen::report_text(report).c_str(), stdout);
  if (a.has("--json")) {
    nlohmann::ordered_json j = loadgen::report_json(report);
    j["settings"] = {{"base_url", a.str("--base-url", "")}, {"model", target.model}, {"num_prompts", d.n_requests},
                     {"input_len", d.input_len}, {"output_len", d.output_len}, {"range_ratio", d.range_ratio},
                     {"prefix_len", d.prefix_len}, {"request_rate", rate_text}, {"burstiness", burstiness},
                     {"max_concurrency", max_concurrency}, {"seed", d.seed}, {"extra_body", target.extra_body}, {"unix_time", std::time(nullptr)}};
    std::ofstream(a.str("--json", "")) << j.dump(2) << "\n";
  }
  return report.failed == 0 ? 0 : 1;
}

}  // namespace lathe::cli
