// What a parameter is for, given by the family file that binds it (never guessed from its name): it
// decides the initialisation and the weight-decay group.
#pragma once

#include <cstdint>

namespace lathe {

enum class ParamRole : uint8_t {
  kMatmulWeight,  // a Linear's weight [out, in] (q/k/v/o, MLP projections, an untied LM head)
  kBias,          // a Linear's bias [out], or a LayerNorm's shift [C]
  kNormWeight,    // a norm's scale [C] or [D] (RMSNorm, LayerNorm, q/k norms)
  kEmbedding,     // a lookup table [V, C] or [P, C] (also the LM head when tied)
  kRouter,        // an MoE router [E, C]
  kExpert,        // stacked expert weights [E, F, C] / [E, C, F]
  kCount,
};

const char* param_role_name(ParamRole r);  // "matmul_weight", "bias", ...

}  // namespace lathe
