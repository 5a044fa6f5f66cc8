#include "lathe/posttrain/distill_options.h"

#include <set>

#include "lathe/base/error.h"

namespace lathe::posttrain {

using nlohmann::json;

const char* divergence_name(Divergence d) {
  switch (d) {
    case Divergence::kForwardKl: return "forward_kl";
    case Divergence::kReverseKl: return "reverse_kl";
    case Divergence::kJsd: return "jsd";
    case Divergence::kCount: break;
  }
  return "?";
}

DistillOptions distill_options(train::TrainConfig& c) {
  const std::string where = c.recipe_path.empty() ? "recipe" : c.recipe_path;
  LATHE_CHECK_ARG(!c.distill.is_null(), where, ": no distill: section (distill.teacher is required)");
  if (c.sft.is_null()) c.sft = json::object();  // the data keys at their defaults
  DistillOptions o;
  o.sft = sft_options(c);
  const json& s = c.distill;
  std::set<std::string> seen;
  auto find = [&](const char* key) -> const json* {
    seen.insert(key);
    return s.contains(key) && !s[key].is_null() ? &s[key] : nullptr;
  };
  auto fail = [&](const char* key, const json& v, const std::string& rule) {
    throw InvalidArgument(str_cat(where, ": distill.", key, " = ", v.dump(), ": ", rule));
  };
  auto number = [&](const char* key, double& out) {
    if (const json* v = find(key)) {
      if (!v->is_number()) fail(key, *v, "expected a number");
      out = v->get<double>();
    }
  };
  DistillLossOptions& l = o.loss;
  l.temperature = 2.0;
  l.alpha = 0.5;
  l.beta = 0.5;
  l.temperature_squared = true;
  if (const json* v = find("teacher")) {
    if (!v->is_string()) fail("teacher", *v, "expected a string (a Hugging Face folder)");
    o.teacher = v->get<std::string>();
  }
  std::string loss = "forward_kl";
  if (const json* v = find("loss")) {
    if (!v->is_string()) fail("loss", *v, "expected forward_kl, reverse_kl or jsd");
    loss = v->get<std::string>();
  }
  if (loss == "forward_kl") l.divergence = Divergence::kForwardKl;
  else if (loss == "reverse_kl") l.divergence = Divergence::kReverseKl;
  else if (loss == "jsd") l.divergence = Divergence::kJsd;
  else fail("loss", loss, "must be forward_kl, reverse_kl or jsd");
  number("beta", l.beta);
  if (!(l.beta >= 0 && l.beta <= 1)) fail("beta", l.beta, "must be in [0, 1] (0: forward KL, 1: reverse KL)");
  number("temperature", l.temperature);
  if (!(l.temperature > 0)) fail("temperature", l.temperature, "must be positive");
  number("alpha", l.alpha);
  if (!(l.alpha >= 0 && l.alpha <= 1)) fail("alpha", l.alpha, "must be in [0, 1] (1: no hard-label NLL)");
  if (const json* v = find("temperature_squared")) {
    if (!v->is_boolean()) fail("temperature_squared", *v, "expected true or false");
    l.temperature_squared = v->get<bool>();
  }
  if (const json* v = find("chunk_rows")) {
    if (!v->is_number_integer() || v->get<int64_t>() < 1) fail("chunk_rows", *v, "expected a positive integer");
    l.chunk_rows = v->get<int64_t>();
  }
  for (auto it = s.begin(); it != s.end(); ++it)
    if (!seen.count(it.key()))
      throw InvalidArgument(str_cat(where, ": unknown key distill.", it.key(), " (docs/distill.md lists every key)"));
  LATHE_CHECK_ARG(!o.teacher.empty(), where, ": distill.teacher is required (a Hugging Face folder)");

  json& r = c.resolved["distill"];  // every default, written
  r["teacher"] = o.teacher;
  r["loss"] = loss;
  r["beta"] = l.beta;
  r["temperature"] = l.temperature;
  r["temperature_squared"] = l.temperature_squared;
  r["alpha"] = l.alpha;
  r["chunk_rows"] = l.chunk_rows;
  return o;
}

}  // namespace lathe::posttrain
