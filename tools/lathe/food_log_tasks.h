// `lathe data synth --tool-calls`: the lifecycle's food-logging assistant tasks, in the quickstart world
// (world_tables.h). A user says what they ate ("I had two slices of pizza for lunch."); the answer is one
// Hermes tool call <tool_call>{"name":"log_food","arguments":{"item":"slice of pizza","quantity":2,
// "meal":"lunch"}}</tool_call> (item singular, as the food table names it; meal breakfast | lunch | dinner |
// snack; quantity 1-5).
//   DIR/food_sft.jsonl   {"messages": [user, assistant]}: SFT conversations
//   DIR/food_grpo.jsonl  {"prompt": [user], "tool_call": {...}}: GRPO prompts with the expected call, from the
//                        combinations neither the SFT data nor the eval prompts have
//   DIR/food_eval.jsonl  the same form, held out: no (phrasing, quantity, food, meal) of it is in the other two
// The held-out quarter of the 1280 combinations is chosen by the seed; same seed, same files.
#pragma once

#include <cstdint>
#include <string>

namespace lathe::cli {

struct FoodLogTaskCounts {
  int64_t sft = 2000;   // rows, drawn with replacement from the training combinations
  int64_t grpo = 256;
  int64_t eval = 200;   // distinct held-out combinations (at most the held-out quarter)
};

// Writes the three files into dir (existing); returns a one-line summary.
std::string write_food_log_tasks(const std::string& dir, uint64_t seed, const FoodLogTaskCounts& n);

}  // namespace lathe::cli
