// The DPO family's losses on per-sequence log-probabilities (specs/posttrain.md §4, TRL @f2cd5771 semantics).
// With h_w = log π_θ(y_w|x) − log π_ref(y_w|x), h_l likewise and Δ = h_w − h_l (β the temperature, ε the
// label smoothing):
//   sigmoid (DPO / cDPO)  −(1−ε) log σ(βΔ) − ε log σ(−βΔ)
//   robust                [−(1−ε) log σ(βΔ) + ε log σ(−βΔ)] / (1−2ε)
//   hinge (SLiC)          max(0, 1 − βΔ)
//   ipo                   (Δ − 1/(2β))², log-probs divided by the completion length (TRL)
//   simpo                 −(1−ε) log σ(β(P̄_w − P̄_l) − γ) − ε log σ(−β(P̄_w − P̄_l) + γ), P̄ = log π_θ(y|x)/|y|,
//                         no reference (TRL CPOTrainer loss_type=simpo)
//   orpo                  −β log σ(log odds_w − log odds_l), log odds = P̄ − log(1 − exp P̄), P̄ clamped
//                         ≤ −1e-7, no reference; its NLL on prompt + chosen is added by the objective
//   kto                   unpaired examples (TRL KTOTrainer, arXiv 2402.01306): with r = log π_θ(y|x) −
//                         log π_ref(y|x) and z0 = max(0, sg[mean over the batch of r(x, y′)]) on mismatched
//                         pairs, a desirable example costs w_D(1 − σ(β(r − z0))), an undesirable one
//                         w_U(1 − σ(β(z0 − r))); kto_example_loss is one example's share, z0 given
// Implicit rewards r = β·h (simpo / orpo: β·P̄). Each function returns the loss of one pair (KTO: example)
// and its derivatives with respect to the policy's log-probs (the objective turns them into per-token
// weights: the loss is linear in the token log-probs through them).
#pragma once

#include <cstdint>
#include <string>

namespace lathe::posttrain {

enum class DpoLossType : uint8_t { kSigmoid, kRobust, kHinge, kIpo, kSimpo, kOrpo, kKto, kCount };

const char* dpo_loss_name(DpoLossType t);
// "sigmoid" -> kSigmoid, ...; kCount for an unknown name.
DpoLossType dpo_loss_from_name(const std::string& name);
// SimPO and ORPO compare the policy's own log-probs: no reference model.
inline bool loss_needs_reference(DpoLossType t) { return t != DpoLossType::kSimpo && t != DpoLossType::kOrpo; }
// IPO, SimPO and ORPO use length-normalised log-probs (log π / |y|).
inline bool loss_length_normalised(DpoLossType t) {
  return t == DpoLossType::kIpo || t == DpoLossType::kSimpo || t == DpoLossType::kOrpo;
}

struct DpoLossConfig {
  DpoLossType type = DpoLossType::kSigmoid;
  double beta = 0.1;             // TRL DPOConfig.beta (ORPO: λ, TRL ORPOConfig.beta = 0.1)
  double label_smoothing = 0;    // ε: sigmoid, robust (< 0.5), simpo
  double rpo_alpha = 0;          // > 0: + rpo_alpha · NLL of the chosen completion (token mean); 0: off
  double simpo_gamma = 0.5;      // γ: SimPO's target margin (TRL CPOConfig.simpo_gamma)
  double desirable_weight = 1;   // w_D: KTO (TRL KTOConfig.desirable_weight)
  double undesirable_weight = 1; // w_U: KTO (TRL KTOConfig.undesirable_weight)
};

// One pair's log-probs: policy and reference (0 when reference-free), length-normalised by the caller
// when loss_length_normalised(type).
struct PairLogps {
  double chosen = 0, rejected = 0, ref_chosen = 0, ref_rejected = 0;
};

struct PairLoss {
  double loss = 0;
  double d_chosen = 0, d_rejected = 0;  // ∂loss/∂chosen, ∂loss/∂rejected (policy log-probs as given)
  double reward_chosen = 0, reward_rejected = 0;
};

// Not for kKto (its loss is per example: kto_example_loss).
PairLoss dpo_pair_loss(const DpoLossConfig& c, const PairLogps& p);

struct KtoExampleLoss {
  double loss = 0;
  double d_logp = 0;  // ∂loss/∂log π_θ(y|x) (z0 is a constant: stop-gradient)
  double reward = 0;  // β·r
};

// One KTO example: `logp` / `ref_logp` its policy / reference log-probs (raw sums), z0 the batch's clamped
// KL estimate, `desirable` its label.
KtoExampleLoss kto_example_loss(const DpoLossConfig& c, double logp, double ref_logp, double z0, bool desirable);

// log σ(x), stable for large |x|.
double log_sigmoid(double x);

}  // namespace lathe::posttrain
