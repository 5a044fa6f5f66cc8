#include "lathe/posttrain/dataset.h"

#include <set>

#include "lathe/base/error.h"
#include "lathe/io/file_read.h"

namespace lathe::posttrain {

using nlohmann::ordered_json;

const char* dataset_kind_name(DatasetKind k) {
  switch (k) {
    case DatasetKind::kLanguageModeling: return "language modelling (text or messages)";
    case DatasetKind::kPromptCompletion: return "prompt-completion (prompt, completion)";
    case DatasetKind::kPreference: return "preference (prompt, chosen, rejected)";
    case DatasetKind::kUnpairedPreference: return "unpaired preference (prompt, completion, label)";
    case DatasetKind::kPromptOnly: return "prompt-only (prompt)";
    case DatasetKind::kCount: break;
  }
  return "?";
}

namespace {

std::string shown(const ordered_json& v) { return json_for_message(nlohmann::json::parse(v.dump())); }

// The dataset type from a row's columns.
DatasetKind kind_of(const ordered_json& row) {
  const auto has = [&](const char* k) { return row.contains(k) && !row[k].is_null(); };
  if (has("chosen") || has("rejected")) return DatasetKind::kPreference;
  if (has("label")) return DatasetKind::kUnpairedPreference;
  if (has("completion")) return DatasetKind::kPromptCompletion;
  if (has("messages") || has("text")) return DatasetKind::kLanguageModeling;
  if (has("prompt")) return DatasetKind::kPromptOnly;
  return DatasetKind::kCount;
}

Turns turns(const JsonlRow& r, const char* column) {
  const ordered_json& row = r.value;
  if (!row.contains(column) || row[column].is_null())
    throw FormatError(str_cat(r.where(), ": column '", column, "' missing"));
  const ordered_json& v = row[column];
  Turns t;
  if (v.is_string()) {
    t.text = v.get<std::string>();
    return t;
  }
  if (!v.is_array())
    throw FormatError(str_cat(r.where(), ": column '", column, "' must be a string or a list of messages, got ", shown(v)));
  t.conversational = true;
  for (size_t i = 0; i < v.size(); ++i) {
    const ordered_json& m = v[i];
    const std::string at = str_cat(r.where(), ": column '", column, "' message ", i);
    if (!m.is_object()) throw FormatError(str_cat(at, " must be an object with role and content, got ", shown(m)));
    if (!m.contains("role") || !m["role"].is_string()) throw FormatError(str_cat(at, ": 'role' missing or not a string"));
    if (m.contains("content") && !m["content"].is_string() && !m["content"].is_null() && !m["content"].is_array())
      throw FormatError(str_cat(at, ": 'content' must be a string, a list of parts or null, got ", shown(m["content"])));
    if (!m.contains("content") && !m.contains("tool_calls"))
      throw FormatError(str_cat(at, ": 'content' missing (and no 'tool_calls')"));
  }
  t.messages = v;
  return t;
}

void check_same_style(const JsonlRow& r, const Turns& a, const char* ca, const Turns& b, const char* cb) {
  if (a.conversational != b.conversational)
    throw FormatError(str_cat(r.where(), ": column '", ca, "' is ", a.conversational ? "a conversation" : "a string",
                              " but '", cb, "' is ", b.conversational ? "a conversation" : "a string",
                              " (a row is all standard or all conversational)"));
}

// Lengths of a common prefix that TRL's extract_prompt keeps (see dataset.h).
size_t common_text_prefix(const std::string& a, const std::string& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  if (i < a.size() && i < b.size()) {
    while (i > 0 && (static_cast<unsigned char>(a[i]) & 0xC0) == 0x80) --i;  // not inside a character
    if (i > 0 && a[i - 1] == ' ') --i;
  }
  return i;
}

}  // namespace

Turns extract_implicit_prompt(Turns& chosen, Turns& rejected) {
  Turns prompt;
  prompt.conversational = chosen.conversational;
  if (chosen.conversational) {
    size_t i = 0;
    while (i < chosen.messages.size() && i < rejected.messages.size() && chosen.messages[i] == rejected.messages[i]) ++i;
    for (size_t j = 0; j < i; ++j) prompt.messages.push_back(chosen.messages[j]);
    chosen.messages.erase(chosen.messages.begin(), chosen.messages.begin() + static_cast<std::ptrdiff_t>(i));
    rejected.messages.erase(rejected.messages.begin(), rejected.messages.begin() + static_cast<std::ptrdiff_t>(i));
  } else {
    const size_t i = common_text_prefix(chosen.text, rejected.text);
    prompt.text = chosen.text.substr(0, i);
    chosen.text.erase(0, i);
    rejected.text.erase(0, i);
  }
  return prompt;
}

Dataset parse_dataset(const std::vector<JsonlRow>& rows) {
  LATHE_CHECK_ARG(!rows.empty(), "dataset: no rows");
  Dataset d;
  d.kind = kind_of(rows[0].value);
  if (d.kind == DatasetKind::kCount)
    throw FormatError(str_cat(rows[0].where(), ": no dataset columns: expected text, messages, prompt + completion, "
                              "chosen + rejected, or prompt + completion + label (specs/posttrain.md §1)"));
  const std::string first = rows[0].where();
  static const std::set<std::string> kColumns = {"text", "messages", "prompt", "completion", "chosen",
                                                 "rejected", "label", "tools"};
  for (const JsonlRow& r : rows) {
    const DatasetKind k = kind_of(r.value);
    Example e{.where = r.where()};
    switch (d.kind) {
      case DatasetKind::kLanguageModeling: {
        const bool msgs = r.value.contains("messages") && !r.value["messages"].is_null();
        if (k != d.kind)
          throw FormatError(str_cat(r.where(), ": column 'text' or 'messages' missing (the file is ",
                                    dataset_kind_name(d.kind), ", from ", first, ")"));
        e.text = turns(r, msgs ? "messages" : "text");
        if (msgs && !e.text.conversational)
          throw FormatError(str_cat(r.where(), ": column 'messages' must be a list of messages"));
        if (!msgs && e.text.conversational)
          throw FormatError(str_cat(r.where(), ": column 'text' must be a string (use 'messages' for a conversation)"));
        break;
      }
      case DatasetKind::kPromptCompletion:
      case DatasetKind::kUnpairedPreference:
        e.prompt = turns(r, "prompt");
        e.completion = turns(r, "completion");
        check_same_style(r, e.prompt, "prompt", e.completion, "completion");
        if (d.kind == DatasetKind::kUnpairedPreference) {
          if (!r.value.contains("label") || r.value["label"].is_null())
            throw FormatError(str_cat(r.where(), ": column 'label' missing (the file is ", dataset_kind_name(d.kind),
                                      ", from ", first, ")"));
          if (!r.value["label"].is_boolean())
            throw FormatError(str_cat(r.where(), ": column 'label' must be true or false, got ", shown(r.value["label"])));
          e.label = r.value["label"].get<bool>();
        } else if (k != d.kind) {
          throw FormatError(str_cat(r.where(), ": has columns of ", dataset_kind_name(k), " but the file is ",
                                    dataset_kind_name(d.kind), " (from ", first, ")"));
        }
        break;
      case DatasetKind::kPreference: {
        e.chosen = turns(r, "chosen");
        e.rejected = turns(r, "rejected");
        check_same_style(r, e.chosen, "chosen", e.rejected, "rejected");
        if (r.value.contains("prompt") && !r.value["prompt"].is_null()) {
          e.prompt = turns(r, "prompt");
          check_same_style(r, e.prompt, "prompt", e.chosen, "chosen");
        } else {
          e.prompt = extract_implicit_prompt(e.chosen, e.rejected);
        }
        if (e.chosen.empty() || e.rejected.empty())
          throw FormatError(str_cat(r.where(), ": column '", e.chosen.empty() ? "chosen" : "rejected",
                                    "' is empty once the prompt is taken off"));
        break;
      }
      case DatasetKind::kPromptOnly:
        if (k != d.kind)
          throw FormatError(str_cat(r.where(), ": has columns of ", dataset_kind_name(k), " but the file is ",
                                    dataset_kind_name(d.kind), " (from ", first, ")"));
        e.prompt = turns(r, "prompt");
        break;
      case DatasetKind::kCount: break;
    }
    if (r.value.contains("tools") && !r.value["tools"].is_null()) {
      if (!r.value["tools"].is_array())
        throw FormatError(str_cat(r.where(), ": column 'tools' must be a list of tool definitions"));
      e.tools = r.value["tools"];
    }
    for (auto it = r.value.begin(); it != r.value.end(); ++it)
      if (!kColumns.count(it.key())) e.extra[it.key()] = it.value();
    const bool conv = e.text.conversational || e.prompt.conversational || e.completion.conversational ||
                      e.chosen.conversational;
    if (&r == &rows[0]) d.conversational = conv;
    else if (conv != d.conversational)
      throw FormatError(str_cat(r.where(), ": is ", conv ? "conversational" : "standard (strings)", " but ", first,
                                " is ", d.conversational ? "conversational" : "standard (strings)"));
    d.examples.push_back(std::move(e));
  }
  return d;
}

Dataset load_dataset(const std::string& path) { return parse_dataset(read_jsonl(path)); }

}  // namespace lathe::posttrain
