// The TRL dataset types (specs/posttrain.md §1), parsed and checked row by row from JSON Lines. A field
// is standard (a string) or conversational (a list of {"role", "content", ...} messages, rendered later
// with the model's chat template); one file holds one type, decided by its first row's columns:
//   messages | text                       language modelling            (SFT)
//   prompt + completion                   prompt-completion             (SFT: completion-only loss)
//   [prompt +] chosen + rejected          preference, prompt implicit   (DPO family)
//                                         when absent (the shared start of chosen and rejected)
//   prompt + completion + label (bool)    unpaired preference           (KTO)
//   prompt                                prompt-only                   (GRPO family)
// Every error names the file, the line and the column (the dataset's, e.g. 'completion').
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lathe/posttrain/jsonl.h"

namespace lathe::posttrain {

enum class DatasetKind : uint8_t {
  kLanguageModeling,
  kPromptCompletion,
  kPreference,
  kUnpairedPreference,
  kPromptOnly,
  kCount
};
const char* dataset_kind_name(DatasetKind k);

// One field: a string, or a conversation (an array of message objects, each with a string "role" and a
// string or null "content" (null: an assistant turn that only calls tools), other keys kept for the template).
struct Turns {
  bool conversational = false;
  std::string text;                                                 // standard
  nlohmann::ordered_json messages = nlohmann::ordered_json::array();  // conversational
  bool empty() const { return conversational ? messages.empty() : text.empty(); }
};

struct Example {
  std::string where;  // "<file>:<line>"
  Turns text;         // language modelling: `text` or `messages`
  Turns prompt;       // prompt-completion, preference, unpaired, prompt-only (empty for an implicit prompt
                      // that chosen and rejected do not share)
  Turns completion;   // prompt-completion, unpaired
  Turns chosen, rejected;  // preference (after extracting an implicit prompt)
  bool label = false;      // unpaired: true = desirable
  nlohmann::ordered_json tools;  // optional `tools` column: passed to the chat template (null: none)
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();  // other columns (reward functions)
};

struct Dataset {
  DatasetKind kind = DatasetKind::kLanguageModeling;
  bool conversational = false;
  std::vector<Example> examples;
};

// Parses rows (read_jsonl) into one dataset. FormatError "<file>:<line>: column 'X' ..." for a missing
// column, a wrong type, a conversation that is not a list of messages, a row of another type than the
// first, fields of one row mixing strings and conversations; InvalidArgument for no rows at all.
Dataset parse_dataset(const std::vector<JsonlRow>& rows);

// read_jsonl + parse_dataset.
Dataset load_dataset(const std::string& path);

// TRL's extract_prompt: the prompt shared by chosen and rejected (whole messages of a conversation; for
// strings the longest common prefix, cut back to a whole UTF-8 character and, when it ends just after a
// space, before that space), removed from both. Returns the prompt.
Turns extract_implicit_prompt(Turns& chosen, Turns& rejected);

}  // namespace lathe::posttrain
