#include "lathe/posttrain/jsonl.h"

#include <algorithm>
#include <filesystem>

#include "lathe/base/error.h"
#include "lathe/io/file_read.h"
#include "lathe/io/line_reader.h"

namespace lathe::posttrain {

namespace fs = std::filesystem;

namespace {

void read_one(const std::string& file, std::vector<JsonlRow>& out) {
  LineReader in = LineReader::open(file);
  std::string line;
  int64_t n = 0;
  while (in.next(line)) {
    ++n;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    JsonlRow row{.file = file, .line = n};
    try {
      row.value = nlohmann::ordered_json::parse(line);
    } catch (const nlohmann::json::parse_error& e) {
      // e.byte is the 1-based byte where parsing failed: the column on a one-line document.
      std::string why = e.what();
      if (const size_t colon = why.find(": "); colon != std::string::npos) why = why.substr(colon + 2);
      throw FormatError(str_cat(file, ":", n, ":", std::max<size_t>(e.byte, 1), ": not valid JSON: ", why));
    }
    if (!row.value.is_object())
      throw FormatError(str_cat(row.where(), ": a row must be a JSON object, got ", json_for_message(nlohmann::json::parse(row.value.dump()))));
    out.push_back(std::move(row));
  }
}

}  // namespace

std::vector<JsonlRow> read_jsonl(const std::string& path) {
  std::vector<JsonlRow> rows;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    std::vector<std::string> files;
    for (const auto& e : fs::directory_iterator(path))
      if (e.path().extension() == ".jsonl") files.push_back(e.path().string());
    std::sort(files.begin(), files.end());
    if (files.empty()) throw IoError(str_cat(path, ": a folder without .jsonl files"));
    for (const auto& f : files) read_one(f, rows);
  } else {
    read_one(path, rows);
  }
  return rows;
}

}  // namespace lathe::posttrain
