// Issue 9, data and recipe rows, through the binary: `data prepare` never writes over an input and
// replaces its own stale outputs (rows 1, 8), pretrain reads the shards its manifest lists and resolves the
// manifest's paths from any folder (rows 8, 10), and bad recipes and inputs fail before training with a
// message naming the key, file or option (rows 5, 11, 17). Every bad input runs under a timeout: a clean
// error is a non-zero exit that is neither a hang nor a signal.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "cli_run.h"
#include "lathe/io/file_read.h"
#include "lathe/io/test_paths.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;
using testing::is_clean_error;
using testing::run_lathe_bounded;

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// `cd DIR && lathe ARGS` under a timeout (a hang exits 124, a crash 128 + the signal).
std::pair<int, std::string> run_in(const std::string& dir, const std::string& args, int timeout_s = 120) {
  return testing::run_shell("cd '" + dir + "' && timeout -k 5 " + std::to_string(timeout_s) + " " +
                            testing::lathe_bin() + " " + args);
}

std::string quickstart() { return std::string(LATHE_SOURCE_DIR) + "/recipes/quickstart.yaml"; }

// The quickstart recipe shrunk to a 2-step run of a 2-layer model ("tiny.yaml" of the issue).
std::string tiny(const std::string& data, const std::string& run_dir) {
  return quickstart() + " data.train=" + data + " data.val=" + data + " run.dir=" + run_dir +
         " run.threads=2 model.config.hidden_size=32 model.config.intermediate_size=64"
         " model.config.num_hidden_layers=2 model.config.num_attention_heads=4 model.config.num_key_value_heads=2"
         " model.config.head_dim=8 data.seq_len=32 data.batch_size=4 schedule.steps=2 schedule.warmup_steps=1"
         " eval.every=0 eval.batches=2 checkpoint.every=0 samples.max_tokens=4";
}

// The synthetic world corpus (jsonl + byte-level tokenizer) in DIR/w, made once per test.
std::string world(const std::string& dir, int documents = 300) {
  const auto r = testing::run_lathe("data synth --out " + dir + "/w --documents " + std::to_string(documents));
  EXPECT_EQ(r.first, 0) << r.second;
  return dir + "/w";
}

// --- row 1 and its class: an output never replaces, removes or overwrites an input ---------------------

TEST(DataRecipeHardening, PrepareRefusesToWriteTheManifestOverItsInput) {
  const std::string dir = testing::scratch_dir("harden_overwrite");
  const std::string w = world(dir);
  fs::copy_file(w + "/world.jsonl", dir + "/data.json");
  const std::string before = read_file(dir + "/data.json");
  // Row 1: the default --name is "data", so the manifest would be ./data.json, the input.
  const auto r = run_in(dir, "data prepare data.json --tokenizer w/tokenizer --out .");
  EXPECT_TRUE(is_clean_error(r, "data.json")) << r.second;
  EXPECT_NE(r.second.find("would overwrite the input"), std::string::npos) << r.second;
  EXPECT_EQ(read_file(dir + "/data.json"), before);
  // The same file reached through another spelling of the folder.
  const auto r2 = run_in(dir, "data prepare ./data.json --tokenizer w/tokenizer --out ../" +
                                  fs::path(dir).filename().string());
  EXPECT_TRUE(is_clean_error(r2, "data.json")) << r2.second;
  EXPECT_EQ(read_file(dir + "/data.json"), before);
  EXPECT_FALSE(fs::exists(dir + "/data_train_000000.bin"));  // failed before writing anything
}

