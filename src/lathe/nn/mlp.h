// Feed-forward parameters: a dense MLP (gated: act(gate_proj x) * up_proj x -> down_proj; plain, GPT-2:
// act(up_proj x) -> down_proj) and a sparse mixture of experts, named as in Hugging Face's modules.
#pragma once

#include "lathe/nn/linear.h"

namespace lathe {

struct Mlp {
  Linear gate_proj;  // [F, C] (gated MLPs only)
  Linear up_proj;    // [F, C], bias [F] (GPT-2 c_fc)
  Linear down_proj;  // [C, F], bias [C] (GPT-2 c_proj)
};

// The experts of one MoE layer, stacked along a leading E axis (the moe op's layout).
struct Experts {
  Tensor gate_proj;  // [E, Fe, C]
  Tensor up_proj;    // [E, Fe, C]
  Tensor down_proj;  // [E, C, Fe]
};

struct Moe {
  Tensor router;    // [E, C] (HF mlp.gate)
  Experts experts;
};

}  // namespace lathe
