// JSON Lines datasets: the five TRL types are recognised from their columns, and every bad row is an error
// naming the file, the line and (for JSON syntax) the column, or the dataset column at fault.
#include "lathe/posttrain/dataset.h"

#include <gtest/gtest.h>

#include <fstream>

#include "lathe/base/error.h"
#include "lathe/io/test_paths.h"

namespace lathe::posttrain {
namespace {

std::string write_jsonl(const std::string& name, const std::string& text) {
  const std::string path = testing::scratch_dir("dataset_test") + "/" + name;
  std::ofstream(path) << text;
  return path;
}

// The message of the error `fn` throws as E ("" when it throws nothing).
template <class E, class F>
std::string error_of(F fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

TEST(SftDataset, RecognisesEachTypeFromItsColumns) {
  struct Case {
    const char* row;
    DatasetKind kind;
    bool conversational;
  } cases[] = {
      {R"({"text": "a b"})", DatasetKind::kLanguageModeling, false},
      {R"({"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]})",
       DatasetKind::kLanguageModeling, true},
      {R"({"prompt": "a", "completion": "b"})", DatasetKind::kPromptCompletion, false},
      {R"({"prompt": [{"role": "user", "content": "a"}], "completion": [{"role": "assistant", "content": "b"}]})",
       DatasetKind::kPromptCompletion, true},
      {R"({"prompt": "a", "chosen": "b", "rejected": "c"})", DatasetKind::kPreference, false},
      {R"({"prompt": "a", "completion": "b", "label": false})", DatasetKind::kUnpairedPreference, false},
      {R"({"prompt": "a", "answer": 4})", DatasetKind::kPromptOnly, false},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.row);
    const Dataset d = load_dataset(write_jsonl("one.jsonl", std::string(c.row) + "\n"));
    EXPECT_EQ(d.kind, c.kind);
    EXPECT_EQ(d.conversational, c.conversational);
    ASSERT_EQ(d.examples.size(), 1u);
    EXPECT_TRUE(d.examples[0].where.ends_with("/one.jsonl:1")) << d.examples[0].where;
  }
  // Extra columns are kept (reward functions read them by name).
  const Dataset d = load_dataset(write_jsonl("x.jsonl", R"({"prompt": "a", "answer": 4})"));
  EXPECT_EQ(d.examples[0].extra["answer"], 4);
}

TEST(SftDataset, BadJsonNamesFileLineAndColumn) {
  const std::string path = write_jsonl("bad.jsonl", "{\"text\": \"ok\"}\n\n{\"text\": \"x\",, }\n");
  const std::string e = error_of<FormatError>([&] { load_dataset(path); });
  EXPECT_NE(e.find(path + ":3:14: not valid JSON"), std::string::npos) << e;  // line 3, the second comma
  const std::string e2 = error_of<FormatError>([&] { load_dataset(write_jsonl("arr.jsonl", "[1, 2]\n")); });
  EXPECT_NE(e2.find("arr.jsonl:1: a row must be a JSON object"), std::string::npos) << e2;
}

TEST(SftDataset, MissingOrMistypedColumnNamesLineAndColumn) {
  std::string e = error_of<FormatError>([&] {
    load_dataset(write_jsonl("pc.jsonl", "{\"prompt\": \"a\", \"completion\": \"b\"}\n{\"prompt\": \"c\"}\n"));
  });
  EXPECT_NE(e.find("pc.jsonl:2: column 'completion' missing"), std::string::npos) << e;
  e = error_of<FormatError>([&] {
    load_dataset(write_jsonl("lm.jsonl", "{\"text\": \"a\"}\n{\"txt\": \"b\"}\n"));
  });
  EXPECT_NE(e.find("lm.jsonl:2: column 'text' or 'messages' missing"), std::string::npos) << e;
  e = error_of<FormatError>([&] { load_dataset(write_jsonl("num.jsonl", "{\"prompt\": \"a\", \"completion\": 3}\n")); });
  EXPECT_NE(e.find("num.jsonl:1: column 'completion' must be a string or a list of messages"), std::string::npos) << e;
  e = error_of<FormatError>([&] {
    load_dataset(write_jsonl("role.jsonl", R"({"messages": [{"role": "user", "content": "a"}, {"content": "b"}]})"));
  });
  EXPECT_NE(e.find("role.jsonl:1: column 'messages' message 1: 'role' missing"), std::string::npos) << e;
  e = error_of<FormatError>([&] {
    load_dataset(write_jsonl("mix.jsonl", R"({"prompt": "a", "completion": [{"role": "assistant", "content": "b"}]})"));
  });
  EXPECT_NE(e.find("mix.jsonl:1: column 'prompt' is a string but 'completion' is a conversation"), std::string::npos) << e;
  e = error_of<FormatError>([&] {
    load_dataset(write_jsonl("kto.jsonl", "{\"prompt\": \"a\", \"completion\": \"b\", \"label\": \"yes\"}\n"));
  });
  EXPECT_NE(e.find("kto.jsonl:1: column 'label' must be true or false"), std::string::npos) << e;
}

TEST(SftDataset, ImplicitPromptIsTheSharedStartOfChosenAndRejected) {
  const Dataset d = load_dataset(write_jsonl("pref.jsonl",
                                             "{\"chosen\": \"The sky is blue.\", \"rejected\": \"The sky is green.\"}\n"));
  ASSERT_EQ(d.kind, DatasetKind::kPreference);
  const Example& e = d.examples[0];
  // TRL's extract_prompt: the common prefix, then one step back when it ends right after a space.
  EXPECT_EQ(e.prompt.text + e.chosen.text, "The sky is blue.");
  EXPECT_EQ(e.prompt.text + e.rejected.text, "The sky is green.");
  EXPECT_EQ(e.prompt.text, "The sky is");
  const Dataset c = load_dataset(write_jsonl(
      "prefc.jsonl",
      R"({"chosen": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "good"}], )"
      R"("rejected": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "bad"}]})"));
  ASSERT_EQ(c.examples[0].prompt.messages.size(), 1u);
  EXPECT_EQ(c.examples[0].prompt.messages[0]["content"], "q");
  EXPECT_EQ(c.examples[0].chosen.messages.size(), 1u);
  EXPECT_EQ(c.examples[0].rejected.messages[0]["content"], "bad");
}

}  // namespace
}  // namespace lathe::posttrain
