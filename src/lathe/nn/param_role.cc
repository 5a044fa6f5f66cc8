// Names of the parameter roles (for messages and tests).
#include "lathe/nn/param_role.h"

namespace lathe {

const char* param_role_name(ParamRole r) {
  switch (r) {
    case ParamRole::kMatmulWeight: return "matmul_weight";
    case ParamRole::kBias: return "bias";
    case ParamRole::kNormWeight: return "norm_weight";
    case ParamRole::kEmbedding: return "embedding";
    case ParamRole::kRouter: return "router";
    case ParamRole::kExpert: return "expert";
    case ParamRole::kCount: break;
  }
  return "?";
}

}  // namespace lathe