TEST(DataRecipeHardening, PrepareRefusesEveryOtherOutputThatIsAnInput) {
  const std::string dir = testing::scratch_dir("harden_overwrite_class");
  const std::string w = world(dir);
  // A plain-text input named like one of the shards (it would be removed as a stale shard, then rewritten).
  write_bytes(dir + "/c_train_000000.bin", "one document\nanother one\n");
  auto r = run_in(dir, "data prepare c_train_000000.bin --tokenizer w/tokenizer --out . --name c");
  EXPECT_TRUE(is_clean_error(r, "c_train_000000.bin")) << r.second;
  EXPECT_EQ(read_file(dir + "/c_train_000000.bin"), "one document\nanother one\n");

  // The tokenizer is an input too: --out its folder with --name tokenizer would replace tokenizer.json.
  const std::string tok_before = read_file(w + "/tokenizer/tokenizer.json");
  r = run_in(dir, "data prepare w/world.jsonl --tokenizer w/tokenizer --out w/tokenizer --name tokenizer");
  EXPECT_TRUE(is_clean_error(r, "tokenizer.json")) << r.second;
  EXPECT_EQ(read_file(w + "/tokenizer/tokenizer.json"), tok_before);

  // An output name that is a link to the input.
  fs::create_directories(dir + "/out");
  fs::create_symlink(dir + "/w/world.jsonl", dir + "/out/data.json");
  const std::string corpus = read_file(w + "/world.jsonl");
  r = run_in(dir, "data prepare w/world.jsonl --tokenizer w/tokenizer --out out");
  EXPECT_TRUE(is_clean_error(r, "world.jsonl")) << r.second;
  EXPECT_EQ(read_file(w + "/world.jsonl"), corpus);
  EXPECT_TRUE(fs::is_symlink(dir + "/out/data.json"));
}

// Only prepare's own earlier outputs are replaced: a NAME.json that is not a data manifest (the default
// `--name data --out .` meets any ./data.json), or shards of that name with no manifest (llm.c's), are
// refused, naming the file, and left as they are.
TEST(DataRecipeHardening, PrepareRefusesToReplaceFilesItDidNotWrite) {
  const std::string dir = testing::scratch_dir("harden_foreign");
  world(dir);
  const std::string settings = "{\"theme\": \"dark\", \"train\": 3}\n";
  write_bytes(dir + "/data.json", settings);
  auto r = run_in(dir, "data prepare w/world.jsonl --tokenizer w/tokenizer --out .");
  EXPECT_TRUE(is_clean_error(r, "data.json")) << r.second;
  EXPECT_NE(r.second.find("--name"), std::string::npos) << r.second;
  EXPECT_EQ(read_file(dir + "/data.json"), settings);
  EXPECT_FALSE(fs::exists(dir + "/data_train_000000.bin"));  // refused before writing anything
  // Other members of the class: a JSON array, invalid JSON, a folder under the manifest's name.
  for (const std::string& other : {std::string("[1, 2]"), std::string("not json {")}) {
    SCOPED_TRACE(other);
    write_bytes(dir + "/data.json", other);
    r = run_in(dir, "data prepare w/world.jsonl --tokenizer w/tokenizer --out .");
    EXPECT_TRUE(is_clean_error(r, "data.json")) << r.second;
    EXPECT_EQ(read_file(dir + "/data.json"), other);
  }
  fs::create_directories(dir + "/f/x.json/inside");
  r = run_in(dir, "data prepare w/world.jsonl --tokenizer w/tokenizer --out f --name x");
  EXPECT_TRUE(is_clean_error(r, "x.json")) << r.second;
  EXPECT_TRUE(fs::is_directory(dir + "/f/x.json/inside"));

  // Shards under the name with no manifest beside them (made by another tool).
  fs::create_directories(dir + "/llm");
  write_bytes(dir + "/llm/x_train_000000.bin", "another tool's shard");
  r = run_in(dir, "data prepare w/world.jsonl --tokenizer w/tokenizer --out llm --name x");
  EXPECT_TRUE(is_clean_error(r, "x_train_000000.bin")) << r.second;
  EXPECT_EQ(read_file(dir + "/llm/x_train_000000.bin"), "another tool's shard");
  EXPECT_FALSE(fs::exists(dir + "/llm/x.json"));
  // Another name works beside them.
  r = run_in(dir, "data prepare w/world.jsonl --tokenizer w/tokenizer --out llm --name y");
  EXPECT_EQ(r.first, 0) << r.second;
  EXPECT_EQ(read_file(dir + "/llm/x_train_000000.bin"), "another tool's shard");
}

