// optim_params and matmul_params (see param_groups.h).
#include "lathe/train/param_groups.h"

namespace lathe::train {

std::vector<OptimParam> optim_params(Model& m, bool decay_embeddings) {
  std::vector<OptimParam> out;
  m.for_each_param([&](const std::string& name, Tensor& t, ParamRole role, int) {
    bool decay = false;
    switch (role) {
      case ParamRole::kMatmulWeight:
      case ParamRole::kRouter:
      case ParamRole::kExpert: decay = true; break;
      case ParamRole::kEmbedding: decay = decay_embeddings; break;
      case ParamRole::kBias:
      case ParamRole::kNormWeight:
      case ParamRole::kCount: break;
    }
    out.push_back({name, t, decay});
  });
  return out;
}

int64_t matmul_params(const Model& m) {
  const ModelConfig& c = m.config();
  int64_t n = 0;
  m.for_each_param([&](const std::string&, const Tensor& t, ParamRole role, int) {
    if (role == ParamRole::kMatmulWeight || role == ParamRole::kRouter) n += t.numel();
    if (role == ParamRole::kExpert) n += t.numel() * c.top_k / c.n_experts;
  });
  if (c.tie_embeddings) n += m.weights().lm_head.weight.numel();  // the head reads the embedding table
  return n;
}

}  // namespace lathe::train
