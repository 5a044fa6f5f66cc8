// Test utility: finite-difference gradient check for any differentiable op built on lathe tensors.
// Reduces the op's output to a scalar with fixed random weights (so every output element matters),
// then compares backward()'s gradient of each input with central differences in f32.
#pragma once

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "lathe/autograd/node.h"
#include "lathe/tensor/tensor.h"

namespace lathe::testing {

inline Tensor random_tensor(const Shape& shape, uint32_t seed, float scale = 1.f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.f, scale);
  std::vector<float> v(shape_numel(shape));
  for (float& x : v) x = dist(rng);
  return Tensor::from_data(shape, v);
}

// sum(out * weights) in double, no autograd: the scalar the finite differences perturb.
inline double weighted_sum(const Tensor& out, const std::vector<float>& weights) {
  std::vector<float> o = out.to_vector();
  double s = 0;
  for (size_t i = 0; i < o.size(); ++i) s += static_cast<double>(o[i]) * weights[i];
  return s;
}

struct GradCheckResult {
  double max_rel_err = 0;  // ||analytic - numeric|| / max(||numeric||, tiny), worst input
  std::string report;
};

// fn maps the inputs to one output tensor. Inputs marked requires_grad are checked.
// eps: perturbation (f32 inputs: 1e-2..1e-3 keeps truncation and rounding error both near 1e-4).
inline GradCheckResult gradcheck(const std::function<Tensor(const std::vector<Tensor>&)>& fn,
                                 std::vector<Tensor> inputs, float eps = 1e-2f, uint32_t seed = 7) {
  GradCheckResult res;
  Tensor out = fn(inputs);
  std::vector<float> w = random_tensor(out.shape(), seed).to_vector();
  // Analytic: backward of sum(out * w) = backward with grad_output w, via a scalar loss node.
  Tensor wt = Tensor::from_data(out.shape(), w);
  Tensor loss = Tensor::full({1}, static_cast<float>(weighted_sum(out, w)));
  record(loss, "weighted_sum", {out}, [wt](const Tensor&) -> std::vector<Tensor> { return {wt.clone()}; });
  backward(loss);
  for (size_t i = 0; i < inputs.size(); ++i) {
    Tensor& x = inputs[i];
    if (!x.requires_grad()) continue;
    Tensor ga = x.grad();
    if (!ga.defined()) {
      res.max_rel_err = 1e30;
      res.report += "input " + std::to_string(i) + ": no gradient\n";
      continue;
    }
    std::vector<float> analytic = ga.to_vector();
    double diff2 = 0, ref2 = 0;
    float* p = x.data<float>();
    for (int64_t j = 0; j < x.numel(); ++j) {
      const float saved = p[j];
      double fp, fm;
      {
        NoGradGuard ng;
        p[j] = saved + eps;
        fp = weighted_sum(fn(inputs), w);
        p[j] = saved - eps;
        fm = weighted_sum(fn(inputs), w);
      }
      p[j] = saved;
      const double numeric = (fp - fm) / (2.0 * eps);
      diff2 += (numeric - analytic[j]) * (numeric - analytic[j]);
      ref2 += numeric * numeric;
    }
    const double rel = std::sqrt(diff2) / std::max(std::sqrt(ref2), 1e-12);
    res.report += "input " + std::to_string(i) + ": rel err " + std::to_string(rel) + "\n";
    res.max_rel_err = std::max(res.max_rel_err, rel);
  }
  return res;
}

}  // namespace lathe::testing
