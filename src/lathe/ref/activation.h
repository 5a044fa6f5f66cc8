// Scalar references of the activation functions and their derivatives, evaluated in double.
// silu: torch.nn.functional.silu; gelu: the exact erf form (HF "gelu"); gelu_tanh: the tanh approximation
// (HF "gelu_new" / "gelu_pytorch_tanh" / "gelu_fast").
#pragma once

#include <cmath>

namespace lathe::ref {

inline double silu(double x) { return x / (1.0 + std::exp(-x)); }
inline double silu_grad(double x) {
  const double s = 1.0 / (1.0 + std::exp(-x));
  return s * (1.0 + x * (1.0 - s));
}

// 1 + erf(z) is written erfc(−z): the same function, without double's cancellation for z ≪ 0.
inline double gelu(double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }
inline double gelu_grad(double x) {
  return 0.5 * std::erfc(-x / std::sqrt(2.0)) + x * std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
}

inline constexpr double kGeluTanhKappa = 0.044715;
// ½x·(1 + tanh(u)), u = √(2/π)(x + κx³), evaluated as x·σ(2u) (the same function: ½(1 + tanh u) = σ(2u))
// so the negative tail does not cancel to 0 in double; (1 − tanh²u) = 4σ(2u)(1 − σ(2u)).
inline double gelu_tanh(double x) {
  const double u = std::sqrt(2.0 / M_PI) * (x + kGeluTanhKappa * x * x * x);
  return x / (1.0 + std::exp(-2.0 * u));
}
inline double gelu_tanh_grad(double x) {
  const double k = std::sqrt(2.0 / M_PI), s = 1.0 / (1.0 + std::exp(-2.0 * k * (x + kGeluTanhKappa * x * x * x)));
  return s + 2.0 * x * s * (1.0 - s) * k * (1.0 + 3.0 * kGeluTanhKappa * x * x);
}

}  // namespace lathe::ref
