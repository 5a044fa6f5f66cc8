// lathe tokenize / detokenize: JSON lines in, JSON lines out, so scripts can pipe text through the exact
// tokenizer a model uses.
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "args.h"
#include "lathe/io/tokenizer/tokenizer.h"

namespace lathe::cli {
using nlohmann::json;

namespace {
std::string dump_line(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

json parse_line(const std::string& line, size_t line_no) {
  try {
    return json::parse(line);
  } catch (const json::exception& e) {
    throw InvalidArgument(str_cat("stdin line ", line_no, ": not valid JSON: ", e.what()));
  }
}
}  // namespace

int cmd_tokenize(int argc, char** argv) {
  Args a = Args::parse(argc, argv, 2, {"--help", "--special", "--offsets", "--tokens"});
  if (a.has("--help") || a.positional.size() != 1) {
    std::fputs(
        "usage: lathe tokenize TOKENIZER [--special] [--tokens] [--offsets] [--field text] < in.jsonl\n"
        "TOKENIZER is a model folder or a tokenizer.json. Reads one JSON object per line ({\"text\": ...}) and\n"
        "writes {\"ids\": [...]} per line (plus \"tokens\" / \"offsets\" in code points when asked).\n"
        "--special applies the post-processor (adds BOS/EOS as the tokenizer defines).\n",
        stderr);
    return a.has("--help") ? 0 : 2;
  }
  a.check_known({"--help", "--special", "--offsets", "--tokens", "--field"}, "tokenize");
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(a.positional[0]);
  const std::string field = a.str("--field", "text");
  const bool special = a.has("--special"), want_tokens = a.has("--tokens"), want_offsets = a.has("--offsets");
  std::string line;
  size_t line_no = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    if (line.empty()) continue;
    const json in = parse_line(line, line_no);
    LATHE_CHECK_ARG(in.is_object() && in.contains(field) && in[field].is_string(), "stdin line ", line_no,
                    ": expected an object with a string field \"", field, "\"");
    const std::string text = in[field].get<std::string>();
    json out = json::object();
    if (!want_tokens && !want_offsets) {
      out["ids"] = tok.encode_ids(text, special);
    } else {
      const tokenizer::Encoding enc = tok.encode(text, special);
      out["ids"] = enc.ids;
      if (want_tokens) out["tokens"] = enc.tokens;
      if (want_offsets) {
        json offs = json::array();
        for (const auto& [b, e] : enc.offsets) offs.push_back({b, e});
        out["offsets"] = offs;
      }
    }
    std::cout << dump_line(out) << '\n';
  }
  return 0;
}

int cmd_detokenize(int argc, char** argv) {
  Args a = Args::parse(argc, argv, 2, {"--help", "--skip-special"});
  if (a.has("--help") || a.positional.size() != 1) {
    std::fputs(
        "usage: lathe detokenize TOKENIZER [--skip-special] < in.jsonl\n"
        "Reads {\"ids\": [...]} per line (or a bare JSON array) and writes {\"text\": ...} per line.\n",
        stderr);
    return a.has("--help") ? 0 : 2;
  }
  a.check_known({"--help", "--skip-special"}, "detokenize");
  const tokenizer::Tokenizer tok = tokenizer::Tokenizer::load(a.positional[0]);
  std::string line;
  size_t line_no = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    if (line.empty()) continue;
    const json in = parse_line(line, line_no);
    const json& ids_json = in.is_array() ? in : (in.is_object() && in.contains("ids") ? in["ids"] : json());
    LATHE_CHECK_ARG(ids_json.is_array(), "stdin line ", line_no, ": expected {\"ids\": [...]} or an array of ids");
    std::vector<uint32_t> ids;
    for (const json& v : ids_json) {
      LATHE_CHECK_ARG(v.is_number_unsigned(), "stdin line ", line_no, ": token ids must be non-negative integers");
      const uint64_t id = v.get<uint64_t>();
      LATHE_CHECK_ARG(id < tok.vocab_size(), "stdin line ", line_no, ": token id ", id, " outside the vocabulary of ",
                      tok.vocab_size());
      ids.push_back(static_cast<uint32_t>(id));
    }
    std::cout << dump_line(json{{"text", tok.decode(ids, a.has("--skip-special"))}}) << '\n';
  }
  return 0;
}

}  // namespace lathe::cli
