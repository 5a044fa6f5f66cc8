// lathe verify MODEL_DIR REFERENCE.safetensors: run the model on the file's input_ids and compare logits
// and (when grad.* tensors are present) the gradients of the mean next-token cross-entropy.
#include <cmath>
#include <cstdio>
#include <map>

#include "args.h"
#include "lathe/autograd/node.h"
#include "lathe/base/context.h"
#include "lathe/io/safetensors.h"
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

}  // namespace

const CommandSpec& verify_spec() {
  static const CommandSpec spec{
      .name = "verify",
      .usage = "MODEL_DIR REFERENCE.safetensors [options]",
      .brief = "compare logits (and grad.* gradients) with a reference file",
      .summary = "Runs the model in f32 on REFERENCE's input_ids [B, T] and compares its logits [B, T, V] and its\n"
                 "grad.<param name> tensors (gradients of the mean next-token cross-entropy) when present.\n"
                 "Exits 1 when logits differ by more than atol or a gradient's ||diff||/||ref|| exceeds grad-rtol.\n",
      .options = {
          {"--atol", "A", "largest absolute logit error, >= 0 (default: 1e-4)"},
          {"--grad-rtol", "R", "largest ||ours - ref|| / ||ref|| per gradient, >= 0 (default: 1e-3)"},
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
  SafetensorsFile ref = SafetensorsFile::open(a.positional[1]);
  LATHE_CHECK_ARG(ref.contains("input_ids"), a.positional[1], ": no 'input_ids' tensor");
  const Tensor ids = ref.tensor("input_ids").to(DType::kI32);
  bool ok = true;
  std::printf("%-60s %12s %12s %12s  %s\n", "tensor", "max_abs", "max_rel", "norm_rel", "status");
  if (ref.contains("logits")) {
    NoGradGuard no_grad;
    const Tensor logits = model->forward(ids);
    const Tensor want = ref.tensor("logits");
    LATHE_CHECK_ARG(logits.shape() == want.shape(), a.positional[1], ": logits shape ", shape_str(want.shape()),
                    " but the model gives ", shape_str(logits.shape()));
    const Diff d = compare(logits, want);
    const bool pass = d.max_abs <= atol;
    ok = ok && pass;
    std::printf("%-60s %12.3e %12.3e %12.3e  %s\n", "logits", d.max_abs, d.max_rel, d.norm_rel, pass ? "ok" : "FAIL");
  }
  bool any_grad = false;
  for (const auto& e : ref.entries()) any_grad = any_grad || e.name.rfind("grad.", 0) == 0;
  if (any_grad) {
    model->set_requires_grad(true);
    const Tensor loss = model->next_token_loss(ids);
    backward(loss);
    std::printf("%-60s %12.6f\n", "loss (mean next-token cross-entropy)", loss.item());
    std::map<std::string, Tensor> grads;
    for (auto& [name, g] : model->gradients_by_name()) grads[name] = g;
    for (const auto& e : ref.entries()) {
      if (e.name.rfind("grad.", 0) != 0) continue;
      const std::string pname = e.name.substr(5);
      auto it = grads.find(pname);
      if (it == grads.end()) {
        std::printf("%-60s %12s %12s %12s  %s\n", pname.c_str(), "-", "-", "-", "FAIL (no such parameter)");
        ok = false;
        continue;
      }
      const Diff d = compare(it->second, ref.tensor(e.name));
      const bool pass = it->second.shape() == e.shape && d.norm_rel <= grad_rtol;
      ok = ok && pass;
      std::printf("%-60s %12.3e %12.3e %12.3e  %s\n", ("grad." + pname).c_str(), d.max_abs, d.max_rel, d.norm_rel,
                  pass ? "ok" : "FAIL");
    }
  }
  std::printf("%s\n", ok ? "verify: PASS" : "verify: FAIL");
  return ok ? 0 : 1;
}

}  // namespace lathe::cli
