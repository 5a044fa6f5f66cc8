// Tokenizer: loading (tokenizer.json + config files) and the encode pipeline of the Rust library:
// added tokens on the raw text -> normalizer -> normalized added tokens -> pre-tokenizer -> BPE ->
// offsets to code points -> post-processor. Also decode and the streaming decoder.
#include "lathe/io/tokenizer/tokenizer.h"

#include <deque>
#include <filesystem>

#include "lathe/base/error.h"
#include "lathe/io/file_read.h"
#include "lathe/io/tokenizer/added_tokens.h"
#include "lathe/io/tokenizer/bpe.h"
#include "lathe/io/tokenizer/decoder.h"
#include "lathe/io/tokenizer/json_reader.h"
#include "lathe/io/tokenizer/normalizer.h"
#include "lathe/io/tokenizer/pre_tokenizer.h"
#include "lathe/io/tokenizer/unicode.h"

namespace lathe::tokenizer {

class TokenizerImpl {
 public:
  Normalizer normalizer;
  PreTokenizer pre_tokenizer;
  Bpe model;
  PostProcessor post_processor;
  Decoder decoder;
  AddedVocabulary added;
  SpecialTokens specials;
  std::string chat_template;

  // Runs everything up to the post-processor. `want_strings` = fill tokens and offsets.
  void encode_into(std::string_view input, Encoding& enc, bool want_strings) const;
  void read_config(JsonRef cfg);
  std::optional<uint32_t> token_to_id(std::string_view t) const {
    int64_t id = added.find(t);
    if (id < 0) id = model.vocab().find(t);
    if (id < 0) return std::nullopt;
    return uint32_t(id);
  }
  std::string_view token_of(uint32_t id, bool* found) const {
    if (const AddedToken* a = added.by_id(id)) {
      *found = true;
      return a->content;
    }
    return model.vocab().token(id, found);
  }
};

namespace {

// Byte offset -> code-point index of the input, walked incrementally (offsets arrive nearly sorted).
class CharCursor {
 public:
  explicit CharCursor(std::string_view s) : s_(s) {}
  uint32_t at(size_t b) {
    while (byte_ < b) chars_ += !is_utf8_continuation(uint8_t(s_[byte_++]));
    while (byte_ > b) chars_ -= !is_utf8_continuation(uint8_t(s_[--byte_]));
    return uint32_t(chars_);
  }

