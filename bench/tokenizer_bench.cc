// Tokenizer load time and single-thread encode throughput on a ~10 MB mixed text (code, licence prose and
// the multilingual fixture corpus), for each tokenizer under $LATHE_TOKENIZERS; prints one JSON line per
// tokenizer. The target is >= 3x Hugging Face's Rust tokenizers (~2-3 MB/s on one thread here) and a load
// in at most half its time (Gemma 3: ~870 ms).
// Usage: tokenizer_bench [TOKENIZERS_DIR] [TEXT_FILE]   (TEXT_FILE: use it instead of the generated mix)
#include <algorithm>
#include <cstdint>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "lathe/io/tokenizer/json_reader.h"
#include "lathe/io/tokenizer/tokenizer.h"

namespace {

namespace fs = std::filesystem;
// Thread CPU time: the build machine is shared, and wall time there mostly measures the neighbours.
struct Clock {
  using time_point = double;
  static double now() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
  }
};

std::string read_file(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

double seconds_since(double t0) { return Clock::now() - t0; }

// ~10 MB: every 16th block is the fixture corpus, the rest licence texts and C headers, round robin.
std::string make_mixed_text(size_t target) {
  std::vector<std::string> sources;
  std::string corpus;
#ifdef LATHE_SOURCE_DIR
  fs::path corpus_path = fs::path(LATHE_SOURCE_DIR) / "tests/fixtures/tokenizers/corpus.json";
#else
  fs::path corpus_path = "tests/fixtures/tokenizers/corpus.json";
#endif
  if (fs::exists(corpus_path)) {
    auto doc = lathe::tokenizer::JsonDoc::parse_file(corpus_path.string());
    doc.root().for_each_element([&](lathe::tokenizer::JsonRef s) {
      corpus += s.str();
      corpus += "\n";
    });
  }
  std::error_code ec;
  for (const char* dir : {"/usr/share/common-licenses", "/usr/include"}) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (e.is_regular_file()) files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (const auto& f : files) sources.push_back(read_file(f));
  }
  std::string text;
  size_t k = 0;
  while (text.size() < target && !sources.empty()) {
    if (k % 16 == 0 && !corpus.empty()) text += corpus;
    text += sources[k % sources.size()];
    ++k;
  }
  return text.substr(0, std::min(text.size(), target));
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir = argc > 1 ? argv[1] : "";
  if (dir.empty()) {
    const char* env = std::getenv("LATHE_TOKENIZERS");
    const char* home = std::getenv("HOME");
    dir = env ? env : std::string(home ? home : ".") + "/.cache/lathe/tokenizers";
  }
  std::string text = argc > 2 ? read_file(argv[2]) : make_mixed_text(10u << 20);
  // Cut at a character boundary so the bench measures the normal path, not UTF-8 repair.
  while (!text.empty() && (static_cast<unsigned char>(text.back()) & 0xC0) == 0x80) text.pop_back();
  if (!text.empty() && static_cast<unsigned char>(text.back()) >= 0xC0) text.pop_back();
  // Paragraph-sized pieces, as a server or data pipeline would send them.
  std::vector<std::string_view> paragraphs;
  for (size_t s = 0; s < text.size();) {
    size_t e = text.find("\n\n", s);
    e = e == std::string::npos ? text.size() : e + 2;
    paragraphs.push_back(std::string_view(text).substr(s, e - s));
    s = e;
  }
  double mb = double(text.size()) / 1e6;
  for (const char* name : {"qwen3", "llama3", "gemma3", "llama2"}) {
    fs::path p = fs::path(dir) / name / "tokenizer.json";
    if (!fs::exists(p)) {
      std::printf("{\"tokenizer\": \"%s\", \"skipped\": \"no %s\"}\n", name, p.c_str());
      continue;
    }
    double load_s = 1e9;
    for (int r = 0; r < 3; ++r) {
      auto t0 = Clock::now();
      auto tok = lathe::tokenizer::Tokenizer::load((fs::path(dir) / name).string());
      load_s = std::min(load_s, seconds_since(t0));
    }
    auto tok = lathe::tokenizer::Tokenizer::load((fs::path(dir) / name).string());
    auto t0 = Clock::now();
    auto enc = tok.encode(text, false);
    double whole_s = seconds_since(t0);
    t0 = Clock::now();
    size_t n_par_tokens = 0;
    for (auto p : paragraphs) n_par_tokens += tok.encode(p, false).ids.size();
    double par_s = seconds_since(t0);
    t0 = Clock::now();
    size_t n_ids = 0;
    // ids_hash: FNV-1a over the ids plus a multiplicative lane, as bench/tokenizers_node/bench.js computes
    // it, so bench/tokenizer_compare.sh can check both produce identical ids.
    uint32_t h1 = 0x811c9dc5u, h2 = 0;
    for (auto p : paragraphs) {
      for (uint32_t id : tok.encode_ids(p, false)) {
        h1 = (h1 ^ id) * 0x01000193u;
        h2 = h2 * 31u + id;
        ++n_ids;
      }
    }
    double ids_s = seconds_since(t0);
    std::printf(
        "{\"tokenizer\": \"%s\", \"text_mb\": %.2f, \"load_ms\": %.1f, \"tokens\": %zu, "
        "\"encode_whole_mb_s\": %.2f, \"encode_paragraphs_mb_s\": %.2f, \"encode_ids_paragraphs_mb_s\": %.2f, "
        "\"paragraphs\": %zu, \"paragraph_tokens\": %zu, \"ids_tokens\": %zu, \"ids_hash\": \"%08x%08x\"}\n",
        name, mb, load_s * 1e3, enc.ids.size(), mb / whole_s, mb / par_s, mb / ids_s, paragraphs.size(), n_par_tokens,
        n_ids, unsigned(h1), unsigned(h2));
    std::fflush(stdout);
  }
  return 0;
}
