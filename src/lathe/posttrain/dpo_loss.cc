#include "lathe/posttrain/dpo_loss.h"

#include <algorithm>
#include <cmath>

#include "lathe/base/error.h"

namespace lathe::posttrain {

namespace {

constexpr const char* kNames[] = {"sigmoid", "robust", "hinge", "ipo", "simpo", "orpo", "kto"};
static_assert(std::size(kNames) == static_cast<size_t>(DpoLossType::kCount));

double sigmoid(double x) {
  if (x >= 0) return 1 / (1 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1 + e);
}

// −(1−ε) log σ(z) − ε log σ(−z) and its derivative in z (d/dz log σ(z) = σ(−z)).
void smoothed_logistic(double z, double eps, double& loss, double& dz) {
  loss = -(1 - eps) * log_sigmoid(z) - eps * log_sigmoid(-z);
  dz = -(1 - eps) * sigmoid(-z) + eps * sigmoid(z);
}

}  // namespace

const char* dpo_loss_name(DpoLossType t) { return kNames[static_cast<size_t>(t)]; }

DpoLossType dpo_loss_from_name(const std::string& name) {
  for (size_t i = 0; i < std::size(kNames); ++i)
    if (name == kNames[i]) return static_cast<DpoLossType>(i);
  return DpoLossType::kCount;
}

double log_sigmoid(double x) { return x < 0 ? x - std::log1p(std::exp(x)) : -std::log1p(std::exp(-x)); }

PairLoss dpo_pair_loss(const DpoLossConfig& c, const PairLogps& p) {
  const double beta = c.beta, eps = c.label_smoothing;
  PairLoss r;
  r.reward_chosen = beta * (p.chosen - p.ref_chosen);
  r.reward_rejected = beta * (p.rejected - p.ref_rejected);
  const double delta = (p.chosen - p.ref_chosen) - (p.rejected - p.ref_rejected);
  double dz = 0;  // ∂loss/∂z for z = βΔ (the sigmoid family)
  switch (c.type) {
    case DpoLossType::kSigmoid:
      smoothed_logistic(beta * delta, eps, r.loss, dz);
      break;
    case DpoLossType::kRobust: {
      const double z = beta * delta;
      r.loss = (-(1 - eps) * log_sigmoid(z) + eps * log_sigmoid(-z)) / (1 - 2 * eps);
      dz = (-(1 - eps) * sigmoid(-z) - eps * sigmoid(z)) / (1 - 2 * eps);
      break;
    }
    case DpoLossType::kHinge: {
      const double z = beta * delta;
      r.loss = std::max(0.0, 1 - z);
      dz = 1 - z > 0 ? -1.0 : 0.0;  // relu'(0) = 0, as torch
      break;
    }
    case DpoLossType::kIpo: {
      const double d = delta - 1 / (2 * beta);
      r.loss = d * d;
      r.d_chosen = 2 * d;
      r.d_rejected = -2 * d;
      return r;
    }
    case DpoLossType::kSimpo: {
      // TRL CPOTrainer: logits = (P̄_w − P̄_l) − γ/β, loss on β·logits; rewards β·P̄.
      r.reward_chosen = beta * p.chosen;
      r.reward_rejected = beta * p.rejected;
      smoothed_logistic(beta * (p.chosen - p.rejected) - c.simpo_gamma, eps, r.loss, dz);
      break;
    }
    case DpoLossType::kOrpo: {
      // log odds = P̄ − log(1 − exp P̄) with P̄ clamped ≤ −1e-7 (Tunix: log1p(−exp 0) is −inf); the clamp
      // passes no gradient, as torch.clamp.
      constexpr double kMax = -1e-7;
      const double pc = std::min(p.chosen, kMax), pr = std::min(p.rejected, kMax);
      const double lo = (pc - std::log1p(-std::exp(pc))) - (pr - std::log1p(-std::exp(pr)));
      r.loss = -beta * log_sigmoid(lo);
      const double dlo = -beta * sigmoid(-lo);
      r.d_chosen = p.chosen < kMax ? dlo / (1 - std::exp(pc)) : 0;  // d/dP̄ [P̄ − log(1 − e^P̄)] = 1/(1 − e^P̄)
      r.d_rejected = p.rejected < kMax ? -dlo / (1 - std::exp(pr)) : 0;
      r.reward_chosen = beta * p.chosen;
      r.reward_rejected = beta * p.rejected;
      return r;
    }
    case DpoLossType::kKto:
    case DpoLossType::kCount:
      LATHE_ASSERT(false);  // kto: kto_example_loss
      break;
  }
  r.d_chosen = beta * dz;  // z = β(chosen − rejected − ...)
  r.d_rejected = -beta * dz;
  return r;
}

KtoExampleLoss kto_example_loss(const DpoLossConfig& c, double logp, double ref_logp, double z0, bool desirable) {
  // desirable: w_D(1 − σ(β(r − z0))), d/dr = −w_D·β·σ'(β(r − z0)); undesirable: w_U(1 − σ(β(z0 − r))),
  // d/dr = +w_U·β·σ'(β(z0 − r)); σ'(z) = σ(z)σ(−z).
  const double r = logp - ref_logp, z = desirable ? c.beta * (r - z0) : c.beta * (z0 - r);
  const double w = desirable ? c.desirable_weight : c.undesirable_weight;
  const double dz = w * sigmoid(z) * sigmoid(-z);
  return {.loss = w * sigmoid(-z),  // 1 − σ(z) = σ(−z), without cancellation
          .d_logp = desirable ? -c.beta * dz : c.beta * dz,
          .reward = c.beta * r};
}

}  // namespace lathe::posttrain
