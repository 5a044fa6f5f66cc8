#include "food_log_tasks.h"

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <nlohmann/json.hpp>
#include <vector>

#include "lathe/base/error.h"
#include "lathe/base/rng.h"
#include "lathe/io/mapped_file.h"
#include "world_tables.h"

namespace lathe::cli {

namespace {

using nlohmann::ordered_json;
using namespace world;

constexpr const char* kPhrasings[] = {"I had {food} for {meal}.", "For {meal} I ate {food}.",
                                      "Log {food} for {meal}, please.", "Just finished {meal}: {food}."};
constexpr int kMaxQuantity = 5;
constexpr int kHeldOutOneIn = 4;  // a quarter of the combinations is held out for evaluation

// One (phrasing, quantity, food, meal) combination, numbered in [0, kCombinations).
constexpr int64_t kCombinations =
    static_cast<int64_t>(std::size(kPhrasings)) * kMaxQuantity * std::size(kFoods) * std::size(kMeals);

struct Task {
  std::string user;
  ordered_json call;
};

std::string replace(std::string s, const std::string& key, const std::string& value) {
  const size_t at = s.find(key);
  return at == std::string::npos ? s : s.replace(at, key.size(), value);
}

size_t food_of(int64_t combination) {
  return static_cast<size_t>(combination / std::ssize(kMeals) % std::ssize(kFoods));
}

Task task(int64_t combination) {
  int64_t c = combination;
  const size_t meal = static_cast<size_t>(c % std::ssize(kMeals));
  const Food& food = kFoods[food_of(combination)];
  c /= std::ssize(kMeals) * std::ssize(kFoods);
  const int quantity = 1 + static_cast<int>(c % kMaxQuantity);
  c /= kMaxQuantity;
  const char* phrasing = kPhrasings[c];
  const std::string meal_text = kMeals[meal];  // "a snack" in the text, "snack" in the call
  const std::string meal_key = meal_text.rfind("a ", 0) == 0 ? meal_text.substr(2) : meal_text;
  return {.user = replace(replace(phrasing, "{food}", food_amount(food, quantity)), "{meal}", meal_text),
          .call = {{"name", "log_food"},
                   {"arguments", {{"item", food.name}, {"quantity", quantity}, {"meal", meal_key}}}}};
}

std::string prompt_row(const Task& t) {
  return ordered_json{{"prompt", ordered_json::array({{{"role", "user"}, {"content", t.user}}})}, {"tool_call", t.call}}
             .dump() +
         "\n";
}

}  // namespace

std::string write_food_log_tasks(const std::string& dir, uint64_t seed, const FoodLogTaskCounts& n) {
  LATHE_CHECK_ARG(n.sft >= 1 && n.grpo >= 1 && n.eval >= 1, "--sft-examples, --grpo-prompts, --eval-prompts: >= 1");
  std::vector<int64_t> train, held_out;
  for (int64_t c = 0; c < kCombinations; ++c) {
    CounterRng r{derive_key(seed, 0x666f6f64ull + static_cast<uint64_t>(c)), 0};
    (r.next_below(kHeldOutOneIn) == 0 ? held_out : train).push_back(c);
  }
  CounterRng rng{derive_key(seed, 0x746f6f6c63616c6cull), 0};
  for (size_t i = held_out.size(); i > 1; --i) std::swap(held_out[i - 1], held_out[rng.next_below(i)]);  // Fisher-Yates
  LATHE_CHECK_ARG(n.eval <= std::ssize(held_out), "--eval-prompts ", n.eval, ": at most ", held_out.size(),
                  " held-out combinations with this seed");
  std::string sft, grpo, eval;
  std::vector<bool> shown(kCombinations, false);  // in the SFT data or the held-out eval prompts
  for (int64_t i = 0; i < n.sft; ++i) {
    const int64_t c = train[rng.next_below(train.size())];
    shown[static_cast<size_t>(c)] = true;
    const Task t = task(c);
    const std::string answer = "<tool_call>" + t.call.dump() + "</tool_call>";
    sft += ordered_json{{"messages", ordered_json::array({{{"role", "user"}, {"content", t.user}},
                                                          {{"role", "assistant"}, {"content", answer}}})}}
               .dump() +
           "\n";
  }
  for (int64_t i = 0; i < n.eval; ++i) {
    const int64_t c = held_out[static_cast<size_t>(i)];
    shown[static_cast<size_t>(c)] = true;
    eval += prompt_row(task(c));
  }
  // GRPO asks what SFT never showed: on a memorised prompt every completion of a group earns the same reward,
  // and a group without reward variance teaches nothing. The eval prompts stay out of it too.
  // Every food gets the same share of the GRPO prompts. What is left after the eval draw holds few of the
  // foods the eval set drew often, and GRPO moves the policy's choice of item towards the foods it
  // practises: with the leftovers as they fall (cookie 7 prompts, carrot 23) it learnt to answer "carrot" to
  // cookies.
  std::vector<std::vector<int64_t>> unseen(std::size(kFoods));  // by food_of()
  int64_t n_unseen = 0;
  for (int64_t c = 0; c < kCombinations; ++c)
    if (!shown[static_cast<size_t>(c)]) unseen[food_of(c)].push_back(c), ++n_unseen;
  std::vector<size_t> order(std::size(kFoods));
  for (int64_t i = 0; i < n.grpo; ++i) {
    const size_t slot = static_cast<size_t>(i % std::ssize(order));
    if (slot == 0) {  // a new round over the foods, in a new order
      for (size_t f = 0; f < order.size(); ++f) order[f] = f;
      for (size_t k = order.size(); k > 1; --k) std::swap(order[k - 1], order[rng.next_below(k)]);
    }
    const std::vector<int64_t>& pool = unseen[order[slot]];
    LATHE_CHECK_ARG(!pool.empty(), "--sft-examples ", n.sft, " and --eval-prompts ", n.eval,
                    " leave no combination of ", kFoods[order[slot]].name, " for the GRPO prompts: use fewer");
    grpo += prompt_row(task(pool[rng.next_below(pool.size())]));
  }
  const std::filesystem::path d(dir);
  write_file_atomic((d / "food_sft.jsonl").string(), sft);
  write_file_atomic((d / "food_grpo.jsonl").string(), grpo);
  write_file_atomic((d / "food_eval.jsonl").string(), eval);
  return str_cat((d / "food_{sft,grpo,eval}.jsonl").string(), ": ", n.sft, " SFT conversations, ", n.grpo,
                 " GRPO prompts (an equal share per food, from the ", n_unseen,
                 " combinations neither SFT nor eval has), ", n.eval,
                 " held-out prompts (", held_out.size(), " of ", kCombinations, " combinations held out)");
}

}  // namespace lathe::cli
