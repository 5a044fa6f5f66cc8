// The synthetic world's fact tables (`lathe data synth`): the foods with their calories, people, days, meals,
// number words and capitals. The pre-training corpus (world_corpus.cc) and the food-logging tool-call tasks
// (food_log_tasks.cc) draw from the same tables, so post-training teaches a world the model has read about.
#pragma once

#include <string>
#include <utility>

namespace lathe::cli::world {

struct Food {
  const char* name;    // singular, with its unit
  const char* plural;
  int calories;        // per unit: the world's one fact table
};
inline constexpr Food kFoods[] = {
    {"egg", "eggs", 78},          {"slice of toast", "slices of toast", 80}, {"banana", "bananas", 105},
    {"apple", "apples", 95},      {"cup of rice", "cups of rice", 205},     {"bowl of oatmeal", "bowls of oatmeal", 150},
    {"glass of milk", "glasses of milk", 120}, {"cup of coffee", "cups of coffee", 2}, {"orange", "oranges", 62},
    {"yogurt", "yogurts", 100},   {"slice of pizza", "slices of pizza", 285}, {"chicken breast", "chicken breasts", 165},
    {"carrot", "carrots", 25},    {"cookie", "cookies", 50},                {"bagel", "bagels", 245},
    {"cup of soup", "cups of soup", 90}};
inline constexpr const char* kPeople[] = {"Maya", "Leo", "Ana", "Tom", "Priya", "Sam", "Noor", "Ivan", "Chen", "Lucia", "Omar", "Kate"};
inline constexpr const char* kDays[] = {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"};
inline constexpr const char* kMeals[] = {"breakfast", "lunch", "dinner", "a snack"};
inline constexpr const char* kNumbers[] = {"zero", "one", "two", "three", "four", "five"};
inline constexpr std::pair<const char*, const char*> kCapitals[] = {
    {"France", "Paris"},       {"Germany", "Berlin"},    {"Italy", "Rome"},         {"Spain", "Madrid"},
    {"Portugal", "Lisbon"},    {"Japan", "Tokyo"},       {"China", "Beijing"},      {"India", "New Delhi"},
    {"Canada", "Ottawa"},      {"Mexico", "Mexico City"}, {"Brazil", "Brasilia"},   {"Argentina", "Buenos Aires"},
    {"Egypt", "Cairo"},        {"Kenya", "Nairobi"},     {"Nigeria", "Abuja"},      {"Australia", "Canberra"},
    {"Russia", "Moscow"},      {"Poland", "Warsaw"},     {"Sweden", "Stockholm"},   {"Norway", "Oslo"},
    {"Greece", "Athens"},      {"Turkey", "Ankara"},     {"Peru", "Lima"},          {"Chile", "Santiago"},
    {"Thailand", "Bangkok"},   {"Vietnam", "Hanoi"},     {"Ireland", "Dublin"},     {"Austria", "Vienna"}};

// "a banana", "an egg", "two slices of pizza": `count` (1-5) of a food as the world's sentences say it.
inline std::string food_amount(const Food& f, int count) {
  if (count != 1) return std::string(kNumbers[count]) + " " + f.plural;
  return (std::string("aeiou").find(f.name[0]) != std::string::npos ? "an " : "a ") + std::string(f.name);
}

}  // namespace lathe::cli::world
