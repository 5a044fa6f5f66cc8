// ZeRO-1 (specs/pretrain.md §4; llm.c `-z 1`): the AdamW state is split over the ranks. The parameters,
// concatenated in optimizer order, are one flat range of N elements; rank r owns elements
// [r·N/W, (r+1)·N/W) (a range may cut a tensor) and keeps m and v for them only: 2N/W floats instead of 2N.
//   per step:  gradients averaged over all ranks (the all-reduce, overlapped or not, as without ZeRO)
//              g_norm from the whole averaged gradient, which every rank holds: zero=0's value bit for
//              bit (no per-shard partial sums whose order would depend on W)
//              AdamW on the owned elements;  all-gather the parameters (in bounded chunks)
// Checkpoints hold the whole state (gathered to rank 0), so a run resumes on any world size, ZeRO or not.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "lathe/dist/communicator.h"
#include "lathe/train/adamw.h"

namespace lathe::train {

// The elements rank `rank` of `world` owns.
ElementRange zero_owned_range(const std::vector<OptimParam>& params, int rank, int world);

// After every rank's AdamW step on its range: every rank gets every parameter (collective).
void zero_all_gather_params(const AdamW& opt, dist::Communicator& comm);

// The whole optimizer state (m, v of every parameter, the step count) on rank 0, nullopt on the others, for
// a checkpoint. Collective: every rank calls it.
std::optional<AdamW> zero_gather_state(const AdamW& opt, dist::Communicator& comm);

}  // namespace lathe::train
