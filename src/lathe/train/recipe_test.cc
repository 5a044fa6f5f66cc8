#include "lathe/train/recipe.h"

#include <gtest/gtest.h>

#include <string>

#include "lathe/base/error.h"
#include "lathe/models/config.h"
#include "lathe/train/run_start.h"

namespace lathe::train {
namespace {

// The smallest recipe that validates; tests add or override one key.
const char* kMinimal =
    "model: {config: {model_type: llama}}\n"
    "data: {train: d/x, val: d/x, seq_len: 16, batch_size: 2}\n"
    "schedule: {steps: 10}\n";

std::string error_of(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    parse_recipe(yaml, overrides, "r.yaml");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(RecipeYaml, ScalarsAreTypedAsYamlCore) {
  const auto j = yaml_to_json("a: 1\nb: -2.5e3\nc: true\nd: ~\ne: '7'\nf: x y\ng: [1, \"2\"]\n", "t");
  EXPECT_EQ(j["a"], 1);
  EXPECT_EQ(j["b"], -2500.0);
  EXPECT_EQ(j["c"], true);
  EXPECT_TRUE(j["d"].is_null());
  EXPECT_EQ(j["e"], "7");
  EXPECT_EQ(j["f"], "x y");
  EXPECT_EQ(j["g"], nlohmann::json::parse(R"([1, "2"])"));
  EXPECT_EQ(yaml_to_json(json_to_yaml(j), "t"), j);  // what the run folder saves reads back the same
}

TEST(RecipeYaml, AliasesAreRefusedWhereTheyAppear) {
  // An anchor alone is harmless; an alias (the "billion laughs" expansion) is an error with its line.
  EXPECT_EQ(yaml_to_json("a: &x 1\nb: 2\n", "t")["a"], 1);
  try {
    yaml_to_json("a: &x [1, 2]\nb:\n  c: *x\n", "t.yaml");
    ADD_FAILURE() << "accepted an alias";
  } catch (const FormatError& e) {
    EXPECT_NE(std::string(e.what()).find("t.yaml: line 3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("aliases"), std::string::npos) << e.what();
  }
  EXPECT_THROW(yaml_to_json("base: &b {lr: 1}\nopt:\n  <<: *b\n", "t"), FormatError);  // merge keys use aliases
}

TEST(RecipeYaml, DuplicateKeysNameTheKeyAndBothLines) {
  try {
    yaml_to_json("data:\n  seq_len: 8\n  batch_size: 2\n  seq_len: 16\n", "t.yaml");
    ADD_FAILURE() << "accepted a duplicate key";
  } catch (const FormatError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("duplicate key 'seq_len'"), std::string::npos) << m;
    EXPECT_NE(m.find("line 4"), std::string::npos) << m;
    EXPECT_NE(m.find("first at line 2"), std::string::npos) << m;
  }
  EXPECT_THROW(yaml_to_json("{a: 1, a: 2}", "t"), FormatError);  // flow style too
  // The same name in two different mappings is not a duplicate.
  EXPECT_NO_THROW(yaml_to_json("x: {a: 1}\ny: {a: 2}\n", "t"));
}

// A key that the saved recipe.yaml could not hold (YAML caps plain keys at 1024 characters; found by
// recipe_fuzz) or that holds a control character is refused, in the YAML and in an override.
TEST(RecipeYaml, OverlongOrControlCharacterKeysAreRefused) {
  const std::string long_key(kMaxRecipeKeyBytes + 1, 'k');
  EXPECT_THROW(yaml_to_json("model:\n  config:\n    " + long_key + ": 1\n", "r.yaml"), Error);
  EXPECT_NO_THROW(yaml_to_json("model:\n  config:\n    " + long_key.substr(1) + ": 1\n", "r.yaml"));
  try {
    yaml_to_json("a: {\"b\\x1fc\": 1}\n", "r.yaml");
    ADD_FAILURE() << "a key with a control character was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("control character"), std::string::npos) << e.what();
  }
  EXPECT_TRUE(recipe_key_problem("optimizer").empty());
  EXPECT_NE(recipe_key_problem(long_key).find(std::to_string(kMaxRecipeKeyBytes)), std::string::npos);
}

TEST(RecipeYaml, MalformedTextIsAFormatErrorWithTheLine) {
  for (const std::string bad : {"a: 99999999999999999999\n", "a: 1e999\n", "a: 1\nb: \"\xff\"\n", "[a]: 1\n",
                                "a: 1\n---\nb: 2\n", "a: [1, 2\n", "a: \"\\ud800\"\n"}) {
    SCOPED_TRACE(bad);
    try {
      yaml_to_json(bad, "t.yaml");
      ADD_FAILURE() << "accepted";
    } catch (const FormatError& e) {
      EXPECT_NE(std::string(e.what()).find("t.yaml"), std::string::npos) << e.what();
    }
  }
}

TEST(RecipeValidate, EveryKeyIsCheckedWithItsNameAndValue) {
  ASSERT_EQ(error_of(kMinimal), "");
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"eval.batches=0", "r.yaml: eval.batches = 0: must be at least 1"},
      {"run.threads=-3", "r.yaml: run.threads = -3"},
      {"run.threads=5000000000", "r.yaml: run.threads = 5000000000: out of range"},
      {"checkpoint.keep=3000000000", "checkpoint.keep"},
      {"run.seed=-1", "run.seed = -1: out of range"},
      {"optimizer.lr=0", "optimizer.lr = 0"},
      {"optimizer.beta1=1.5", "optimizer.beta1"},
      {"schedule.warmup_steps=11", "schedule.warmup_steps = 11"},
      {"schedule.decay_style=sqrt", "schedule.decay_style = 'sqrt'"},
      {"run.precision=fp16", "run.precision = 'fp16'"},
      {"samples.max_tokens=-1", "samples.max_tokens"},
      {"data.seq_len=100000", ""},  // fine here: the context is checked against the model
      {"data.batch_size=1000000 data.seq_len=100000", "data.batch_size"},
      {"optimizer.lr=abc", "optimizer.lr"},
  };
  for (const auto& [override, want] : cases) {
    SCOPED_TRACE(override);
    std::vector<std::string> o;
    for (size_t s = 0, e; s < override.size(); s = e + 1) {
      e = override.find(' ', s);
      if (e == std::string::npos) e = override.size();
      o.push_back(override.substr(s, e - s));
    }
    const std::string got = error_of(kMinimal, o);
    if (want.empty()) EXPECT_EQ(got, "");
    else EXPECT_NE(got.find(want), std::string::npos) << got;
  }
  // Without validation data, eval.batches may be 0 (there is nothing to evaluate).
  EXPECT_EQ(error_of(kMinimal, {"data.val=null", "eval.batches=0"}), "");
}

TEST(RecipeValidate, MemoryBudgetIsASizeAndCheckAChoice) {
  TrainConfig c = parse_recipe(kMinimal, {}, "r.yaml");
  EXPECT_EQ(c.memory_budget, 0);  // MemAvailable at the start
  EXPECT_EQ(c.memory_check, "error");
  c = parse_recipe(std::string(kMinimal) + "memory: {budget: 20GiB, check: warn}\n", {}, "r.yaml");
  EXPECT_EQ(c.memory_budget, int64_t{20} << 30);
  EXPECT_EQ(c.memory_check, "warn");
  EXPECT_EQ(parse_recipe(kMinimal, {"memory.budget=500MB", "memory.check=off"}).memory_budget, 500'000'000);
  EXPECT_EQ(parse_recipe(kMinimal, {"memory.check=off"}).memory_check, "off");
  EXPECT_EQ(parse_recipe(kMinimal, {"memory.budget=1048576"}).memory_budget, 1048576);  // bytes
  for (const auto& [o, want] : std::vector<std::pair<std::string, std::string>>{
           {"memory.budget=lots", "r.yaml: memory.budget = 'lots'"},
           {"memory.budget=20XB", "unknown unit 'XB'"},
           {"memory.budget=0", "r.yaml: memory.budget = 0: expected a size"},
           {"memory.budget=-5", "r.yaml: memory.budget = -5"},
           {"memory.budget=1.5", "r.yaml: memory.budget = 1.5"},
           {"memory.check=maybe", "r.yaml: memory.check = 'maybe': must be error, warn or off"},
           {"memory.check=true", "r.yaml: memory.check = true: expected a string"},
           {"memory.budgte=1GB", "unknown key(s): memory.budgte"}}) {
    const std::string got = error_of(kMinimal, {o});
    EXPECT_NE(got.find(want), std::string::npos) << o << ": " << got;
  }
  // The memory keys do not change the trajectory: a resume with another budget is the same run.
  const std::string same = trajectory_hash(parse_recipe(kMinimal).resolved);
  EXPECT_EQ(trajectory_hash(parse_recipe(kMinimal, {"memory.budget=1GB", "memory.check=warn"}).resolved), same);
  EXPECT_NE(trajectory_hash(parse_recipe(kMinimal, {"optimizer.lr=0.5"}).resolved), same);
}

TEST(RecipeValidate, ContextLimitsComeFromTheModel) {
  TrainConfig c = parse_recipe(kMinimal, {"samples.prompts=[hi]", "samples.max_tokens=64"}, "r.yaml");
  ModelConfig m;
  m.max_positions = 64;
  try {
    validate_recipe_for_model(c, m);
    ADD_FAILURE() << "accepted samples.max_tokens = the whole context";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("r.yaml: samples.max_tokens = 64"), std::string::npos) << e.what();
  }
  c.sample_tokens = 63;
  EXPECT_NO_THROW(validate_recipe_for_model(c, m));
  c.seq_len = 65;
  EXPECT_THROW(validate_recipe_for_model(c, m), InvalidArgument);
  c.sample_prompts.clear();  // no samples: max_tokens is not used
  c.sample_tokens = 1000;
  c.seq_len = 64;
  EXPECT_NO_THROW(validate_recipe_for_model(c, m));
}

}  // namespace
}  // namespace lathe::train
