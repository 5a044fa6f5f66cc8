// libFuzzer target: the tokenizer must encode any byte string (including invalid UTF-8) with each of the
// four real tokenizers (qwen3, llama3, gemma3, llama2) without crashing, and its output must satisfy:
//   * every id is below vocab_size(); ids, tokens and offsets have the same length;
//   * offsets are code-point offsets into the repaired input (invalid UTF-8 -> U+FFFD per maximal invalid
//     subpart, computed here independently of lathe): start <= end <= length, and starts and ends are
//     non-decreasing over the tokens that come from the text (post-processor specials get (0, 0));
//   * encode_ids(x) == encode(x).ids;
//   * decode(encode(x)) == x for llama3 when x is valid UTF-8. llama3 is byte-level BPE with no
//     normalizer and no lstrip/rstrip added tokens, so it is lossless. qwen3 is byte-level too but has an
//     NFC normalizer (decode gives NFC(x), and NFC of the pieces between added tokens can differ from
//     NFC(x)), gemma3 / llama2 are SentencePiece style (spaces <-> U+2581, llama2 prepends U+2581 and
//     strips one leading space on decode): they are not checked for equality;
//   * StreamDecoder: the pushed ids' pieces are valid UTF-8 and concatenate to decode(ids); when
//     decode(ids) ends with U+FFFD the stream legitimately holds that tail back (HF DecodeStream treats a
//     trailing U+FFFD as an incomplete character), so there the concatenation must only be a prefix.
// Tokenizers are loaded once from $LATHE_TOKENIZERS or ~/.cache/lathe/tokenizers (tools/fetch_tokenizers.sh).
// Build: cmake --preset fuzz && cmake --build build/fuzz -j2
// Run:   build/fuzz/tokenizer_fuzz -max_total_time=600 -timeout=10 -rss_limit_mb=2048 CORPUS_DIR
//        (tests/fuzz/make_seeds.sh writes a seed corpus).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "lathe/base/error.h"
#include "lathe/io/tokenizer/tokenizer.h"
#include "lathe/io/tokenizer/unicode.h"

