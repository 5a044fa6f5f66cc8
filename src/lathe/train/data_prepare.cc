#include "lathe/train/data_prepare.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "lathe/base/error.h"
#include "lathe/base/rng.h"
#include "lathe/io/mapped_file.h"
#include "lathe/io/tokenizer/tokenizer.h"
#include "lathe/train/token_shard.h"

namespace lathe::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

bool is_jsonl(const std::string& path) {
  const std::string ext = fs::path(path).extension().string();
  return ext == ".jsonl" || ext == ".json" || ext == ".ndjson";
}

// Reads documents from the inputs in order, one block at a time.
class DocumentReader {
 public:
  explicit DocumentReader(const PrepareOptions& opts) : opts_(opts) {
    LATHE_CHECK_ARG(opts.text_split == "line" || opts.text_split == "paragraph" || opts.text_split == "file",
                    "data prepare: text_split must be line, paragraph or file, got '", opts.text_split, "'");
    for (const auto& p : opts.inputs) {
      std::error_code ec;
      const auto size = fs::file_size(p, ec);
      if (ec) throw IoError(str_cat(p, ": cannot read input: ", ec.message()));
      bytes_total_ += static_cast<int64_t>(size);
    }
  }
  int64_t bytes_total() const { return bytes_total_; }
  int64_t bytes_done() const { return bytes_done_; }

  // Appends up to max_docs documents (stopping early after max_bytes); false when the inputs are exhausted.
  bool read_block(std::vector<std::string>& docs, size_t max_docs, size_t max_bytes) {
    size_t bytes = 0;
    while (docs.size() < max_docs && bytes < max_bytes) {
      if (!in_.is_open()) {
        if (next_file_ >= opts_.inputs.size()) return !docs.empty();
        path_ = opts_.inputs[next_file_++];
        in_.open(path_, std::ios::binary);
        if (!in_) throw IoError(str_cat(path_, ": cannot open input"));
        line_no_ = 0;
      }
      std::string doc;
      if (!next_document(doc)) {
        in_.close();
        continue;
      }
      bytes += doc.size();
      docs.push_back(std::move(doc));
    }
    return true;
  }

 private:
  bool next_document(std::string& doc) {
    std::string line;
    if (is_jsonl(path_)) {
      while (std::getline(in_, line)) {
        ++line_no_;
        bytes_done_ += static_cast<int64_t>(line.size()) + 1;
        if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
        json j;
        try {
          j = json::parse(line);
        } catch (const json::exception& e) {
          throw FormatError(str_cat(path_, ":", line_no_, ": not valid JSON: ", e.what()));
        }
        LATHE_CHECK_FORMAT(j.is_object() && j.contains(opts_.field) && j[opts_.field].is_string(), path_, ":",
                           line_no_, ": expected an object with a string field \"", opts_.field, "\"");
        doc = j[opts_.field].get<std::string>();
        return true;
      }
      return false;
    }
    if (opts_.text_split == "line") {
      while (std::getline(in_, line)) {
        ++line_no_;
        bytes_done_ += static_cast<int64_t>(line.size()) + 1;
        if (line.empty()) continue;
        doc = std::move(line);
        return true;
      }
      return false;
    }
    bool any = false;
    while (std::getline(in_, line)) {
      ++line_no_;
      bytes_done_ += static_cast<int64_t>(line.size()) + 1;
      if (opts_.text_split == "paragraph" && line.find_first_not_of(" \t\r") == std::string::npos) {
        if (any) return true;
        continue;
      }
      if (any) doc += '\n';
      doc += line;
      any = true;
    }
    return any;
  }

  const PrepareOptions& opts_;
  size_t next_file_ = 0;
  std::ifstream in_;
  std::string path_;
  size_t line_no_ = 0;
  int64_t bytes_total_ = 0, bytes_done_ = 0;
};

// Buffers one split's tokens and writes a shard whenever shard_tokens are collected.
class ShardWriter {
 public:
  ShardWriter(std::string prefix, int64_t shard_tokens, int width, std::vector<std::string>& paths)
      : prefix_(std::move(prefix)), shard_tokens_(shard_tokens), width_(width), paths_(paths) {}
  void append(std::span<const uint32_t> tokens) {
    for (uint32_t t : tokens) {
      buf_.push_back(t);
      if (static_cast<int64_t>(buf_.size()) == shard_tokens_) flush();
    }
  }
  void flush() {
    if (buf_.empty()) return;
    char index[16];
    std::snprintf(index, sizeof(index), "%06zu", paths_.size());
    const std::string path = prefix_ + index + ".bin";
    write_token_shard(path, buf_, width_);
    paths_.push_back(path);
    buf_.clear();
  }

 private:
  std::string prefix_;
  int64_t shard_tokens_;
  int width_;
  std::vector<std::string>& paths_;
  std::vector<uint32_t> buf_;
};

}  // namespace

