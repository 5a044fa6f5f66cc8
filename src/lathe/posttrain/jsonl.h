// JSON Lines input of the post-training datasets (specs/posttrain.md §1): one JSON object per line, read
// whole (SFT / DPO datasets are small next to pre-training corpora), each row remembering where it came
// from so that every later error names the file and line.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lathe::posttrain {

struct JsonlRow {
  nlohmann::ordered_json value;  // an object, keys in file order (chat templates see them in that order)
  std::string file;
  int64_t line = 0;  // 1-based
  std::string where() const { return file + ":" + std::to_string(line); }
};

// The rows of `path`: a .jsonl file, or a folder whose *.jsonl files are read in name order. Blank lines are
// skipped. FormatError "<file>:<line>:<column>: not valid JSON: ..." (column: 1-based byte) for a line that
// does not parse, "<file>:<line>: a row must be a JSON object, got ..." for one that is not an object;
// IoError for a path that cannot be read or a folder without .jsonl files.
std::vector<JsonlRow> read_jsonl(const std::string& path);

}  // namespace lathe::posttrain
