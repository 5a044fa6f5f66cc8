// The optimizer's view of a model's parameters, from the parameter walk (Model::for_each_param): one
// OptimParam per distinct tensor, named as its optimizer state is checkpointed, and its weight-decay group
// by role. Also the matmul parameter count for the MFU estimate.
#pragma once

#include <vector>

#include "lathe/models/model.h"
#include "lathe/train/adamw.h"

namespace lathe::train {

// In for_each_param order, under its names (so checkpoints of earlier builds, which used the same
// names, resume). Weight decay: matmul weights, routers and experts; embeddings only with
// decay_embeddings; never norms or biases.
std::vector<OptimParam> optim_params(Model& m, bool decay_embeddings);

// Parameters that take part in matmuls (MFU): matmul weights and routers, the LM head once (the embedding
// when tied; lookups alone do not count), and of the experts only the routed fraction top_k / E.
int64_t matmul_params(const Model& m);

}  // namespace lathe::train
