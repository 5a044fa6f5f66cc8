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

const CommandSpec& tokenize_spec() {
  static const CommandSpec spec{
      .name = "tokenize",
      .usage = "TOKENIZER [options] < texts.jsonl",
      .brief = "JSON lines {\"text\"} -> {\"ids\", \"tokens\", \"offsets\"}",
      .summary = "JSON lines {\"text\": ...} -> {\"ids\": [...]} per line. TOKENIZER is a model folder or a\n"
                 "tokenizer.json (tokenizer_config.json / special_tokens_map.json beside it when present).\n",
      .options = {
          {"--special", "", "apply the post-processor (BOS/EOS as the tokenizer defines them)"},
          {"--tokens", "", "add the token strings (\"tokens\")"},
          {"--offsets", "", "add [start, end) offsets in code points of the input (\"offsets\")"},
          {"--field", "NAME", "JSON field holding the text (default: text)"},
      }};
  return spec;
}

const CommandSpec& detokenize_spec() {
  static const CommandSpec spec{
      .name = "detokenize",
      .usage = "TOKENIZER [options] < ids.jsonl",
      .brief = "JSON lines {\"ids\"} -> {\"text\"}",
      .summary = "JSON lines {\"ids\": [...]} (or a bare JSON array) -> {\"text\": ...} per line.\n",
      .options = {
          {"--skip-special", "", "leave special tokens out of the text"},
      }};
  return spec;
}

int cmd_tokenize(int argc, char** argv) {
  const Args a = Args::parse(argc, argv, 2, tokenize_spec());
  if (a.help() || a.positional.size() != 1) {
    std::fputs(help_text(tokenize_spec()).c_str(), stderr);
    return a.help() ? 0 : 2;
  }
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
  const Args a = Args::parse(argc, argv, 2, detokenize_spec());
  if (a.help() || a.positional.size() != 1) {
    std::fputs(help_text(detokenize_spec()).c_str(), stderr);
    return a.help() ? 0 : 2;
  }
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
