#include "lathe/posttrain/distill_options.h"

#include <cmath>

#include "lathe/base/error.h"
#include "lathe/posttrain/section_reader.h"

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
  LATHE_CHECK_ARG(!c.distill.is_null(), where, ": no distill: section (distill.teacher or distill.teacher_logits"
                  " is required)");
  if (c.sft.is_null()) c.sft = json::object();  // the data keys at their defaults
  DistillOptions o;
  o.sft = sft_options(c);
  SectionReader r(c.distill, where, "distill");
  DistillLossOptions& l = o.loss;
  l.temperature = 2.0;
  l.alpha = 0.5;
  l.beta = 0.5;
  l.temperature_squared = true;
  if (const json* v = r.find("teacher"))
    o.teacher = r.checked("teacher", v->is_string(), *v, "expected a string (a Hugging Face folder)").get<std::string>();
  if (const json* v = r.find("teacher_logits"))
    o.teacher_logits = r.checked("teacher_logits", v->is_string() && !v->get<std::string>().empty(), *v,
                                 "expected a file path (written by lathe distill-cache)").get<std::string>();
  std::string loss = "forward_kl";
  if (const json* v = r.find("loss"))
    loss = r.checked("loss", v->is_string(), *v, "expected forward_kl, reverse_kl or jsd").get<std::string>();
  if (loss == "forward_kl") l.divergence = Divergence::kForwardKl;
  else if (loss == "reverse_kl") l.divergence = Divergence::kReverseKl;
  else if (loss == "jsd") l.divergence = Divergence::kJsd;
  else r.checked("loss", false, loss, "must be forward_kl, reverse_kl or jsd");
  r.get("beta", l.beta);
  r.checked("beta", l.beta >= 0 && l.beta <= 1, l.beta, "must be in [0, 1] (0: forward KL, 1: reverse KL)");
  r.get("temperature", l.temperature);
  r.checked("temperature", l.temperature > 0, l.temperature, "must be positive");
  r.get("alpha", l.alpha);
  r.checked("alpha", l.alpha >= 0 && l.alpha <= 1, l.alpha, "must be in [0, 1] (1: no hard-label NLL)");
  r.get("temperature_squared", l.temperature_squared);
  if (const json* v = r.find("chunk_rows"))
    l.chunk_rows = r.checked("chunk_rows", v->is_number_integer() && v->get<int64_t>() >= 1, *v,
                             "expected a positive integer").get<int64_t>();
  r.get("top_k", l.top_k);
  r.checked("top_k", l.top_k >= 0, l.top_k, "must be >= 0 (0: the whole vocabulary)");
  r.get("lmbda", o.lmbda);
  r.checked("lmbda", o.lmbda >= 0 && o.lmbda <= 1, o.lmbda,
            "must be in [0, 1] (the probability that a step trains on the student's own samples; 0: offline)");
  r.get("seq_kd", o.seq_kd);
  r.get("max_new_tokens", o.max_new_tokens);
  r.checked("max_new_tokens", o.max_new_tokens >= 1, o.max_new_tokens, "must be >= 1");
  r.get("sampling_temperature", o.sampling_temperature);
  r.checked("sampling_temperature", std::isfinite(o.sampling_temperature) && o.sampling_temperature >= 0,
            o.sampling_temperature, "must be >= 0 (0: greedy)");
  r.reject_unknown();
  LATHE_CHECK_ARG(!o.teacher.empty() || !o.teacher_logits.empty(), where, ": distill.teacher (a Hugging Face"
                  " folder) or distill.teacher_logits (a cache written by lathe distill-cache) is required");
  LATHE_CHECK_ARG(o.teacher.empty() || o.teacher_logits.empty(), where, ": distill.teacher and"
                  " distill.teacher_logits are both set: give one (the cache replaces the teacher; unset the other"
                  " with distill.teacher=null)");
  LATHE_CHECK_ARG(o.teacher_logits.empty() || l.top_k > 0, where, ": distill.teacher_logits needs distill.top_k,"
                  " the k the cache was written with (a cache holds the teacher's top-k logits only)");
  // A cache holds the teacher's logits at the dataset's tokens only; samples need the teacher itself.
  LATHE_CHECK_ARG(!o.samples() || o.teacher_logits.empty(), where, ": distill.lmbda ", o.lmbda, " / distill.seq_kd ",
                  o.seq_kd, " sample new completions, which a teacher cache (distill.teacher_logits) has no logits"
                  " for: give distill.teacher, or set distill.lmbda=0 distill.seq_kd=false");
  // Wrapped rows cut examples anywhere: there is no prompt to continue.
  LATHE_CHECK_ARG(!o.samples() || o.sft.packing != Packing::kWrapped, where, ": distill.lmbda / distill.seq_kd"
                  " sample a completion per example, which sft.packing_strategy: wrapped does not keep (its rows"
                  " are cut across examples): use packing_strategy bfd or no packing");

  json& out = c.resolved["distill"];  // every default, written
  if (!o.teacher.empty()) out["teacher"] = o.teacher;
  if (!o.teacher_logits.empty()) out["teacher_logits"] = o.teacher_logits;
  out["loss"] = loss;
  out["beta"] = l.beta;
  out["temperature"] = l.temperature;
  out["temperature_squared"] = l.temperature_squared;
  out["alpha"] = l.alpha;
  out["chunk_rows"] = l.chunk_rows;
  out["top_k"] = l.top_k;
  out["lmbda"] = o.lmbda;
  out["seq_kd"] = o.seq_kd;
  out["max_new_tokens"] = o.max_new_tokens;
  out["sampling_temperature"] = o.sampling_temperature;
  return o;
}

}  // namespace lathe::posttrain
