// The `sft:` section of a recipe (docs/sft.md), with the data.* and run.* keys the SFT objective reads.
// Every key is checked: an unknown key, a wrong type or an impossible value is an InvalidArgument naming
// the recipe and the key. Defaults are TRL's SFTConfig @f2cd5771 (specs/posttrain.md §7), written into
// the resolved recipe so a run folder says what it trained with.
#pragma once

#include <cstdint>
#include <string>

#include "lathe/posttrain/example_encoder.h"
#include "lathe/train/recipe.h"

namespace lathe::posttrain {

enum class Packing : uint8_t { kNone, kBfd, kWrapped, kCount };
enum class SftLoss : uint8_t { kNll, kDft, kCount };

struct SftOptions {
  std::string train_data, val_data;  // data.train / data.val: a .jsonl file or a folder of them
  std::string tokenizer;             // sft.tokenizer, else model.base (its tokenizer.json and tokenizer_config.json)
  EncoderOptions encoder;            // sft.max_length, truncation_mode, completion_only_loss, assistant_only_loss,
                                     // chat_template_kwargs
  Packing packing = Packing::kNone;  // sft.packing (false) and sft.packing_strategy (bfd | wrapped)
  SftLoss loss = SftLoss::kNll;      // sft.loss_type: nll | dft
  int64_t batch_size = 0;            // data.batch_size: rows (examples, or packed rows) per micro-batch, all ranks
  int64_t grad_accum = 1;            // data.grad_accum: the loss is normalised over all of a step's micro-batches
  uint64_t seed = 0;                 // run.seed: the row order of each epoch
  bool shuffle = true;               // data.shuffle
  int64_t eval_batches = 8;          // eval.batches
};

// From a resolved recipe whose `sft` is set; writes the defaults it applied into c.resolved["sft"].
SftOptions sft_options(train::TrainConfig& c);

}  // namespace lathe::posttrain