PrepareSummary prepare_data(const PrepareOptions& opts, const ThreadPool& pool) {
  LATHE_CHECK_ARG(!opts.inputs.empty(), "data prepare: no input files");
  LATHE_CHECK_ARG(!opts.out_dir.empty(), "data prepare: no output folder");
  LATHE_CHECK_ARG(opts.val_fraction >= 0 && opts.val_fraction < 1, "data prepare: val_fraction must be in [0, 1), got ",
                  opts.val_fraction);
  LATHE_CHECK_ARG(opts.shard_tokens > 0 && opts.shard_tokens <= INT32_MAX, "data prepare: shard_tokens must be in [1, 2^31)");
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(opts.tokenizer);

  PrepareSummary sum;
  sum.vocab_size = tok.vocab_size();
  sum.width = token_width_for_vocab(sum.vocab_size);
  const auto& special = tok.special_tokens();
  if (!opts.delimiter.empty()) {
    const auto id = tok.token_to_id(opts.delimiter);
    LATHE_CHECK_ARG(id.has_value(), "data prepare: delimiter token '", opts.delimiter, "' is not in the vocabulary of ",
                    opts.tokenizer);
    sum.delimiter = opts.delimiter;
    sum.delimiter_id = static_cast<int32_t>(*id);
  } else if (special.bos_id) {
    sum.delimiter = special.bos;
    sum.delimiter_id = static_cast<int32_t>(*special.bos_id);
  } else if (special.eos_id) {
    sum.delimiter = special.eos;
    sum.delimiter_id = static_cast<int32_t>(*special.eos_id);
  } else {
    throw InvalidArgument(str_cat("data prepare: ", opts.tokenizer,
                                  " names no BOS or EOS token; choose the document delimiter with --delimiter TOKEN"));
  }

  fs::create_directories(opts.out_dir);
  const std::string base = (fs::path(opts.out_dir) / opts.name).string();
  ShardWriter train(base + "_train_", opts.shard_tokens, sum.width, sum.train_shards);
  ShardWriter val(base + "_val_", opts.shard_tokens, sum.width, sum.val_shards);
  // Validation membership: hash of (seed, document index) below the fraction (exact in 2^-53 steps).
  const uint64_t val_key = derive_key(opts.seed, 0x76616cull);
  const auto is_val = [&](int64_t doc) {
    return static_cast<double>(mix64(val_key + static_cast<uint64_t>(doc)) >> 11) * 0x1.0p-53 < opts.val_fraction;
  };

  DocumentReader reader(opts);
  std::vector<std::string> docs;
  std::vector<std::vector<uint32_t>> ids;
  int64_t doc_index = 0;
  while (true) {
    docs.clear();
    if (!reader.read_block(docs, 4096, 8 << 20)) break;
    if (docs.empty()) break;
    ids.assign(docs.size(), {});
    pool.parallel_for(static_cast<int64_t>(docs.size()),
                      [&](int64_t i, int) { ids[i] = tok.encode_ids(docs[i], /*add_special_tokens=*/false); });
    for (size_t i = 0; i < docs.size(); ++i, ++doc_index) {
      const uint32_t delim = static_cast<uint32_t>(sum.delimiter_id);
      const bool v = is_val(doc_index);
      ShardWriter& w = v ? val : train;
      w.append({&delim, 1});
      w.append(ids[i]);
      (v ? sum.documents_val : sum.documents_train) += 1;
      (v ? sum.tokens_val : sum.tokens_train) += static_cast<int64_t>(ids[i].size()) + 1;
    }
    if (opts.progress)
      opts.progress({reader.bytes_done(), reader.bytes_total(), sum.documents_train + sum.documents_val,
                     sum.tokens_train + sum.tokens_val});
  }
  train.flush();
  val.flush();
  LATHE_CHECK_ARG(sum.documents_train + sum.documents_val > 0, "data prepare: the inputs hold no documents");

  const auto names = [](const std::vector<std::string>& paths) {
    std::vector<std::string> out;
    for (const auto& p : paths) out.push_back(fs::path(p).filename().string());
    return out;
  };
  json manifest = {
      {"tokenizer", opts.tokenizer},
      {"vocab_size", sum.vocab_size},
      {"token_bytes", sum.width},
      {"delimiter", sum.delimiter},
      {"delimiter_id", sum.delimiter_id},
      {"seed", opts.seed},
      {"val_fraction", opts.val_fraction},
      {"inputs", opts.inputs},
      {"train", {{"documents", sum.documents_train}, {"tokens", sum.tokens_train}, {"shards", names(sum.train_shards)}}},
      {"val", {{"documents", sum.documents_val}, {"tokens", sum.tokens_val}, {"shards", names(sum.val_shards)}}},
  };
  sum.manifest = base + ".json";
  write_file_atomic(sum.manifest, manifest.dump(2) + "\n");
  return sum;
}

}  // namespace lathe::train
