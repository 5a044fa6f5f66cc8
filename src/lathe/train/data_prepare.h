// `lathe data prepare`: text files or JSONL -> token shards (token_shard.h) with a train/val split.
// Inputs are streamed in order; documents are tokenized in parallel in blocks, and each document is
// written as <delimiter> + its tokens (specs/pretrain.md §2.6: the delimiter opens every document).
// A document goes to validation when a hash of (seed, its global index) falls below val_fraction, so the
// split is deterministic, spread over the whole corpus, and independent of the shard size.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "lathe/base/thread_pool.h"

namespace lathe::train {

struct PrepareProgress {
  int64_t bytes_done = 0, bytes_total = 0;
  int64_t documents = 0, tokens = 0;
};

struct PrepareOptions {
  std::vector<std::string> inputs;   // .jsonl / .json lines files, or plain text files
  std::string tokenizer;             // tokenizer.json or a folder holding one
  std::string out_dir;               // created if missing
  std::string name = "data";         // shard names: <name>_train_000000.bin, <name>_val_000000.bin
  std::string field = "text";        // JSONL: the string field holding the document
  std::string text_split = "line";   // plain text: one document per "line", "paragraph" (blank-line
                                     // separated) or "file" (as the Hugging Face `text` loader)
  double val_fraction = 0.01;        // share of documents held out for validation
  int64_t shard_tokens = 100'000'000;
  uint64_t seed = 0;
  std::string delimiter;             // token opening each document; "" = the tokenizer's BOS, else its EOS
  std::function<void(const PrepareProgress&)> progress;  // called after each block of documents
};

struct PrepareSummary {
  int64_t documents_train = 0, documents_val = 0;
  int64_t tokens_train = 0, tokens_val = 0;
  std::vector<std::string> train_shards, val_shards;
  int width = 2;               // bytes per token in the shards
  int32_t delimiter_id = -1;
  std::string delimiter;
  uint64_t vocab_size = 0;
  std::string manifest;        // path of <out_dir>/<name>.json, which records all of the above
};

PrepareSummary prepare_data(const PrepareOptions& opts, const ThreadPool& pool);

}  // namespace lathe::train
