#include "lathe/train/data_prepare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <signal.h>
#include <string_view>
#include <unistd.h>

#include "lathe/base/error.h"
#include "lathe/base/rng.h"
#include "lathe/io/file_read.h"
#include "lathe/io/line_reader.h"
#include "lathe/io/mapped_file.h"
#include "lathe/io/tokenizer/tokenizer.h"
#include "lathe/io/tokenizer/unicode.h"
#include "lathe/train/data_loader.h"
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
    // Every input opened once up front: a FIFO, folder or device (or a missing file) fails here, naming
    // it, before anything is written.
    for (const auto& p : opts.inputs) {
      const RegularFile f = open_regular_file(p);
      ::close(f.fd);
      bytes_total_ += static_cast<int64_t>(f.size);
    }
  }
  int64_t bytes_total() const { return bytes_total_; }
  int64_t bytes_done() const { return bytes_done_; }

  // Appends up to max_docs documents (stopping early after max_bytes); false when the inputs are exhausted.
  bool read_block(std::vector<std::string>& docs, size_t max_docs, size_t max_bytes) {
    size_t bytes = 0;
    while (docs.size() < max_docs && bytes < max_bytes) {
      if (!in_) {
        if (next_file_ >= opts_.inputs.size()) return !docs.empty();
        path_ = opts_.inputs[next_file_++];
        in_ = LineReader::open(path_);  // streamed: an input can be larger than memory
        line_no_ = 0;
        file_offset_ = 0;
      }
      std::string doc;
      if (!next_document(doc)) {
        in_.reset();
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
      while (in_->next(line)) {
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
      while (next_text_line(line)) {
        if (line.empty()) continue;
        doc = std::move(line);
        return true;
      }
      return false;
    }
    bool any = false;
    while (next_text_line(line)) {
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

  // One line of a plain text input, which must be UTF-8 (as JSON strings are): the tokenizer would
  // otherwise train on U+FFFD in place of the bytes, silently.
  bool next_text_line(std::string& line) {
    if (!in_->next(line)) return false;
    ++line_no_;
    const size_t valid = tokenizer::utf8_valid_prefix(line);
    LATHE_CHECK_FORMAT(valid == line.size(), path_, ":", line_no_, ": invalid UTF-8 at byte offset ",
                       file_offset_ + static_cast<int64_t>(valid), " of the file (column ", valid + 1,
                       "): plain text input must be UTF-8");
    file_offset_ += static_cast<int64_t>(line.size()) + 1;
    bytes_done_ += static_cast<int64_t>(line.size()) + 1;
    return true;
  }

  const PrepareOptions& opts_;
  size_t next_file_ = 0;
  std::optional<LineReader> in_;
  std::string path_;
  size_t line_no_ = 0;
  int64_t file_offset_ = 0;  // of the current line in the current file
  int64_t bytes_total_ = 0, bytes_done_ = 0;
};

// The temporary name of an output while a preparation runs: ".<file>.tmp.<pid>" beside it. Readers never
// take it (it ends neither in .bin nor in .json); it is renamed into place once everything is written.
fs::path temporary_for(const fs::path& path) {
  return path.parent_path() / str_cat(".", path.filename().string(), ".tmp.", ::getpid());
}

// An output written under its temporary name, renamed to its final name when the preparation commits.
struct Rename {
  fs::path temporary, final;
};

// Buffers one split's tokens and writes a shard under its temporary name whenever shard_tokens are
// collected. paths: the shards' final names; temps: where they are until the preparation is committed.
class ShardWriter {
 public:
  ShardWriter(std::string prefix, int64_t shard_tokens, int width, std::vector<std::string>& paths,
              std::vector<int64_t>& counts, std::vector<Rename>& renames)
      : prefix_(std::move(prefix)),
        shard_tokens_(shard_tokens),
        width_(width),
        paths_(paths),
        counts_(counts),
        renames_(renames) {}
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
    paths_.push_back(path);
    renames_.push_back({temporary_for(path), path});  // first: a failed write is still removed with the others
    write_token_shard(renames_.back().temporary.string(), buf_, width_);
    counts_.push_back(static_cast<int64_t>(buf_.size()));
    buf_.clear();
  }

 private:
  std::string prefix_;
  int64_t shard_tokens_;
  int width_;
  std::vector<std::string>& paths_;
  std::vector<int64_t>& counts_;
  std::vector<Rename>& renames_;
  std::vector<uint32_t> buf_;
};

bool all_digits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

// The pid of a temporary's ".tmp.<pid>" tail (one or two of them: write_file_atomic adds its own), or -1
// when `s` is not such a tail.
long tmp_tail_pid(std::string_view s) {
  long pid = -1;
  for (int k = 0; k < 2 && s.substr(0, 5) == ".tmp."; ++k) {
    s.remove_prefix(5);
    const size_t end = std::min(s.find('.'), s.size());
    if (!all_digits(s.substr(0, end)) || end > 9) return -1;
    if (k == 0) pid = std::stol(std::string(s.substr(0, end)));
    s.remove_prefix(end);
  }
  return s.empty() ? pid : -1;
}

// Whether `file` (a name inside the output folder) is one of prepare's outputs for `name`: the manifest
// NAME.json, a shard NAME_{train,val}_<digits>.bin, or a temporary of either (.FILE.tmp.<pid>, and
// write_file_atomic's FILE.tmp.<pid> of earlier versions). *pid: the temporary's process, else -1.
bool is_own_output(const std::string& file, const std::string& name, long* pid = nullptr) {
  const auto match = [&](std::string_view f, bool need_tmp) {
    const auto base_or_tmp = [&](std::string_view s, std::string_view base) {
      if (s.substr(0, base.size()) != base) return false;
      const long p = s.size() == base.size() ? -1 : tmp_tail_pid(s.substr(base.size()));
      if (pid) *pid = p;
      return need_tmp || s.size() > base.size() ? p >= 0 : true;
    };
    if (f.substr(0, name.size()) != name) return false;
    f.remove_prefix(name.size());
    if (base_or_tmp(f, ".json")) return true;
    for (std::string_view split : {"_train_", "_val_"}) {
      if (f.substr(0, split.size()) != split) continue;
      const std::string_view rest = f.substr(split.size());
      const size_t dot = rest.find('.');
      if (dot != std::string_view::npos && all_digits(rest.substr(0, dot)) && base_or_tmp(rest.substr(dot), ".bin"))
        return true;
    }
    return false;
  };
  if (pid) *pid = -1;
  return match(file, false) || (!file.empty() && file[0] == '.' && match(std::string_view(file).substr(1), true));
}

// The files prepare reads and must never write over, remove or replace: the inputs, and the tokenizer's
// files (tokenizer.json, of any name when given as a file, and the two files Tokenizer::load reads beside
// it). An earlier preparation in the tokenizer's folder is not protected: it is prepare's own output.
std::vector<std::string> protected_files(const PrepareOptions& opts) {
  std::vector<std::string> out = opts.inputs;
  const tokenizer::TokenizerPaths t = tokenizer::tokenizer_paths(opts.tokenizer);
  out.insert(out.end(), {t.tokenizer_json, t.config_json, t.special_map_json});
  return out;
}

// The files in out_dir named as prepare's outputs for `name` (is_own_output): an earlier preparation's
// manifest, shards and leftover temporaries, which this one replaces once check_earlier_outputs_are_own
// has found them to be prepare's.
std::vector<fs::path> own_outputs(const fs::path& out_dir, const std::string& name) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(out_dir, ec)) return out;
  for (const auto& e : fs::directory_iterator(out_dir))
    if (is_own_output(e.path().filename().string(), name)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

// Whether `p`, one of own_outputs, is a temporary (.FILE.tmp.<pid> or FILE.tmp.<pid>) rather than a
// manifest or shard: the only outputs with ".tmp." in their names.
bool is_temporary(const fs::path& p) { return p.filename().string().find(".tmp.") != std::string::npos; }

// Whether the process that named a temporary may still be writing it (a concurrent preparation).
bool process_alive(long pid) { return pid > 0 && (::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM); }

// Whether `path` holds a manifest of an earlier preparation (is_data_manifest), which prepare may replace.
// Anything else named NAME.json is not: another tool's file, a folder, a FIFO, or a JSON file too large to
// be a manifest (a corpus), which is not read.
bool holds_data_manifest(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  const auto size = fs::file_size(path, ec);
  if (ec || size > (64u << 20)) return false;
  try {
    return is_data_manifest(json::parse(read_file(path.string())));
  } catch (const std::exception&) {
    return false;
  }
}

// Fails, before anything is written, when an earlier output under this name is not provably prepare's:
// a NAME.json that is not a data manifest, or shards NAME_{train,val}_*.bin with no manifest beside them
// (another tool's, e.g. llm.c's). They are left as they are; the message names the file.
void check_earlier_outputs_are_own(const fs::path& manifest, const std::vector<fs::path>& stale) {
  const bool has_manifest = std::find(stale.begin(), stale.end(), manifest) != stale.end();
  if (has_manifest && !holds_data_manifest(manifest))
    throw InvalidArgument(str_cat("data prepare: ", manifest.string(),
                                  " exists and is not a data manifest of `lathe data prepare` (no \"train\" / "
                                  "\"val\" shard lists), so it is not replaced; choose another --name (the manifest "
                                  "is NAME.json) or --out"));
  if (has_manifest) return;
  for (const auto& p : stale)
    if (!is_temporary(p))
      throw InvalidArgument(str_cat("data prepare: ", p.string(), " exists with no data manifest ", manifest.string(),
                                    " beside it (another tool's shard, or a preparation cut short), so it is not "
                                    "replaced; choose another --name or --out, or remove it"));
}

// Puts a complete preparation in place of the earlier one under its name: the earlier manifest goes first
// (from then on no manifest describes a mix of old and new shards), then the earlier outputs that no new
// one replaces (shards beyond the new count, temporaries of runs that died); the new shards are renamed
// into place, over earlier ones of the same name, the manifest last, and the folder is synced.
void commit_preparation(const PrepareOptions& opts, const fs::path& manifest, const std::vector<fs::path>& stale,
                        const std::vector<Rename>& renames) {
  const auto sync_folder = [&] {
    try {
      fsync_path(opts.out_dir);
    } catch (const IoError&) {
      // Some filesystems cannot sync a folder; the files themselves are durable (write_file_atomic).
    }
  };
  size_t renamed = 0;
  // The earlier manifest, kept in memory: put back when the commit fails before any earlier shard was
  // removed or replaced, so a failed swap leaves the earlier preparation usable.
  std::string earlier_manifest;
  bool earlier_shards_touched = false;
  try {
    std::error_code ec;
    const auto remove = [&](const fs::path& p) {
      if (!fs::remove(p, ec) && ec)
        throw IoError(str_cat("data prepare: cannot remove the earlier output ", p.string(), ": ", ec.message()));
    };
    for (const auto& p : stale)
      if (p.filename() == manifest.filename()) {
        earlier_manifest = read_file(p.string());
        remove(p);
      }
    sync_folder();
    for (const auto& p : stale) {
      const std::string file = p.filename().string();
      long pid = -1;
      is_own_output(file, opts.name, &pid);
      // This run's own temporaries (a dead run with the same pid, e.g. PID 1 in a container, left
      // temporaries of the same names, which this run has since written over) are renamed below.
      const bool ours = std::any_of(renames.begin(), renames.end(), [&](const Rename& r) { return r.temporary == p; });
      const bool live = pid >= 0 && pid != ::getpid() && pid != 1 && process_alive(pid);
      if (file == manifest.filename().string() || ours || live) continue;
      const bool replaced = std::any_of(renames.begin(), renames.end(),
                                        [&](const Rename& r) { return r.final.filename() == p.filename(); });
      if (!replaced) {
        earlier_shards_touched = earlier_shards_touched || !is_temporary(p);
        remove(p);
      }
    }
    for (; renamed < renames.size(); ++renamed) {
      earlier_shards_touched = earlier_shards_touched || fs::exists(renames[renamed].final, ec);
      fs::rename(renames[renamed].temporary, renames[renamed].final, ec);
      if (ec)
        throw IoError(str_cat("data prepare: cannot rename ", renames[renamed].temporary.string(), " to ",
                              renames[renamed].final.string(), ": ", ec.message()));
    }
    sync_folder();
  } catch (...) {
    std::error_code ec;
    for (size_t i = renamed; i < renames.size(); ++i) fs::remove(renames[i].temporary, ec);
    if (!earlier_manifest.empty() && !earlier_shards_touched) {
      for (size_t i = 0; i < renamed; ++i) fs::remove(renames[i].final, ec);  // new shards under new names
      try {
        write_file_atomic(manifest.string(), earlier_manifest);
      } catch (const IoError&) {
        // Cannot even restore it: the error being raised already names the folder.
      }
    }
    throw;
  }
}

// Fails, before anything is written, when an output (or an earlier output about to be removed) is one of
// the inputs: by name inside out_dir, or the same file reached through another path or a link.
void check_outputs_spare_inputs(const PrepareOptions& opts, const fs::path& manifest,
                                const std::vector<fs::path>& stale) {
  std::error_code ec;
  for (const std::string& in : protected_files(opts)) {
    const fs::path in_path(in);
    const bool in_out_dir = fs::equivalent(in_path.has_parent_path() ? in_path.parent_path() : ".", opts.out_dir, ec);
    const bool named_as_output = in_out_dir && is_own_output(in_path.filename().string(), opts.name);
    const auto same = [&](const fs::path& p) { return fs::equivalent(in_path, p, ec); };
    const fs::path* hit = same(manifest) ? &manifest : nullptr;
    for (const auto& p : stale)
      if (!hit && same(p)) hit = &p;
    if (hit || named_as_output)
      throw InvalidArgument(str_cat("data prepare: the output ", hit ? hit->string() : (fs::path(opts.out_dir) / in_path.filename()).string(),
                                    " would overwrite the input ", in,
                                    "; choose another --name or --out (outputs: NAME.json, NAME_train_*.bin, "
                                    "NAME_val_*.bin)"));
  }
}

// A path stored in the manifest: relative to the manifest's folder (absolute when there is no relative
// path), so the data folder can be used from any working directory.
std::string path_for_manifest(const std::string& p, const fs::path& manifest_dir) {
  std::error_code ec;
  const fs::path rel = fs::relative(p, manifest_dir, ec);
  if (ec || rel.empty()) return fs::absolute(p).lexically_normal().string();
  return rel.string();
}

}  // namespace

PrepareSummary prepare_data(const PrepareOptions& opts, const ThreadPool& pool) {
  LATHE_CHECK_ARG(!opts.inputs.empty(), "data prepare: no input files");
  LATHE_CHECK_ARG(!opts.out_dir.empty(), "data prepare: no output folder");
  LATHE_CHECK_ARG(opts.val_fraction >= 0 && opts.val_fraction < 1, "data prepare: val_fraction must be in [0, 1), got ",
                  opts.val_fraction);
  LATHE_CHECK_ARG(opts.shard_tokens > 0 && opts.shard_tokens <= INT32_MAX, "data prepare: shard_tokens must be in [1, 2^31)");
  LATHE_CHECK_ARG(!opts.name.empty() && opts.name != "." && opts.name != ".." &&
                      opts.name.find('/') == std::string::npos && opts.name.find('\\') == std::string::npos,
                  "data prepare: --name must be a plain file name (no '/', not '.' or '..'), got '", opts.name, "'");
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

  DocumentReader reader(opts);  // checks that every input exists and is a regular file
  std::error_code ec;
  LATHE_CHECK_ARG(!fs::exists(opts.out_dir, ec) || fs::is_directory(opts.out_dir, ec), "data prepare: --out ",
                  opts.out_dir, " is not a folder");
  const fs::path manifest_path = fs::path(opts.out_dir) / (opts.name + ".json");
  const std::vector<fs::path> stale = own_outputs(opts.out_dir, opts.name);
  check_outputs_spare_inputs(opts, manifest_path, stale);
  check_earlier_outputs_are_own(manifest_path, stale);

  // Everything is written under temporary names first (temporary_for); the earlier preparation is
  // replaced only once the new one is complete (commit_preparation), so a failure leaves it as it was.
  fs::create_directories(opts.out_dir);
  const std::string base = (fs::path(opts.out_dir) / opts.name).string();
  std::vector<int64_t> train_counts, val_counts;
  std::vector<Rename> renames;  // every output written, the manifest last
  ShardWriter train(base + "_train_", opts.shard_tokens, sum.width, sum.train_shards, train_counts, renames);
  ShardWriter val(base + "_val_", opts.shard_tokens, sum.width, sum.val_shards, val_counts, renames);
  // Validation membership: hash of (seed, document index) below the fraction (exact in 2^-53 steps).
  const uint64_t val_key = derive_key(opts.seed, 0x76616cull);
  const auto is_val = [&](int64_t doc) {
    return static_cast<double>(mix64(val_key + static_cast<uint64_t>(doc)) >> 11) * 0x1.0p-53 < opts.val_fraction;
  };

  try {
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
    std::vector<std::string> inputs;
    for (const auto& p : opts.inputs) inputs.push_back(path_for_manifest(p, opts.out_dir));
    json manifest = {
        {"format", kManifestFormat},
        {"tokenizer", path_for_manifest(opts.tokenizer, opts.out_dir)},
        {"vocab_size", sum.vocab_size},
        {"token_bytes", sum.width},
        {"delimiter", sum.delimiter},
        {"delimiter_id", sum.delimiter_id},
        {"seed", opts.seed},
        {"val_fraction", opts.val_fraction},
        {"inputs", inputs},
        {"train",
         {{"documents", sum.documents_train},
          {"tokens", sum.tokens_train},
          {"shards", names(sum.train_shards)},
          {"shard_tokens", train_counts}}},
        {"val",
         {{"documents", sum.documents_val},
          {"tokens", sum.tokens_val},
          {"shards", names(sum.val_shards)},
          {"shard_tokens", val_counts}}},
    };
    renames.push_back({temporary_for(manifest_path), manifest_path});
    write_file_atomic(renames.back().temporary.string(), manifest.dump(2) + "\n");
  } catch (...) {
    // Only this run's temporaries go; the earlier preparation (if any) is untouched.
    for (const auto& r : renames) fs::remove(r.temporary, ec);
    throw;
  }
  commit_preparation(opts, manifest_path, stale, renames);
  sum.manifest = manifest_path.string();
  return sum;
}

}  // namespace lathe::train
