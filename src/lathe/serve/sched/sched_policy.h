// The scheduler's policies as plain functions of numbers, so each can be read and tested alone:
// how many tokens a sequence gets this step (budget, chunk cap, partial-prefill slots), what a
// sequence reserves at admission, and whether an admission fits.
#pragma once

#include <cstdint>

#include "lathe/serve/sched/scheduler_config.h"

namespace lathe {

// What is left of one step as sequences are scheduled.
struct StepBudget {
  int64_t tokens_left = 0;         // of max_num_batched_tokens
  int64_t partial_slots_left = 0;  // of max_num_partial_prefills
};

struct Chunk {
  int64_t n_tokens = 0;  // 0: not scheduled this step
  bool partial = false;  // leaves the sequence short of its target (a chunked prefill)
};

// A sequence with `remaining` tokens to catch up takes min(remaining, tokens left, chunk cap); a chunk
// that would leave it unfinished needs a partial-prefill slot, else it gets nothing this step. Decodes
// (remaining 1) are never capped or partial.
Chunk chunk_for(int64_t remaining, const StepBudget& budget, const SchedulerConfig& config);

// Blocks a sequence reserves under AdmissionMode::kReserveOutput:
// ceil(n_prompt / P) + ceil(max_output / P), max_output = min(max_tokens, max_model_len - n_prompt).
// It bounds the blocks the sequence can ever hold (n_prompt + max_output - 1 tokens of K/V).
int64_t output_reservation_blocks(int64_t n_prompt, int64_t max_output, int block_size);

// Blocks admission leaves free: ceil(watermark · usable blocks).
int64_t watermark_blocks(double watermark, int64_t n_usable_blocks);

// Reservation mode: the running sequences' reservations plus this one stay under the watermark.
bool reservation_fits(int64_t reserved_blocks, int64_t seq_reservation, int64_t n_usable_blocks, int64_t watermark);
// Loose mode: the blocks this step's chunk needs stay above the watermark.
bool chunk_fits(int64_t n_new_blocks, int64_t n_free_blocks, int64_t watermark);

}  // namespace lathe
