// lathe verify MODEL_DIR REFERENCE.safetensors: run the model on the file's input_ids and compare logits
// and (when grad.* tensors are present) the gradients of the mean next-token cross-entropy.
#include <cmath>
#include <cstdio>
#include <map>

#include "args.h"
#include "lathe/autograd/node.h"
#include "lathe/base/context.h"
#include "lathe/io/safetensors.h"
#include "lathe/models/lora_adapters.h"
#include "lathe/models/model.h"

namespace lathe::cli {
namespace {

struct Diff {
  double max_abs = 0, max_rel = 0, norm_rel = 0;
};

// max |a-r|, max |a-r|/(|r|+1e-6)... and ||a-r|| / ||r||.
Diff compare(const Tensor& a, const Tensor& r) {
  std::vector<float> av = a.to_vector(), rv = r.to_vector();
  Diff d;
  double diff2 = 0, ref2 = 0;
  for (size_t i = 0; i < av.size(); ++i) {
    const double e = std::fabs(static_cast<double>(av[i]) - rv[i]);
    d.max_abs = std::max(d.max_abs, std::isnan(e) ? INFINITY : e);
    d.max_rel = std::max(d.max_rel, e / (std::fabs(rv[i]) + 1e-6));
    diff2 += e * e;
    ref2 += static_cast<double>(rv[i]) * rv[i];
  }
  d.norm_rel = std::sqrt(diff2) / std::max(std::sqrt(ref2), 1e-30);
  return d;
}

// <prefix>input_ids [B, T] of integer dtype, every id inside the vocabulary, T >= min_t -> int32 [B, T].
Tensor reference_input_ids(const SafetensorsFile& ref, const std::string& prefix, int64_t vocab_size, int64_t min_t) {
  const std::string name = prefix + "input_ids";
  LATHE_CHECK_ARG(ref.contains(name), ref.path(), ": no '", name, "' tensor (int [B, T])");
  const SafetensorsEntry& e = ref.entry(name);
  LATHE_CHECK_ARG(e.dtype == DType::kI32 || e.dtype == DType::kI64, ref.path(), ": '", name, "' must be I32 or I64, got ",
                  dtype_name(e.dtype));
  LATHE_CHECK_ARG(e.shape.size() == 2 && e.shape[0] >= 1 && e.shape[1] >= min_t, ref.path(), ": '", name,
                  "' must be [B, T] with B >= 1 and T >= ", min_t, ", got ", shape_str(e.shape));
  const Tensor t = ref.tensor(name).contiguous();
  std::vector<int64_t> ids(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < ids.size(); ++i)
    ids[i] = e.dtype == DType::kI64 ? t.data<int64_t>()[i] : t.data<int32_t>()[i];
  check_token_ids(ids, vocab_size, ref.path() + ": '" + name + "'");
  return Tensor::from_data_i32(e.shape, std::vector<int32_t>(ids.begin(), ids.end()));
}

// A reference tensor to compare against: a float dtype and exactly the shape `want` (checked before its
// bytes are read, so a short or empty tensor is an error, not an over-read).
void check_reference(const SafetensorsFile& ref, const SafetensorsEntry& e, const Shape& want, const std::string& of) {
  LATHE_CHECK_ARG(dtype_is_float(e.dtype), ref.path(), ": '", e.name, "' must be F32, BF16 or F16, got ",
                  dtype_name(e.dtype));
  LATHE_CHECK_ARG(e.shape == want, ref.path(), ": '", e.name, "' has shape ", shape_str(e.shape), " but ", of, " is ",
                  shape_str(want));
}

}  // namespace

const CommandSpec& verify_spec() {
  static const CommandSpec spec{
      .name = "verify",
      .usage = "MODEL_DIR REFERENCE.safetensors [options]",
      .brief = "compare logits (and grad.* gradients) with a reference file",
      .summary = "Runs the model in f32 on REFERENCE's input_ids [B, T] and compares its logits [B, T, V] and its\n"
                 "grad.<param name> tensors (gradients of the mean next-token cross-entropy) when present.\n"
                 "Exits 1 when logits differ by more than atol or a gradient's ||diff||/||ref|| exceeds grad-rtol,\n"
                 "and when the reference is malformed or holds nothing to compare.\n",
      .options = {
          {"--atol", "A", "largest absolute logit error, >= 0 (default: 1e-4)"},
          {"--grad-rtol", "R", "largest ||ours - ref|| / ||ref|| per gradient, >= 0 (default: 1e-3)"},
          {"--adapter", "DIR", "apply a PEFT LoRA adapter folder to the model first"},
          {"--prefix", "P", "read P + 'input_ids', P + 'logits', P + 'grad.*' (e.g. 'lora.'; default: none)"},
          {"--threads", "N", "worker threads; 0 = LATHE_NUM_THREADS, else all cores (default: 0)"},
      }};
  return spec;
}

int cmd_verify(int argc, char** argv) {
  const Args a = Args::parse(argc, argv, 2, verify_spec());
  if (a.help() || a.positional.size() != 2) {
    std::fputs(help_text(verify_spec()).c_str(), stderr);
    return a.help() ? 0 : 2;
  }
  const double atol = a.number("--atol", 1e-4, {.min = 0}), grad_rtol = a.number("--grad-rtol", 1e-3, {.min = 0});
  Context ctx(a.threads());
  ContextScope scope(ctx);

  auto model = Model::load(a.positional[0], {.force_f32 = true});
  if (a.has("--adapter")) LoraAdapters::load(*model, a.str("--adapter", ""));  // stays on the model
  const std::string prefix = a.str("--prefix", "");
  const std::string logits_name = prefix + "logits", grad_prefix = prefix + "grad.";
  const SafetensorsFile ref = SafetensorsFile::open(a.positional[1]);
  // Everything the reference holds is checked before the model runs: a misnamed or misshapen tensor
  // is an error, and a reference with nothing to compare never reports PASS.
  std::vector<const SafetensorsEntry*> grad_entries;
  for (const auto& e : ref.entries())
    if (e.name.starts_with(grad_prefix)) grad_entries.push_back(&e);
  const bool has_logits = ref.contains(logits_name);
  LATHE_CHECK_ARG(has_logits || !grad_entries.empty(), a.positional[1], ": holds neither '", logits_name, "' nor any '",
                  grad_prefix, "<parameter>' tensor: nothing to compare");
  const Tensor ids = reference_input_ids(ref, prefix, model->config().vocab_size, grad_entries.empty() ? 1 : 2);
  if (has_logits)
    check_reference(ref, ref.entry(logits_name), {ids.size(0), ids.size(1), model->config().vocab_size},
                    "the model's logits [B, T, V]");
  std::map<std::string, Shape> param_shapes;
  for (const TensorBinding& b : model->bindings()) param_shapes[b.name] = b.shape;
  for (const SafetensorsEntry* e : grad_entries) {
    auto it = param_shapes.find(e->name.substr(grad_prefix.size()));
    if (it != param_shapes.end()) check_reference(ref, *e, it->second, "parameter '" + it->first + "'");
  }
  bool ok = true;
  std::printf("%-60s %12s %12s %12s  %s\n", "tensor", "max_abs", "max_rel", "norm_rel", "status");
  if (has_logits) {
    NoGradGuard no_grad;
    const Tensor logits = model->forward(ids);
    const Diff d = compare(logits, ref.tensor(logits_name));
    const bool pass = d.max_abs <= atol;
    ok = ok && pass;
    std::printf("%-60s %12.3e %12.3e %12.3e  %s\n", "logits", d.max_abs, d.max_rel, d.norm_rel, pass ? "ok" : "FAIL");
  }
  if (!grad_entries.empty()) {
    model->set_requires_grad(true);
    const Tensor loss = model->next_token_loss(ids);
    backward(loss);
    std::printf("%-60s %12.6f\n", "loss (mean next-token cross-entropy)", loss.item());
    std::map<std::string, Tensor> grads;
    for (auto& [name, g] : model->gradients_by_name()) grads[name] = g;
    for (const SafetensorsEntry* e : grad_entries) {
      const std::string pname = e->name.substr(grad_prefix.size());
      auto it = grads.find(pname);
      if (it == grads.end()) {
        std::printf("%-60s %12s %12s %12s  %s\n", e->name.c_str(), "-", "-", "-",
                    param_shapes.count(pname) ? "FAIL (no gradient)" : "FAIL (no such parameter)");
        ok = false;
        continue;
      }
      const Diff d = compare(it->second, ref.tensor(e->name));
      const bool pass = d.norm_rel <= grad_rtol;
      ok = ok && pass;
      std::printf("%-60s %12.3e %12.3e %12.3e  %s\n", e->name.c_str(), d.max_abs, d.max_rel, d.norm_rel,
                  pass ? "ok" : "FAIL");
    }
  }
  std::printf("%s\n", ok ? "verify: PASS" : "verify: FAIL");
  return ok ? 0 : 1;
}

}  // namespace lathe::cli
