// Which of a model's tensors the optimizer updates, under which names and with or without weight decay;
// and how many of them take part in matmuls (the MFU numerator).
#pragma once

#include <cstdint>
#include <vector>

#include "lathe/models/model.h"
#include "lathe/train/adamw.h"

namespace lathe::train {

// Every distinct parameter once, named for the optimizer state by its checkpoint binding ("#i" for one part
// of a fused tensor, e.g. GPT-2's c_attn). Matrices decay; norms and biases never; embeddings only with
// `decay_embeddings`.
std::vector<OptimParam> optim_params(Model& m, bool decay_embeddings);

// Parameters that take part in matmuls: matrices, minus lookup-only embeddings; the tied head counts once;
// for MoE only the routed fraction of the experts.
int64_t matmul_params(Model& m);

}  // namespace lathe::train
