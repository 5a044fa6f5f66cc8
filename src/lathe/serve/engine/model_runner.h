// The model runner (spec serving.md §1, execute()): owns the paged KV store whose block ids the
// KvCacheManager hands out, keeps each sequence's tokens, block table and sampling state from its first
// SchedulerOutput until it is in finished_ids, and turns one SchedulerOutput into one forward over a
// ForwardBatch (prefill chunks and decode rows mixed) and one batched sample of the rows that need a token.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "lathe/infer/sampler.h"
#include "lathe/models/model.h"
#include "lathe/models/paged_kv_store.h"
#include "lathe/serve/sched/scheduler_output.h"

namespace lathe {

class LoraRegistry;

struct ModelRunnerConfig {
  int64_t n_blocks = 0;                  // the store's blocks, the null block 0 included (the KvCacheManager's)
  int block_size = kDefaultKvBlockSize;  // P
  DType kv_dtype = DType::kF32;          // the store's K and V: kF32, kBF16 or kI8
  std::vector<int32_t> eos_token_ids;    // masked below min_tokens unless ignore_eos (SamplingState)
  // Served LoRA adapters: a sequence's adapter id -> the Linear slot its rows run with (null: none; a
  // sequence with an adapter is then refused).
  const LoraRegistry* loras = nullptr;
};

// The sampling seed of choice `index` of a request seeded `seed`: choice 0 samples with the request's
// own seed (so n = 1 matches a lone request), the others with keys derived from it.
uint64_t choice_seed(uint64_t seed, int index);

class ModelRunner {
 public:
  // The model must outlive the runner; its weights are read, never written.
  ModelRunner(const Model& model, const ModelRunnerConfig& config);
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  // Drops the state of out.finished_ids, takes in new sequences and diffs, runs the model over every
  // scheduled chunk (sequence s: its tokens [num_computed, num_computed + num_scheduled_tokens[s])) and
  // samples one token for each chunk that reaches its sequence's last known token, with that sequence's
  // own SamplingState. Chunks are ordered by LoRA slot (stable; base first), so each adapter's rows are
  // one run of the batch. Choice 0 of a request with prompt_logprobs also gets the logits of its chunk's
  // prompt rows (only such chunks: the others output their last row alone) and reports the raw logprobs
  // of the prompt tokens they predict. A step with no scheduled tokens runs nothing. InvalidArgument when
  // the output names an unknown sequence, a new one twice, a chunk past its known tokens, or a new sequence without
  // a resolved seed.
  ModelRunnerOutput execute(const SchedulerOutput& out);

  int64_t n_seqs() const { return static_cast<int64_t>(seqs_.size()); }  // sequences whose state it holds
  const PagedKvStore& store() const { return store_; }

 private:
  struct Seq {
    std::vector<int32_t> tokens;       // the prompt, then every token sampled for it
    std::vector<int32_t> block_table;  // block i holds its positions [i·P, (i + 1)·P)
    int64_t num_computed = 0;          // tokens whose K/V its blocks hold
    SamplingState sampling;
    int32_t lora_slot = 0;             // its served adapter's Linear slot (0: the base)
    int64_t n_prompt = 0;
    bool prompt_logprobs = false;      // choice 0 of a request that set prompt_logprobs
    int64_t n_prompt_logprobs = 0;     // prompt tokens 1..n whose logprobs are out (kept over a preemption)
  };
  // Where one scheduled sequence's output rows lie in the step's logits.
  struct RowPlan {
    uint64_t id = 0;
    int64_t row0 = 0;                  // its first output row
    int64_t start = 0;                 // the position of its first chunk row
    int64_t n_rows = 0;                // its output rows (the whole chunk when it reports prompt logprobs)
    int64_t lp_from = 0, lp_to = 0;    // positions whose rows give prompt logprobs (token p + 1)
    bool samples = false;              // its last output row is sampled
  };
  void add_seq(const NewSeqData& d);
  void update_seq(const CachedSeqData& d);

  const Model& model_;
  ModelRunnerConfig config_;
  PagedKvStore store_;
  Sampler sampler_;
  std::unordered_map<uint64_t, Seq> seqs_;
  // One step's scratch, reused (capacity only grows).
  std::vector<uint64_t> order_;        // the scheduled sequences, in batch order
  std::vector<SequenceChunk> chunks_;
  std::vector<SamplingState*> rows_;   // rows_[j]: the state of logits row j
  std::vector<uint64_t> row_seqs_;     // row_seqs_[j]: its sequence
  std::vector<SampledToken> sampled_;
  std::vector<RowPlan> plan_;
  std::vector<float> sample_logits_;   // [rows_.size(), V] when prompt rows sit between the sampled rows
  std::vector<TopLogprob> prompt_top_; // one prompt position's top logprobs
};

}  // namespace lathe
