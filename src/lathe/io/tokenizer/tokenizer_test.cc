// Exactness against the Rust `tokenizers` library: every case of tests/fixtures/tokenizers/<name>/
// encode_cases.json (ids, tokens, offsets, ids_with_special, decoded) on the real tokenizer files,
// found under $LATHE_TOKENIZERS (default ~/.cache/lathe/tokenizers; tools/fetch_tokenizers.sh).
// Which tokenizers and cases run is read from the fixture folder, so another corpus in the same
// layout needs no code change. Skips when the tokenizer files are absent.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lathe/io/test_paths.h"
#include "lathe/io/tokenizer/json_reader.h"
#include "lathe/io/tokenizer/tokenizer.h"

namespace lathe::tokenizer {
namespace {

namespace fs = std::filesystem;

std::string tokenizers_dir() { return lathe::testing::tokenizers_root(); }

std::vector<std::string> fixture_names() {
  std::vector<std::string> names;
  fs::path root = fs::path(lathe::testing::fixtures_root()) / "tokenizers";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(root, ec)) {
    if (fs::exists(e.path() / "encode_cases.json")) names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) names.push_back("none");  // keeps the suite instantiated; the test then skips
  return names;
}

std::string show(const std::string& s) {
  std::string r;
  for (unsigned char c : s) {
    if (c == '\n') r += "\\n";
    else if (c < 0x20) r += "\\x" + std::to_string(c);
    else r.push_back(char(c));
  }
  return r;
}

class TokenizerFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerFixture, MatchesRustTokenizers) {
  const std::string name = GetParam();
  fs::path cases_path = fs::path(lathe::testing::fixtures_root()) / "tokenizers" / name / "encode_cases.json";
  if (!fs::exists(cases_path)) GTEST_SKIP() << "no fixture " << cases_path;
  fs::path tok_dir = fs::path(tokenizers_dir()) / name;
  if (!fs::exists(tok_dir / "tokenizer.json")) {
    GTEST_SKIP() << "tokenizer files for " << name << " not found in " << tok_dir
                 << " (run tools/fetch_tokenizers.sh or set LATHE_TOKENIZERS)";
  }
  Tokenizer tok = Tokenizer::load(tok_dir.string());
  JsonDoc doc = JsonDoc::parse_file(cases_path.string());
  int n = 0, bad_ids = 0, bad_tokens = 0, bad_offsets = 0, bad_special = 0, bad_decoded = 0, bad_stream = 0;
  doc.root()["cases"].for_each_element([&](JsonRef c) {
    ++n;
    std::string text(c["text"].str());
    std::vector<uint32_t> ids, ids_special;
    std::vector<std::string> tokens;
    std::vector<std::pair<uint32_t, uint32_t>> offsets;
    c["ids"].for_each_element([&](JsonRef v) { ids.push_back(uint32_t(v.integer())); });
    c["ids_with_special"].for_each_element([&](JsonRef v) { ids_special.push_back(uint32_t(v.integer())); });
    c["tokens"].for_each_element([&](JsonRef v) { tokens.emplace_back(v.str()); });
    c["offsets"].for_each_element([&](JsonRef v) {
      std::vector<uint32_t> p;
      v.for_each_element([&](JsonRef x) { p.push_back(uint32_t(x.integer())); });
      offsets.push_back({p.at(0), p.at(1)});
    });
    std::string decoded(c["decoded"].str());

    Encoding enc = tok.encode(text, false);
    if (enc.ids != ids) {
      ++bad_ids;
      ADD_FAILURE() << name << " ids differ for '" << show(text) << "'";
    }
    if (enc.tokens != tokens) {
      ++bad_tokens;
      ADD_FAILURE() << name << " tokens differ for '" << show(text) << "'";
    }
    if (enc.offsets != offsets) {
      ++bad_offsets;
      std::ostringstream os;
      for (size_t k = 0; k < enc.offsets.size(); ++k) {
        os << "(" << enc.offsets[k].first << "," << enc.offsets[k].second << ")";
        if (k < offsets.size()) os << "/(" << offsets[k].first << "," << offsets[k].second << ") ";
      }
      ADD_FAILURE() << name << " offsets differ for '" << show(text) << "': got/want " << os.str();
    }
    if (tok.encode(text, true).ids != ids_special || tok.encode_ids(text, true) != ids_special) {
      ++bad_special;
      ADD_FAILURE() << name << " ids_with_special differ for '" << show(text) << "'";
    }
    std::string dec = tok.decode(ids, false);
    if (dec != decoded) {
      ++bad_decoded;
      ADD_FAILURE() << name << " decoded differs for '" << show(text) << "': got '" << show(dec) << "'";
    }
    // Streaming decode emits the same text, one complete character sequence at a time.
    StreamDecoder sd(tok);
    std::string streamed;
    for (uint32_t id : ids) streamed += sd.push(id);
    if (streamed != decoded) {
      ++bad_stream;
      ADD_FAILURE() << name << " stream decode differs for '" << show(text) << "': got '" << show(streamed) << "'";
    }
  });
  std::printf("[%s] %d cases: ids %d, tokens %d, offsets %d, ids_with_special %d, decoded %d, stream %d mismatches\n",
              name.c_str(), n, bad_ids, bad_tokens, bad_offsets, bad_special, bad_decoded, bad_stream);
  EXPECT_GT(n, 0);
}

// Arbitrary bytes (invalid UTF-8 included) and arbitrary ids never crash; text round-trips.
TEST_P(TokenizerFixture, ArbitraryInputIsSafe) {
  const std::string name = GetParam();
  fs::path tok_dir = fs::path(tokenizers_dir()) / name;
  if (!fs::exists(tok_dir / "tokenizer.json")) GTEST_SKIP() << "tokenizer files for " << name << " not found";
  Tokenizer tok = Tokenizer::load(tok_dir.string());
  uint64_t state = 0x9E3779B97F4A7C15ull;
  auto next = [&]() {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return state;
  };
  for (int round = 0; round < 200; ++round) {
    std::string bytes(next() % 64, '\0');
    for (char& c : bytes) c = char(next() % 4 ? 0x20 + next() % 0x60 : next() % 256);
    Encoding e = tok.encode(bytes, true);
    ASSERT_EQ(e.ids.size(), e.offsets.size());
    std::string d = tok.decode(e.ids, true);
    std::vector<uint32_t> ids;
    for (int k = 0; k < 16; ++k) ids.push_back(uint32_t(next() % (tok.vocab_size() + 10)));
    StreamDecoder sd(tok);
    for (uint32_t id : ids) sd.push(id);
    (void)tok.decode(ids, false);
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, TokenizerFixture, ::testing::ValuesIn(fixture_names()),
                         [](const ::testing::TestParamInfo<std::string>& i) { return i.param; });

}  // namespace
}  // namespace lathe::tokenizer