// --- row 17: --name is a file name; plain text must be UTF-8 -------------------------------------------

TEST(DataRecipeHardening, PrepareNameMustBeAPlainFileName) {
  const std::string dir = testing::scratch_dir("harden_name");
  world(dir);
  for (const std::string name : {"../x", "sub/x", "..", "''"}) {
    SCOPED_TRACE(name);
    const auto r = run_in(dir, "data prepare w/world.jsonl --tokenizer w/tokenizer --out out --name " + name);
    EXPECT_TRUE(is_clean_error(r, "--name")) << r.second;
  }
  EXPECT_FALSE(fs::exists(dir + "/x.json"));
  EXPECT_FALSE(fs::exists(dir + "/x_train_000000.bin"));
}

TEST(DataRecipeHardening, PrepareRejectsInvalidUtf8PlainText) {
  const std::string dir = testing::scratch_dir("harden_utf8");
  world(dir);
  const std::string good = "a fine line\n", before_bad = "then a bad ";
  write_bytes(dir + "/bad.txt", good + before_bad + "\xff byte\n");
  auto r = run_in(dir, "data prepare bad.txt --tokenizer w/tokenizer --out out");
  EXPECT_TRUE(is_clean_error(r, "bad.txt:2")) << r.second;
  EXPECT_NE(r.second.find("UTF-8"), std::string::npos) << r.second;
  EXPECT_NE(r.second.find("byte offset " + std::to_string(good.size() + before_bad.size())), std::string::npos)
      << r.second;
  EXPECT_FALSE(fs::exists(dir + "/out/data.json"));
  EXPECT_FALSE(fs::exists(dir + "/out/data_train_000000.bin"));  // the partial shards are removed
  // Another split mode, and a sequence cut short at the end of the file (no final newline).
  write_bytes(dir + "/cut.md", "para one\n\npara two ends in \xc3");
  r = run_in(dir, "data prepare cut.md --tokenizer w/tokenizer --out out --text-split paragraph");
  EXPECT_TRUE(is_clean_error(r, "cut.md:3")) << r.second;
}

// --- row 8: stale shards are removed; pretrain reads the manifest's list --------------------------------

