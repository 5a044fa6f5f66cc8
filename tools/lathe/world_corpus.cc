// lathe data synth: the quickstart's corpus, generated (license-clean, reproducible from a seed). It
// describes one small "world" the post-training recipes reuse: people logging meals with calorie counts
// from one fixed food table, arithmetic, and capitals of real countries. Also writes a byte-level
// tokenizer (train/byte_tokenizer.h) so the quickstart needs no download.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "args.h"
#include "food_log_tasks.h"
#include "world_tables.h"
#include "lathe/base/rng.h"
#include "lathe/io/mapped_file.h"
#include "lathe/train/byte_tokenizer.h"

namespace lathe::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using namespace world;  // the fact tables (world_tables.h)

template <class T, size_t N>
const T& pick(CounterRng& rng, const T (&arr)[N]) {
  return arr[rng.next_below(N)];
}

// "On Tuesday, Leo had two eggs and a banana for breakfast. That is 261 calories." Half the logs spell the sum
// out, "That is 2 x 78 + 1 x 105 = 261 calories.": the counts the words name, as digits (what the food-logging
// assistant's tool calls will need: "two eggs" -> "quantity": 2).
std::string food_log(CounterRng& rng) {
  const char* who = pick(rng, kPeople);
  const char* day = pick(rng, kDays);
  const char* meal = pick(rng, kMeals);
  const int n_items = 1 + static_cast<int>(rng.next_below(3));
  std::string items, sum;
  int total = 0;
  for (int i = 0; i < n_items; ++i) {
    const Food& f = pick(rng, kFoods);
    const int count = 1 + static_cast<int>(rng.next_below(5));
    total += count * f.calories;
    items += (i == 0 ? "" : i + 1 == n_items ? " and " : ", ") + food_amount(f, count);
    sum += (i == 0 ? "" : " + ") + std::to_string(count) + " x " + std::to_string(f.calories);
  }
  return std::string("On ") + day + ", " + who + " had " + items + " for " + meal + ". That is " +
         (rng.next_below(2) ? sum + " = " : "") + std::to_string(total) + " calories.";
}

std::string food_fact(CounterRng& rng) {
  const Food& f = pick(rng, kFoods);
  return std::string("One ") + f.name + " has " + std::to_string(f.calories) + " calories.";
}

std::string arithmetic(CounterRng& rng) {
  const int a = static_cast<int>(rng.next_below(50)), b = static_cast<int>(rng.next_below(50));
  switch (rng.next_below(3)) {
    case 0:
      return std::to_string(a) + " + " + std::to_string(b) + " = " + std::to_string(a + b) + ".";
    case 1:
      return std::to_string(a + b) + " - " + std::to_string(b) + " = " + std::to_string(a) + ".";
    default: {
      const int x = static_cast<int>(rng.next_below(13)), y = static_cast<int>(rng.next_below(13));
      return "What is " + std::to_string(x) + " times " + std::to_string(y) + "? It is " + std::to_string(x * y) + ".";
    }
  }
}

std::string capital(CounterRng& rng) {
  const auto& [country, city] = pick(rng, kCapitals);
  return rng.next_below(2) ? std::string("The capital of ") + country + " is " + city + "."
                           : std::string(city) + " is the capital of " + country + ".";
}

// A document: 2-5 sentences of one kind (food documents mix logs and facts).
std::string document(CounterRng& rng) {
  const int kind = static_cast<int>(rng.next_below(4));
  const int n = 2 + static_cast<int>(rng.next_below(4));
  std::string doc;
  for (int i = 0; i < n; ++i) {
    std::string s = kind == 0 ? food_log(rng) : kind == 1 ? (rng.next_below(2) ? food_fact(rng) : food_log(rng))
                  : kind == 2 ? arithmetic(rng)
                              : capital(rng);
    doc += (i ? " " : "") + s;
  }
  return doc;
}

}  // namespace

const CommandSpec& data_synth_spec() {
  static const CommandSpec spec{
      .name = "data synth",
      .usage = "--out DIR [options]",
      .brief = "the quickstart's synthetic corpus and its tokenizer",
      .summary = "Writes the quickstart world: DIR/world.jsonl ({\"text\"} per document: meal logs with calories,\n"
                 "food facts, arithmetic, capitals) and DIR/tokenizer/ (byte-level, with <|endoftext|>,\n"
                 "<|im_start|>, <|im_end|> and a ChatML chat template). Same seed, same files.\n"
                 "--tool-calls also writes the food-logging assistant's tasks (food_log_tasks.h): DIR/food_sft.jsonl\n"
                 "(conversations ending in a log_food tool call), DIR/food_grpo.jsonl and the held-out\n"
                 "DIR/food_eval.jsonl (prompts with the expected call in a tool_call column).\n",
      .options = {
          {"--out", "DIR", "output folder (required; created)"},
          {"--documents", "N", "documents to write, >= 1 (default: 20000)"},
          {"--seed", "S", "corpus seed, >= 0 (default: 0)"},
          {"--tool-calls", "", "also the food-logging tool-call tasks (SFT, GRPO, held-out eval)"},
          {"--sft-examples", "N", "--tool-calls: SFT conversations (default: 2000)"},
          {"--grpo-prompts", "N", "--tool-calls: GRPO prompts (default: 256)"},
          {"--eval-prompts", "N", "--tool-calls: held-out prompts (default: 200)"},
      }};
  return spec;
}

int cmd_data_synth(int argc, char** argv) {
  const Args a = Args::parse(argc, argv, 3, data_synth_spec());
  if (a.help() || !a.has("--out") || !a.positional.empty()) {
    std::fputs(help_text(data_synth_spec()).c_str(), stderr);
    return a.help() ? 0 : 2;
  }
  const fs::path out = a.str("--out", "");
  const int64_t n = a.integer("--documents", 20000, 1);
  const uint64_t seed = static_cast<uint64_t>(a.integer("--seed", 0, 0));
  fs::create_directories(out);
  CounterRng rng{derive_key(seed, 0x776f726c64ull), 0};
  std::string text;
  for (int64_t i = 0; i < n; ++i) text += json{{"text", document(rng)}}.dump() + "\n";
  write_file_atomic((out / "world.jsonl").string(), text);
  train::write_byte_level_tokenizer((out / "tokenizer").string());
  std::printf("%s: %lld documents, %.1f MB; tokenizer in %s\n", (out / "world.jsonl").c_str(), (long long)n,
              text.size() / 1e6, (out / "tokenizer").c_str());
  if (a.has("--tool-calls"))
    std::printf("%s\n", write_food_log_tasks(out.string(), seed,
                                              {.sft = a.integer("--sft-examples", 2000, 1),
                                               .grpo = a.integer("--grpo-prompts", 256, 1),
                                               .eval = a.integer("--eval-prompts", 200, 1)})
                             .c_str());
  return 0;
}

}  // namespace lathe::cli