 private:
  std::string_view s_;
  size_t byte_ = 0, chars_ = 0;
};

// A special token entry of tokenizer_config.json: a string or an AddedToken object {"content": ...}.
std::optional<std::string> token_string(JsonRef j) {
  if (j.is_string()) return std::string(j.str());
  if (j.is_object() && j["content"].is_string()) return std::string(j["content"].str());
  return std::nullopt;
}

}  // namespace

void TokenizerImpl::read_config(JsonRef cfg) {
  auto set = [&](const char* key, std::string& out) {
    if (auto s = token_string(cfg[key])) out = *s;
  };
  set("bos_token", specials.bos);
  set("eos_token", specials.eos);
  set("pad_token", specials.pad);
  set("unk_token", specials.unk);
  if (cfg["add_bos_token"].is_bool()) specials.add_bos_token = cfg["add_bos_token"].boolean();
  if (cfg["add_eos_token"].is_bool()) specials.add_eos_token = cfg["add_eos_token"].boolean();
  JsonRef tpl = cfg["chat_template"];
  if (tpl.is_string()) {
    chat_template = std::string(tpl.str());
  } else if (tpl.is_array()) {
    // Named templates: [{"name": "default", "template": "..."}, ...]; take "default", else the first.
    bool have = false;
    tpl.for_each_element([&](JsonRef t) {
      if (!t["template"].is_string()) return;
      bool is_default = t["name"].is_string() && t["name"].str() == "default";
      if (!have || is_default) chat_template = std::string(t["template"].str());
      have = have || is_default;
    });
  }
}

void TokenizerImpl::encode_into(std::string_view input, Encoding& enc, bool want_strings) const {
  CharCursor cursor(input);
  auto lock = model.lock_cache();
  bool use_cache = lock.owns_lock();
  BpeScratch scratch;
  std::vector<ModelToken> toks;
  std::vector<AddedSplit> raw_splits, norm_splits;
  std::vector<Word> words, tmp_words;
  std::deque<NormalizedString> storage;
  std::vector<MatchSpan> spans;
  auto emit = [&](uint32_t id, std::string_view token, OffsetPair orig) {
    enc.ids.push_back(id);
    if (!want_strings) return;
    enc.tokens.emplace_back(token);
    uint32_t s = cursor.at(orig.first);
    uint32_t e = cursor.at(orig.second);
    enc.offsets.push_back({s, e});
  };
  auto run_model = [&](const NormalizedString& piece) {
    words.clear();
    storage.clear();
    pre_tokenizer.pre_tokenize(piece, words, storage, tmp_words, spans);
    for (const Word& w : words) {
      toks.clear();
      model.tokenize(w.text(), w.byte_level, toks, scratch, use_cache);
      for (const ModelToken& t : toks) {
        if (!want_strings) {
          enc.ids.push_back(t.id);
          continue;
        }
        emit(t.id, model.vocab().token(t.id), w.ns->original_range(w.start + t.start, w.start + t.end));
      }
    }
  };

  added.split(input, /*raw=*/true, raw_splits);
  for (const AddedSplit& rs : raw_splits) {
    std::string_view piece = input.substr(rs.start, rs.end - rs.start);
    if (rs.id >= 0) {  // the token's text is what matched (with any stripped spaces), as in Rust
      emit(uint32_t(rs.id), piece, {rs.start, rs.end});
      continue;
    }
    NormalizedString ns{std::string(piece), rs.start};
    normalizer.normalize(ns);
    if (!added.has_normalized()) {
      run_model(ns);
      continue;
    }
    norm_splits.clear();
    added.split(ns.text(), /*raw=*/false, norm_splits);
    for (const AddedSplit& s : norm_splits) {
      if (s.id >= 0) {
        emit(uint32_t(s.id), std::string_view(ns.text()).substr(s.start, s.end - s.start),
             ns.original_range(s.start, s.end));
        continue;
      }
      run_model(ns.slice(s.start, s.end));
    }
  }
}

Tokenizer::Tokenizer(std::unique_ptr<TokenizerImpl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

TokenizerPaths tokenizer_paths(const std::string& path) {
  namespace fs = std::filesystem;
  const bool is_dir = fs::is_directory(path);
  const fs::path dir = is_dir ? fs::path(path) : fs::path(path).parent_path();
  return {.tokenizer_json = is_dir ? (dir / "tokenizer.json").string() : path,
          .config_json = (dir / "tokenizer_config.json").string(),
          .special_map_json = (dir / "special_tokens_map.json").string()};
}

TokenizerFiles read_tokenizer_files(const std::string& path) {
  namespace fs = std::filesystem;
  const TokenizerPaths p = tokenizer_paths(path);
  if (!fs::exists(fs::symlink_status(p.tokenizer_json))) throw IoError(str_cat("no tokenizer.json at ", p.tokenizer_json));
  // read_file refuses a FIFO, folder or device in place of any of the three files, naming it.
  auto optional_file = [](const std::string& f) {
    return fs::exists(fs::symlink_status(f)) ? read_file(f) : std::string();
  };
  return {.tokenizer_json = read_file(p.tokenizer_json),
          .tokenizer_json_name = p.tokenizer_json,
          .config_json = optional_file(p.config_json),
          .config_json_name = p.config_json,
          .special_map_json = optional_file(p.special_map_json),
          .special_map_json_name = p.special_map_json};
}

Tokenizer Tokenizer::load(const std::string& path) { return from_files(read_tokenizer_files(path)); }

Tokenizer Tokenizer::from_json(std::string tokenizer_json, std::string config_json, std::string special_map_json) {
  return from_files({.tokenizer_json = std::move(tokenizer_json),
                     .config_json = std::move(config_json),
                     .special_map_json = std::move(special_map_json)});
}

Tokenizer Tokenizer::from_files(TokenizerFiles files) {
  auto impl = std::make_unique<TokenizerImpl>();
  JsonDoc doc = JsonDoc::parse(std::move(files.tokenizer_json), files.tokenizer_json_name);
  JsonRef root = doc.root();
  if (!root.is_object()) throw FormatError(str_cat(files.tokenizer_json_name, ": top level must be a JSON object"));
  JsonRef model = root["model"];
  if (!model.is_object()) throw FormatError(str_cat(files.tokenizer_json_name, ": missing model"));
  std::string_view type = model["type"].is_string() ? model["type"].str() : "BPE";
  if (type != "BPE") {
    throw NotImplemented(str_cat("unsupported model type '", type, "': only BPE tokenizers are supported"));
  }
  impl->normalizer = Normalizer::from_json(root["normalizer"]);
  impl->pre_tokenizer = PreTokenizer::from_json(root["pre_tokenizer"]);
  impl->model = Bpe::from_json(model, impl->pre_tokenizer.byte_level());
  impl->post_processor = PostProcessor::from_json(root["post_processor"]);
  impl->decoder = Decoder::from_json(root["decoder"]);
  const Normalizer& norm = impl->normalizer;
  impl->added.load(root["added_tokens"], [&](const std::string& content) {
    NormalizedString ns(content, 0);
    norm.normalize(ns);
    return ns.text();
  });
  // transformers lets special_tokens_map.json override the config.
  for (auto [text, name] : {std::pair{&files.config_json, &files.config_json_name},
                            std::pair{&files.special_map_json, &files.special_map_json_name}}) {
    if (text->empty()) continue;
    JsonDoc cfg = JsonDoc::parse(std::move(*text), *name);
    if (!cfg.root().is_object()) throw FormatError(str_cat(*name, ": must be a JSON object (of token settings)"));
    impl->read_config(cfg.root());
  }
  if (impl->specials.unk.empty() && model["unk_token"].is_string()) impl->specials.unk = model["unk_token"].str();
  SpecialTokens& sp = impl->specials;
  auto id_of = [&](const std::string& t) { return t.empty() ? std::nullopt : impl->token_to_id(t); };
  sp.bos_id = id_of(sp.bos);
  sp.eos_id = id_of(sp.eos);
  sp.pad_id = id_of(sp.pad);
  sp.unk_id = id_of(sp.unk);
  return Tokenizer(std::move(impl));
}

Encoding Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  Encoding enc;
  std::string repaired;
  if (utf8_valid_prefix(text) != text.size()) {
    repaired = utf8_repair(text);
    text = repaired;
  }
  enc.ids.reserve(text.size() / 3 + 4);
  enc.tokens.reserve(text.size() / 3 + 4);
  enc.offsets.reserve(text.size() / 3 + 4);
  impl_->encode_into(text, enc, true);
  impl_->post_processor.process(enc, add_special_tokens);
  return enc;
}

std::vector<uint32_t> Tokenizer::encode_ids(std::string_view text, bool add_special_tokens) const {
  Encoding enc;
  std::string repaired;
  if (utf8_valid_prefix(text) != text.size()) {
    repaired = utf8_repair(text);
    text = repaired;
  }
  enc.ids.reserve(text.size() / 3 + 4);
  impl_->encode_into(text, enc, false);
  if (add_special_tokens && impl_->post_processor.added_tokens_single() > 0) {
    // The template needs parallel token / offset arrays; give it placeholders.
    enc.tokens.resize(enc.ids.size());
    enc.offsets.resize(enc.ids.size());
    impl_->post_processor.process(enc, true);
  }
  return std::move(enc.ids);
}

std::string Tokenizer::decode(std::span<const uint32_t> ids, bool skip_special_tokens) const {
  std::vector<std::string> tokens;
  tokens.reserve(ids.size());
  for (uint32_t id : ids) {
    bool found = false;
    std::string_view t = impl_->token_of(id, &found);
    if (!found) continue;  // unknown ids are skipped, as in the Rust library
    if (skip_special_tokens && impl_->added.is_special_id(id)) continue;
    tokens.emplace_back(t);
  }
  return impl_->decoder.decode(std::move(tokens));
}

std::optional<uint32_t> Tokenizer::token_to_id(std::string_view token) const { return impl_->token_to_id(token); }

std::optional<std::string> Tokenizer::id_to_token(uint32_t id) const {
  bool found = false;
  std::string_view t = impl_->token_of(id, &found);
  if (!found) return std::nullopt;
  return std::string(t);
}

bool Tokenizer::is_special(uint32_t id) const { return impl_->added.is_special_id(id); }

uint32_t Tokenizer::vocab_size() const {
  uint32_t n = impl_->model.vocab().max_id_plus_one();
  for (const auto& t : impl_->added.tokens()) n = std::max(n, t.id + 1);
  return n;
}

const SpecialTokens& Tokenizer::special_tokens() const { return impl_->specials; }
const std::string& Tokenizer::chat_template() const { return impl_->chat_template; }

StreamDecoder::StreamDecoder(const Tokenizer& tok, bool skip_special_tokens)
    : tok_(&tok), skip_special_(skip_special_tokens) {}

std::string StreamDecoder::push(uint32_t id) {
  static constexpr std::string_view kReplacement = "\xEF\xBF\xBD";
  auto ends_incomplete = [](const std::string& s) {
    return s.size() >= 3 && std::string_view(s).substr(s.size() - 3) == kReplacement;
  };
  if (prefix_.empty() && !ids_.empty()) {
    std::string p = tok_->decode(ids_, skip_special_);
    if (!ends_incomplete(p)) {
      prefix_ = std::move(p);
      prefix_index_ = ids_.size();
    }
  }
  ids_.push_back(id);
  std::string s = tok_->decode(ids_, skip_special_);
  if (s.size() <= prefix_.size() || ends_incomplete(s)) return "";
  if (s.compare(0, prefix_.size(), prefix_) != 0) {
    throw Error(str_cat("StreamDecoder: decoding token ", id, " rewrote earlier text '", prefix_, "' into '", s, "'"));
  }
  std::string fresh = s.substr(prefix_.size());
  size_t new_prefix_index = ids_.size() - prefix_index_;
  ids_.erase(ids_.begin(), ids_.begin() + long(prefix_index_));
  prefix_ = tok_->decode(ids_, skip_special_);
  prefix_index_ = new_prefix_index;
  text_ += fresh;
  return fresh;
}

}  // namespace lathe::tokenizer