TEST(DataRecipeHardening, PrepareReplacesStaleShardsAndPretrainReadsTheManifest) {
  const std::string dir = testing::scratch_dir("harden_stale");
  world(dir, 600);
  auto r = run_in(dir, "data prepare w/world.jsonl --tokenizer w/tokenizer --out d --name c --shard-tokens 5000");
  ASSERT_EQ(r.first, 0) << r.second;
  const auto count = [&](const std::string& tag) {
    int n = 0;
    for (const auto& e : fs::directory_iterator(dir + "/d"))
      if (e.path().filename().string().find(tag) != std::string::npos) ++n;
    return n;
  };
  ASSERT_GT(count("c_train_"), 3);
  // Other data under the same name: only the new shards stay.
  std::string head;
  {
    std::ifstream in(dir + "/w/world.jsonl");
    std::string line;
    for (int i = 0; i < 120 && std::getline(in, line); ++i) head += line + "\n";
  }
  write_bytes(dir + "/small.jsonl", head);
  r = run_in(dir, "data prepare small.jsonl --tokenizer w/tokenizer --out d --name c --val-fraction 0.1");
  ASSERT_EQ(r.first, 0) << r.second;
  const auto manifest = nlohmann::json::parse(std::ifstream(dir + "/d/c.json"));
  EXPECT_EQ(count("c_train_"), static_cast<int>(manifest["train"]["shards"].size()));
  EXPECT_EQ(count("c_val_"), static_cast<int>(manifest["val"]["shards"].size()));

  // A file that a glob would take (and fail on) is ignored: the manifest names the shards.
  write_bytes(dir + "/d/c_train_extra.bin", "not a shard");
  r = run_in(dir, "pretrain " + tiny("d/c", "runs/a") + " --no-samples");
  EXPECT_EQ(r.first == 0 || r.first == 3, true) << r.second;  // 3: target val loss missed, as expected
  EXPECT_EQ(r.second.find("c_train_extra"), std::string::npos) << r.second;
  fs::remove(dir + "/d/c_train_extra.bin");

  // A listed shard with another token count than recorded.
  const std::string shard0 = dir + "/d/" + manifest["train"]["shards"][0].get<std::string>();
  const std::string saved = read_file(shard0);
  fs::copy_file(dir + "/d/" + manifest["val"]["shards"][0].get<std::string>(), shard0,
                fs::copy_options::overwrite_existing);
  r = run_in(dir, "pretrain " + tiny("d/c", "runs/b") + " --no-samples");
  EXPECT_TRUE(is_clean_error(r, "c_train_000000.bin")) << r.second;
  EXPECT_NE(r.second.find("tokens"), std::string::npos) << r.second;
  // A listed shard that is missing.
  fs::remove(shard0);
  r = run_in(dir, "pretrain " + tiny("d/c", "runs/c") + " --no-samples");
  EXPECT_TRUE(is_clean_error(r, "c_train_000000.bin")) << r.second;
  EXPECT_NE(r.second.find("missing"), std::string::npos) << r.second;
  write_bytes(shard0, saved);

  // Shards with no manifest (made by llm.c's scripts): read by the glob, with a note saying so.
  fs::remove(dir + "/d/c.json");
  r = run_in(dir, "pretrain " + tiny("d/c", "runs/d") + " --no-samples");
  EXPECT_EQ(r.first == 0 || r.first == 3, true) << r.second;
  EXPECT_NE(r.second.find("no data manifest"), std::string::npos) << r.second;
}

// Every file of a folder, by name, with its bytes.
std::map<std::string, std::string> folder_bytes(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out[e.path().filename().string()] = read_file(e.path().string());
  return out;
}

