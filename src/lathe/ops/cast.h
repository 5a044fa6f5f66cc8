// bf16 mixed-precision training (specs/pretrain.md §2.4): rounding of matmul inputs, the bf16 compute
// copy of an f32 master weight, and the stochastic rounding that writes that copy.
#pragma once

#include <cstdint>

#include "lathe/tensor/tensor.h"

namespace lathe {

// x [...] f32 -> [...] bf16, rounded to nearest even: a matmul input in bf16 compute (the consumer keeps
// this half-size copy for its backward). Gradient: straight through, dx = g (f32). When x was produced
// by a recorded op, the node goes directly onto that op's inputs: the graph no longer holds the f32 x.
Tensor to_bf16(const Tensor& x);

// The bf16 compute copy of an f32 master weight: returns `copy` (bf16, master's shape) with a gradient
// rule that hands d(loss)/d(copy) (f32) unchanged to the master, so gradients accumulate in f32 on the
// master while the matmuls read the copy. copy must have been written from master (stochastic_round_bf16).
Tensor bf16_compute_weight(const Tensor& master, const Tensor& copy);

// dst [...] bf16 = stochastic rounding of src [...] f32 (contiguous, same shape): each element rounds
// up with probability equal to its distance from the lower bf16 neighbour (unbiased). Element i uses
// 16 bits of draw i / 4 of CounterRng{key}: the result is a pure function of (src, key), for any thread count.
void stochastic_round_bf16(const Tensor& src, const Tensor& dst, uint64_t key);

}  // namespace lathe
