// A lookup table: token embeddings, or GPT-2's learned positions.
#pragma once

#include "lathe/tensor/tensor.h"

namespace lathe {

struct Embedding {
  Tensor weight;  // [V, C] (positions: [P, C])
};

}  // namespace lathe