// Whether DIR holds exactly `before` (folder_bytes); else the names that differ.
::testing::AssertionResult folder_is(const std::string& dir, const std::map<std::string, std::string>& before) {
  const auto now = folder_bytes(dir);
  std::string diff;
  for (const auto& [name, bytes] : before)
    if (!now.count(name) || now.at(name) != bytes) diff += " " + name + (now.count(name) ? " (changed)" : " (gone)");
  for (const auto& [name, bytes] : now)
    if (!before.count(name)) diff += " " + name + " (new)";
  if (diff.empty()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << dir << ":" << diff;
}

// A preparation replaces the earlier one under its name only once it has succeeded: one that fails part-way
// (after writing shards) leaves the earlier manifest and shards byte for byte, and usable.
TEST(DataRecipeHardening, AFailedPreparationLeavesTheEarlierOneIntact) {
  const std::string dir = testing::scratch_dir("harden_transaction");
  world(dir, 600);
  auto r = run_in(dir, "data prepare w/world.jsonl --tokenizer w/tokenizer --out d --name c --shard-tokens 5000");
  ASSERT_EQ(r.first, 0) << r.second;
  const auto before = folder_bytes(dir + "/d");
  ASSERT_GT(before.size(), 3u);

  // More than one block of documents (4096) before the bad byte: shards of the new run are written first.
  std::string text;
  for (int i = 0; i < 5000; ++i) text += "line " + std::to_string(i) + " of the new data\n";
  write_bytes(dir + "/bad.txt", text + "and a bad \xfe byte\n");
  r = run_in(dir, "data prepare bad.txt --tokenizer w/tokenizer --out d --name c --shard-tokens 1000");
  EXPECT_TRUE(is_clean_error(r, "bad.txt:5001")) << r.second;
  EXPECT_TRUE(folder_is(dir + "/d", before));  // no temporaries left, nothing of the earlier run changed
  // Another failure, after every input was read: no documents at all.
  write_bytes(dir + "/empty.txt", "\n\n");
  r = run_in(dir, "data prepare empty.txt --tokenizer w/tokenizer --out d --name c");
  EXPECT_TRUE(is_clean_error(r, "no documents")) << r.second;
  EXPECT_TRUE(folder_is(dir + "/d", before));

  // The earlier preparation still trains.
  r = run_in(dir, "pretrain " + tiny("d/c", "runs/a") + " --no-samples");
  EXPECT_EQ(r.first == 0 || r.first == 3, true) << r.second;
  EXPECT_EQ(r.second.find("no data manifest"), std::string::npos) << r.second;

  // A run that died left temporaries (of a process that no longer exists, pid above any pid_max): the next
  // successful preparation removes them with the earlier outputs.
  write_bytes(dir + "/d/.c_train_000000.bin.tmp.4194999", "half a shard");
  write_bytes(dir + "/d/c.json.tmp.4194999", "half a manifest");
  r = run_in(dir, "data prepare bad.txt --tokenizer w/tokenizer --out d --name c --shard-tokens 1000");
  ASSERT_NE(r.first, 0);
  EXPECT_TRUE(fs::exists(dir + "/d/.c_train_000000.bin.tmp.4194999"));  // a failed run removes only its own
  write_bytes(dir + "/good.txt", text);
  r = run_in(dir, "data prepare good.txt --tokenizer w/tokenizer --out d --name c --shard-tokens 1000");
  ASSERT_EQ(r.first, 0) << r.second;
  const auto manifest = nlohmann::json::parse(std::ifstream(dir + "/d/c.json"));
  const size_t listed = manifest["train"]["shards"].size() + manifest["val"]["shards"].size();
  EXPECT_EQ(folder_bytes(dir + "/d").size(), listed + 1) << "only the manifest and the shards it lists";
}

// A manifest value of the wrong type or range fails pretrain before training, naming the manifest and the
// key (not a raw JSON type error, nor a crash).
TEST(DataRecipeHardening, PretrainNamesTheBadManifestValue) {
  const std::string dir = testing::scratch_dir("harden_manifest_values");
  world(dir);
  auto r = run_in(dir, "data prepare w/world.jsonl --tokenizer w/tokenizer --out d --name c --val-fraction 0.05");
  ASSERT_EQ(r.first, 0) << r.second;
  const auto good = nlohmann::json::parse(std::ifstream(dir + "/d/c.json"));
  using ptr = nlohmann::json::json_pointer;
  const std::vector<std::tuple<ptr, nlohmann::json, std::string>> cases = {
      {ptr("/delimiter_id"), "x", "delimiter_id"},
      {ptr("/token_bytes"), 3, "token_bytes"},
      {ptr("/train/shard_tokens/0"), -5, "train.shard_tokens[0]"},
      {ptr("/val/tokens"), -1, "val.tokens"},
      {ptr("/vocab_size"), "259", "vocab_size"},
      {ptr("/format"), nlohmann::json::array(), "format"},
  };
  int n = 0;
  for (const auto& [where, value, key] : cases) {
    SCOPED_TRACE(where.to_string() + " = " + value.dump());
    auto bad = good;
    bad[where] = value;
    write_bytes(dir + "/d/c.json", bad.dump(2));
    const std::string run = "runs/r" + std::to_string(n++);
    r = run_in(dir, "pretrain " + tiny("d/c", run) + " data.document_masking=true");
    EXPECT_TRUE(is_clean_error(r, "c.json")) << r.second;
    EXPECT_NE(r.second.find("\"" + key + "\""), std::string::npos) << r.second;
    EXPECT_EQ(r.second.find("json.exception"), std::string::npos) << r.second;
    EXPECT_FALSE(fs::exists(dir + "/" + run + "/metrics.jsonl")) << "trained before failing";
  }
}

// --- row 10: manifest paths hold from any folder; a missing tokenizer fails at the start ----------------

TEST(DataRecipeHardening, PretrainFromAnotherFolderFindsTheRecordedTokenizer) {
  const std::string dir = testing::scratch_dir("harden_paths");
  world(dir, 600);
  auto r = run_in(dir, "data prepare w/world.jsonl --tokenizer w/tokenizer --out d --name world --val-fraction 0.05");
  ASSERT_EQ(r.first, 0) << r.second;
  // From the source folder, not the one prepare ran in: the samples at the end (the quickstart's prompts)
  // load the tokenizer.
  r = run_lathe_bounded("pretrain " + tiny(dir + "/d/world", dir + "/runs/a"),
                        120);
  EXPECT_EQ(r.first == 0 || r.first == 3, true) << r.second;
  EXPECT_NE(r.second.find("samples (greedy)"), std::string::npos) << r.second;

  // A manifest of the earlier format: the tokenizer recorded relative to where prepare ran. It still
  // works from there, and from elsewhere fails before training, naming the manifest and the tokenizer.
  auto m = nlohmann::json::parse(std::ifstream(dir + "/d/world.json"));
  m.erase("format");
  m["tokenizer"] = "w/tokenizer";
  write_bytes(dir + "/d/world.json", m.dump(2));
  r = run_in(dir, "pretrain " + tiny("d/world", "runs/b"));
  EXPECT_EQ(r.first == 0 || r.first == 3, true) << r.second;
  EXPECT_NE(r.second.find("samples (greedy)"), std::string::npos) << r.second;
  r = run_lathe_bounded("pretrain " + tiny(dir + "/d/world", dir + "/runs/c"),
                        120);
  EXPECT_TRUE(is_clean_error(r, "world.json")) << r.second;
  EXPECT_NE(r.second.find("w/tokenizer"), std::string::npos) << r.second;
  EXPECT_FALSE(fs::exists(dir + "/runs/c/metrics.jsonl")) << "trained before failing";
}

// --- rows 5, 11, 17: bad recipes fail before training, naming the key ----------------------------------

TEST(DataRecipeHardening, BillionLaughsRecipeFailsFast) {
  const std::string dir = testing::scratch_dir("harden_laughs");
  std::string yaml = "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i <= 10; ++i) {
    yaml += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [";
    for (int k = 0; k < 10; ++k) yaml += std::string(k ? ", " : "") + "*a" + std::to_string(i - 1);
    yaml += "]\n";
  }
  ASSERT_LT(yaml.size(), 1500u);
  write_bytes(dir + "/lol.yaml", yaml);
  const auto r = run_lathe_bounded("pretrain " + dir + "/lol.yaml", 30);
  EXPECT_TRUE(is_clean_error(r, "lol.yaml")) << r.second;
  EXPECT_NE(r.second.find("aliases"), std::string::npos) << r.second;
  // An alias in an override value too.
  const auto r2 = run_lathe_bounded("pretrain " + quickstart() + " 'optimizer.lr=*a'", 30);
  EXPECT_TRUE(is_clean_error(r2, "optimizer.lr")) << r2.second;
}

TEST(DataRecipeHardening, DuplicateRecipeKeysNameTheKeyAndLine) {
  const std::string dir = testing::scratch_dir("harden_dup");
  const std::string recipe = read_file(quickstart());
  // A repeated top-level section, and a repeated key inside one.
  write_bytes(dir + "/dup.yaml", recipe + "\noptimizer:\n  lr: 1.0\n");
  auto r = run_lathe_bounded("pretrain " + dir + "/dup.yaml", 30);
  EXPECT_TRUE(is_clean_error(r, "duplicate key 'optimizer'")) << r.second;
  EXPECT_NE(r.second.find("dup.yaml: line "), std::string::npos) << r.second;
  std::string inner = recipe;
  inner.replace(inner.find("  seq_len: 128\n"), 14, "  seq_len: 128\n  seq_len: 64\n");
  write_bytes(dir + "/dup2.yaml", inner);
  r = run_lathe_bounded("pretrain " + dir + "/dup2.yaml", 30);
  EXPECT_TRUE(is_clean_error(r, "duplicate key 'seq_len'")) << r.second;
}

TEST(DataRecipeHardening, EveryNumericRecipeKeyIsRangeChecked) {
  const std::string dir = testing::scratch_dir("harden_keys");
  // Row 11 (eval.batches=0 logged NaN and broke the run folder), then the rest of its class. The data
  // does not exist: every one of these must fail before the data is looked at.
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"eval.batches=0", "eval.batches"},
      {"eval.batches=-1", "eval.batches"},
      {"data.batch_size=0", "data.batch_size"},
      {"data.seq_len=-5", "data.seq_len"},
      {"data.grad_accum=0", "data.grad_accum"},
      {"data.batch_size=100000 data.seq_len=100000", "data.batch_size"},
      {"schedule.steps=0", "schedule.steps"},
      {"schedule.warmup_steps=500", "schedule.warmup_steps"},
      {"schedule.final_fraction=2", "schedule.final_fraction"},
      {"schedule.kind=cosin", "schedule.kind"},
      {"optimizer.lr=0", "optimizer.lr"},
      {"optimizer.lr=-1e-3", "optimizer.lr"},
      {"optimizer.lr=1e999", "optimizer.lr"},
      {"optimizer.beta2=1", "optimizer.beta2"},
      {"optimizer.eps=0", "optimizer.eps"},
      {"optimizer.weight_decay=-0.1", "optimizer.weight_decay"},
      {"checkpoint.every=-1", "checkpoint.every"},
      {"checkpoint.keep=0", "checkpoint.keep"},
      {"checkpoint.keep=99999999999", "checkpoint.keep"},
      {"run.threads=-3", "run.threads"},
      {"run.threads=99999999999", "run.threads"},
      {"run.seed=-1", "run.seed"},
      {"run.log_every=0", "run.log_every"},
      {"eval.every=-2", "eval.every"},
      {"eval.target_val_loss=-1", "eval.target_val_loss"},
      {"samples.max_tokens=0", "samples.max_tokens"},
      {"data.delimiter_id=-7", "data.delimiter_id"},
      {"run.allreduce_bucket_mb=0", "run.allreduce_bucket_mb"},
  };
  for (const auto& [override, key] : cases) {
    SCOPED_TRACE(override);
    const auto r = run_lathe_bounded("pretrain " + quickstart() + " data.train=" + dir + "/none data.val=" + dir +
                                         "/none run.dir=" + dir + "/run " + override + " --no-samples",
                                     30);
    EXPECT_TRUE(is_clean_error(r, key)) << r.second;
  }
  EXPECT_FALSE(fs::exists(dir + "/run/metrics.jsonl"));
}

TEST(DataRecipeHardening, SampleTokensAndSeqLenBeyondTheContextFailBeforeTraining) {
  const std::string dir = testing::scratch_dir("harden_context");
  world(dir);
  auto r = run_in(dir, "data prepare w/world.jsonl --tokenizer w/tokenizer --out d --name world --val-fraction 0.05");
  ASSERT_EQ(r.first, 0) << r.second;
  // tiny(): the quickstart's max_position_embeddings (512) is the context.
  r = run_in(dir, "pretrain " + tiny("d/world", "runs/a") + " samples.max_tokens=512");
  EXPECT_TRUE(is_clean_error(r, "samples.max_tokens")) << r.second;
  EXPECT_NE(r.second.find("512"), std::string::npos) << r.second;
  EXPECT_FALSE(fs::exists(dir + "/runs/a/metrics.jsonl")) << "trained before failing";
  r = run_in(dir, "pretrain " + tiny("d/world", "runs/b") + " data.seq_len=1024");
  EXPECT_TRUE(is_clean_error(r, "data.seq_len")) << r.second;
  EXPECT_FALSE(fs::exists(dir + "/runs/b/metrics.jsonl")) << "trained before failing";
}

}  // namespace
}  // namespace lathe