namespace {

using lathe::tokenizer::StreamDecoder;
using lathe::tokenizer::Tokenizer;

struct Named {
  const char* name;
  Tokenizer tok;
};

[[noreturn]] void fail(const char* tok, const std::string& what, std::string_view input) {
  std::fprintf(stderr, "tokenizer_fuzz: [%s] invariant violated: %s\n  input (%zu bytes):", tok, what.c_str(),
               input.size());
  for (unsigned char c : input.substr(0, 256)) std::fprintf(stderr, " %02x", c);
  std::fprintf(stderr, "\n");
  std::abort();
}

std::vector<Named>& tokenizers() {
  static std::vector<Named>* all = [] {
    namespace fs = std::filesystem;
    std::string dir;
    if (const char* env = std::getenv("LATHE_TOKENIZERS")) {
      dir = env;
    } else {
      const char* home = std::getenv("HOME");
      dir = std::string(home ? home : ".") + "/.cache/lathe/tokenizers";
    }
    auto* v = new std::vector<Named>;
    for (const char* name : {"qwen3", "llama3", "gemma3", "llama2"}) {
      fs::path p = fs::path(dir) / name / "tokenizer.json";
      if (!fs::exists(p)) {
        std::fprintf(stderr,
                     "tokenizer_fuzz: %s not found. Set LATHE_TOKENIZERS to a directory holding "
                     "{qwen3,llama3,gemma3,llama2}/tokenizer.json, or run tools/fetch_tokenizers.sh.\n",
                     p.c_str());
        std::abort();
      }
      try {
        v->push_back({name, Tokenizer::load((fs::path(dir) / name).string())});
      } catch (const lathe::Error& e) {
        std::fprintf(stderr, "tokenizer_fuzz: loading %s failed: %s\n", p.c_str(), e.what());
        std::abort();
      }
    }
    return v;
  }();
  return *all;
}

// Independent UTF-8 decoder (Unicode 3.9 well-formed table). Returns the length of the well-formed
// sequence at s[i], or 0 with `bad` set to the length of the maximal invalid subpart (>= 1).
size_t well_formed_at(std::string_view s, size_t i, size_t& bad) {
  auto b = [&](size_t k) -> int { return i + k < s.size() ? static_cast<unsigned char>(s[i + k]) : -1; };
  int c0 = b(0);
  bad = 1;
  if (c0 < 0x80) return 1;
  int lo = 0x80, hi = 0xBF, n;
  if (c0 >= 0xC2 && c0 <= 0xDF) {
    n = 2;
  } else if (c0 >= 0xE0 && c0 <= 0xEF) {
    n = 3;
    if (c0 == 0xE0) lo = 0xA0;
    if (c0 == 0xED) hi = 0x9F;
  } else if (c0 >= 0xF0 && c0 <= 0xF4) {
    n = 4;
    if (c0 == 0xF0) lo = 0x90;
    if (c0 == 0xF4) hi = 0x8F;
  } else {
    return 0;
  }
  for (int k = 1; k < n; ++k) {
    int c = b(k);
    int l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (c < l || c > h) {
      bad = size_t(k);
      return 0;
    }
  }
  return size_t(n);
}

// Rust String::from_utf8_lossy: the repaired text and its code-point count.
std::string lossy(std::string_view s, size_t& code_points, bool& valid) {
  std::string out;
  code_points = 0;
  valid = true;
  for (size_t i = 0; i < s.size();) {
    size_t bad;
    size_t n = well_formed_at(s, i, bad);
    if (n) {
      out.append(s.substr(i, n));
      i += n;
    } else {
      out += "\xEF\xBF\xBD";
      i += bad;
      valid = false;
    }
    ++code_points;
  }
  return out;
}

bool is_valid_utf8(std::string_view s) {
  size_t n;
  bool valid;
  lossy(s, n, valid);
  return valid;
}

void check(const Named& t, std::string_view input, const std::string& repaired, size_t n_cp, bool valid,
           bool add_special) {
  const Tokenizer& tok = t.tok;
  lathe::tokenizer::Encoding enc;
  try {
    enc = tok.encode(input, add_special);
  } catch (const lathe::Error& e) {
    fail(t.name, std::string("encode threw: ") + e.what(), input);
  }
  if (enc.tokens.size() != enc.ids.size() || enc.offsets.size() != enc.ids.size()) {
    fail(t.name, "ids / tokens / offsets lengths differ", input);
  }
  const uint32_t vocab = tok.vocab_size();
  uint32_t prev_start = 0, prev_end = 0;
  for (size_t i = 0; i < enc.ids.size(); ++i) {
    uint32_t id = enc.ids[i];
    if (id >= vocab) fail(t.name, "id " + std::to_string(id) + " >= vocab_size " + std::to_string(vocab), input);
    auto [s, e] = enc.offsets[i];
    if (s > e || e > n_cp) {
      fail(t.name,
           "offset (" + std::to_string(s) + ", " + std::to_string(e) + ") outside [0, " + std::to_string(n_cp) + "]",
           input);
    }
    // Tokens added by the post-processor's template carry (0, 0) and are exempt from the order check.
    if (add_special && s == 0 && e == 0 && tok.is_special(id)) continue;
    if (s < prev_start || e < prev_end) {
      fail(t.name,
           "offsets not monotone at token " + std::to_string(i) + ": (" + std::to_string(s) + ", " +
               std::to_string(e) + ") after (" + std::to_string(prev_start) + ", " + std::to_string(prev_end) + ")",
           input);
    }
    prev_start = s;
    prev_end = e;
  }
  if (tok.encode_ids(input, add_special) != enc.ids) fail(t.name, "encode_ids differs from encode().ids", input);
  if (add_special) return;  // the decode checks below need only the plain encoding

  for (bool skip : {false, true}) {
    std::string decoded = tok.decode(enc.ids, skip);
    if (!is_valid_utf8(decoded)) fail(t.name, "decode produced invalid UTF-8", input);
    if (!skip && valid && std::string_view(t.name) == "llama3" && decoded != input) {
      fail(t.name, "decode(encode(x)) != x (got '" + decoded + "')", input);
    }
    StreamDecoder sd(tok, skip);
    std::string streamed;
    for (uint32_t id : enc.ids) {
      std::string piece;
      try {
        piece = sd.push(id);
      } catch (const lathe::Error& e) {
        fail(t.name, std::string("StreamDecoder threw: ") + e.what(), input);
      }
      if (!is_valid_utf8(piece)) fail(t.name, "StreamDecoder piece is not valid UTF-8", input);
      streamed += piece;
    }
    if (streamed != sd.text()) fail(t.name, "StreamDecoder::text() != concatenated pieces", input);
    bool tail_held = decoded.size() >= 3 && decoded.compare(decoded.size() - 3, 3, "\xEF\xBF\xBD") == 0;
    bool ok = tail_held ? decoded.compare(0, streamed.size(), streamed) == 0 && streamed.size() <= decoded.size()
                        : streamed == decoded;
    if (!ok) {
      fail(t.name,
           std::string("StreamDecoder pieces '") + streamed + "' != decode(ids) '" + decoded + "'" +
               (skip ? " (skip_special_tokens)" : ""),
           input);
    }
  }
  (void)repaired;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  tokenizers();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Exact-size heap copy so ASan sees reads past the end.
  std::vector<char> bytes(data, data + size);
  std::string_view input(bytes.data(), bytes.size());
  size_t n_cp;
  bool valid;
  std::string repaired = lossy(input, n_cp, valid);
  // lathe's own repair must agree with the independent one.
  if (lathe::tokenizer::utf8_repair(input) != repaired) fail("utf8", "utf8_repair differs from from_utf8_lossy", input);
  for (const Named& t : tokenizers()) {
    check(t, input, repaired, n_cp, valid, false);
    check(t, input, repaired, n_cp, valid, true);
  }
  return 0;
}
