// A run folder can never be silently overwritten, mixed or corrupted (issue 9 rows 2, 11-14, 16): a used
// folder is refused without --resume / --overwrite, a second process on it is locked out, pruning deletes
// only the current run's checkpoints, damaged checkpoints are skipped on resume with the reason, failed
// metrics writes stop the run, and readers of metrics.jsonl survive bad lines. Tiny models, few steps.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cli_run.h"
#include "lathe/io/file_read.h"
#include "lathe/io/test_paths.h"
#include "lathe/train/test_metrics.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;
using testing::is_clean_error;

// The quickstart recipe shrunk to 2 layers (pretrain_test.cc's tiny model), `extra` appended.
std::string tiny(const std::string& data, const std::string& run_dir, const std::string& extra) {
  return "pretrain recipes/quickstart.yaml data.train=" + data + "/world data.val=" + data + "/world run.dir=" +
         run_dir +
         " run.threads=2 model.config.hidden_size=32 model.config.intermediate_size=64"
         " model.config.num_hidden_layers=2 model.config.num_attention_heads=4 model.config.num_key_value_heads=2"
         " model.config.head_dim=8 data.seq_len=32 data.batch_size=4 schedule.warmup_steps=2 eval.every=3"
         " eval.batches=2 eval.target_val_loss=0 --no-samples " +
         extra;
}

// The names in a run's checkpoints/ folder, sorted.
std::vector<std::string> checkpoint_names(const std::string& run_dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run_dir + "/checkpoints", ec)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

// Every file of a run folder with its bytes (the lock file aside), to show a run is untouched.
std::map<std::string, std::string> snapshot(const std::string& run_dir) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(run_dir))
    if (e.is_regular_file() && e.path().filename() != "lock")
      out[fs::relative(e.path(), run_dir).string()] = read_file(e.path().string());
  return out;
}

// The "checkpoint: PATH" line a finished pretrain prints.
std::string printed_checkpoint(const std::string& out) {
  const size_t at = out.find("\ncheckpoint: ");
  if (at == std::string::npos) return "";
  const size_t begin = at + 13;
  return out.substr(begin, out.find('\n', begin) - begin);
}

bool wait_for_losses(const std::string& run_dir, size_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (testing::loss_lines(run_dir).size() < n) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

class RunFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::scratch_dir("run_folder");
    ASSERT_EQ(testing::prepare_world_data(dir_, 300).first, 0);
    data_ = dir_ + "/data";
  }
  std::pair<int, std::string> pretrain(const std::string& run, const std::string& extra, int timeout_s = 120) {
    return testing::run_lathe_bounded(tiny(data_, run, extra), timeout_s);
  }
  std::string dir_, data_;
};

// Row 2: a second pretrain in a used folder without --resume is refused before touching it; --overwrite
// starts over, and the checkpoint it prints exists.
TEST_F(RunFolder, FreshStartInAUsedFolderIsRefusedAndOverwriteStartsOver) {
  const std::string run = dir_ + "/rr";
  auto r = pretrain(run, "schedule.steps=6 checkpoint.every=2 checkpoint.keep=2");
  ASSERT_EQ(r.first, 0) << r.second;
  const auto before = snapshot(run);
  ASSERT_EQ(checkpoint_names(run), (std::vector<std::string>{"step_00000004", "step_00000006"}));

  r = pretrain(run, "schedule.steps=2 checkpoint.every=1");
  EXPECT_TRUE(is_clean_error(r, "--resume")) << r.second;
  EXPECT_TRUE(is_clean_error(r, "--overwrite")) << r.second;
  EXPECT_TRUE(is_clean_error(r, "run folder " + run + " already holds a run")) << r.second;
  EXPECT_NE(r.second.find("checkpoints/step_00000006"), std::string::npos) << r.second;
  EXPECT_EQ(snapshot(run), before) << "the earlier run was touched";

  // Another member of the class: a run that died before its first checkpoint (metrics only).
  const std::string early = dir_ + "/early";
  fs::create_directories(early);
  std::ofstream(early + "/metrics.jsonl") << "{\"event\":\"start\"}\n{\"step\":1,\"loss\":5.0}\n";
  r = pretrain(early, "schedule.steps=2");
  EXPECT_TRUE(is_clean_error(r, "metrics.jsonl (2 lines)")) << r.second;
  EXPECT_EQ(read_file(early + "/metrics.jsonl"), "{\"event\":\"start\"}\n{\"step\":1,\"loss\":5.0}\n");

  // --resume and --overwrite together make no sense.
  r = pretrain(run, "--resume --overwrite");
  EXPECT_TRUE(is_clean_error(r, "--overwrite")) << r.second;

  // --overwrite: only the new run's checkpoints and metrics remain; the printed checkpoint exists.
  std::ofstream(run + "/notes.txt") << "mine";
  r = pretrain(run, "schedule.steps=2 checkpoint.every=1 checkpoint.keep=2 --overwrite");
  ASSERT_EQ(r.first, 0) << r.second;
  EXPECT_NE(r.second.find("removed the earlier run"), std::string::npos) << r.second;
  EXPECT_EQ(checkpoint_names(run), (std::vector<std::string>{"step_00000001", "step_00000002"}));
  EXPECT_EQ(testing::loss_lines(run).size(), 2u);
  const std::string printed = printed_checkpoint(r.second);
  EXPECT_EQ(printed, run + "/checkpoints/step_00000002") << r.second;
  EXPECT_TRUE(fs::exists(printed + "/DONE"));
  EXPECT_EQ(read_file(run + "/notes.txt"), "mine") << "--overwrite removed a file lathe did not write";

  // --overwrite deletes no folder of the user's: a foreign entry in checkpoints/ stops it, intact.
  fs::create_directories(run + "/checkpoints/my_backup");
  std::ofstream(run + "/checkpoints/my_backup/weights.bin") << "precious";
  r = pretrain(run, "schedule.steps=2 --overwrite");
  EXPECT_TRUE(is_clean_error(r, "my_backup")) << r.second;
  EXPECT_EQ(read_file(run + "/checkpoints/my_backup/weights.bin"), "precious");
  EXPECT_TRUE(fs::exists(run + "/checkpoints/step_00000002/DONE"));
}

// Row 2, pruning: only the current run's checkpoints are deleted. A checkpoint of another run (another
// run id) in the folder survives the pruning of this run's older ones, as does one of an older lathe.
TEST_F(RunFolder, PruningDeletesOnlyTheCurrentRunsCheckpoints) {
  const std::string other = dir_ + "/other", run = dir_ + "/run";
  ASSERT_EQ(pretrain(other, "schedule.steps=2 checkpoint.every=1").first, 0);
  auto r = pretrain(run, "schedule.steps=4 checkpoint.every=2 checkpoint.keep=2");
  ASSERT_EQ(r.first, 0) << r.second;
  fs::copy(other + "/checkpoints/step_00000001", run + "/checkpoints/step_00000001", fs::copy_options::recursive);
  // An older lathe's checkpoint (no run id, no checksums) at step 3.
  fs::copy(run + "/checkpoints/step_00000002", run + "/checkpoints/step_00000003", fs::copy_options::recursive);
  {
    nlohmann::json st = nlohmann::json::parse(read_file(run + "/checkpoints/step_00000003/state.json"));
    st["step"] = 3;
    st.erase("run_id");
    st.erase("files");
    std::ofstream(run + "/checkpoints/step_00000003/state.json") << st.dump(2);
    std::ofstream(run + "/checkpoints/step_00000003/DONE");  // empty, as older lathe wrote it
  }
  r = pretrain(run, "schedule.steps=10 checkpoint.every=2 checkpoint.keep=2 --resume");
  ASSERT_EQ(r.first, 0) << r.second;
  EXPECT_NE(r.second.find("resumed from " + run + "/checkpoints/step_00000004"), std::string::npos) << r.second;
  EXPECT_EQ(checkpoint_names(run),
            (std::vector<std::string>{"step_00000001", "step_00000003", "step_00000008", "step_00000010"}));
  EXPECT_TRUE(fs::exists(printed_checkpoint(r.second) + "/DONE")) << r.second;
  // The older lathe's checkpoint still verifies (sizes and headers; no checksums to compare).
  r = testing::run_lathe_bounded("checkpoint verify " + run + "/checkpoints/step_00000003");
  EXPECT_EQ(r.first, 0) << r.second;
}

// Row 13: while a run trains, a second process on the same folder (fresh, --resume or --overwrite) fails
// at once naming the folder and the holder's pid, and the first run's metrics are not truncated.
TEST_F(RunFolder, ASecondProcessOnTheSameFolderIsLockedOut) {
  const std::string run = dir_ + "/locked";
  const pid_t first = testing::spawn_lathe_logged(tiny(data_, run, "schedule.steps=100000 checkpoint.every=0"), dir_ + "/first.log");
  ASSERT_GT(first, 0);
  ASSERT_TRUE(wait_for_losses(run, 3)) << read_file(dir_ + "/first.log");
  for (const char* how : {"", "--resume", "--overwrite"}) {
    const size_t lines_before = testing::loss_lines(run).size();
    const auto t0 = std::chrono::steady_clock::now();
    const auto r = pretrain(run, std::string("schedule.steps=4 ") + how, 60);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 30.0) << how;
    EXPECT_TRUE(is_clean_error(r, "run folder " + run + " is in use")) << how << ": " << r.second;
    EXPECT_TRUE(is_clean_error(r, "pid " + std::to_string(first))) << how << ": " << r.second;
    EXPECT_GE(testing::loss_lines(run).size(), lines_before) << how << ": the first run's metrics were truncated";
    EXPECT_FALSE(fs::exists(run + "/checkpoints")) << how;
  }
  // SIGTERM: the first run checkpoints and exits; the folder is free again and --resume continues it.
  ASSERT_EQ(::kill(first, SIGTERM), 0);
  EXPECT_EQ(testing::wait_exit(first, std::chrono::seconds(60)), 130) << read_file(dir_ + "/first.log");
  const size_t trained = testing::loss_lines(run).size();
  const auto r = pretrain(run, "schedule.steps=" + std::to_string(trained + 2) + " checkpoint.every=0 --resume");
  ASSERT_EQ(r.first, 0) << r.second;
  EXPECT_EQ(testing::loss_lines(run).size(), trained + 2);
}

// Row 14: a damaged newest checkpoint is skipped on --resume with the reason, the previous intact one is
// used; `lathe checkpoint verify` names the damaged file; with none intact, a clear error (no fresh start).
TEST_F(RunFolder, ResumeSkipsDamagedCheckpointsAndSaysWhy) {
  const std::string base = dir_ + "/base";
  auto r = pretrain(base, "schedule.steps=6 checkpoint.every=2 checkpoint.keep=3");
  ASSERT_EQ(r.first, 0) << r.second;
  r = testing::run_lathe_bounded("checkpoint verify " + base);
  ASSERT_EQ(r.first, 0) << r.second;
  EXPECT_NE(r.second.find("3 of 3 checkpoints intact"), std::string::npos) << r.second;

  const auto flip_bit = [](const std::string& path, std::streamoff from_end) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-from_end, std::ios::end);
    char c = 0;
    f.get(c);
    f.seekp(-from_end, std::ios::end);
    f.put(static_cast<char>(c ^ 0x10));
  };
  struct Damage {
    const char* name;
    std::function<void(const std::string& ckpt)> apply;
    const char* file;    // the file the reason names
    const char* reason;  // words of the reason
  };
  const std::vector<Damage> damages = {
      {"no DONE", [](const std::string& c) { fs::remove(c + "/DONE"); }, "DONE", "missing"},
      {"no optimizer", [](const std::string& c) { fs::remove(c + "/optimizer.safetensors"); }, "optimizer.safetensors", "missing"},
      {"garbage state", [](const std::string& c) { std::ofstream(c + "/state.json") << "{\"step\": 6, garbage"; },
       "state.json", "recorded"},  // DONE's digest of state.json: its size or checksum
      {"truncated weights", [](const std::string& c) { fs::resize_file(c + "/model.safetensors", fs::file_size(c + "/model.safetensors") - 100); },
       "model.safetensors", "truncated"},
      {"flipped bit", [&](const std::string& c) { flip_bit(c + "/model.safetensors", 1000); }, "model.safetensors",
       "checksum mismatch"},
      {"flipped bit in the tokenizer", [&](const std::string& c) { flip_bit(c + "/tokenizer.json", 10); },
       "tokenizer.json", "checksum mismatch"},
  };
  int i = 0;
  for (const Damage& d : damages) {
    const std::string run = dir_ + "/damaged" + std::to_string(i++);
    fs::copy(base, run, fs::copy_options::recursive);
    const std::string newest = run + "/checkpoints/step_00000006";
    d.apply(newest);
    r = testing::run_lathe_bounded("checkpoint verify " + newest);
    EXPECT_TRUE(is_clean_error(r, std::string("FAIL ") + d.file)) << d.name << ": " << r.second;
    EXPECT_NE(r.second.find(d.reason), std::string::npos) << d.name << ": " << r.second;
    r = pretrain(run, "schedule.steps=8 checkpoint.every=2 checkpoint.keep=3 --resume");
    ASSERT_EQ(r.first, 0) << d.name << ": " << r.second;
    EXPECT_NE(r.second.find("skipped checkpoint " + newest + ": " + d.file), std::string::npos) << d.name << ": " << r.second;
    EXPECT_NE(r.second.find(d.reason), std::string::npos) << d.name << ": " << r.second;
    EXPECT_NE(r.second.find("resumed from " + run + "/checkpoints/step_00000004 at step 4"), std::string::npos)
        << d.name << ": " << r.second;
    // The run went on from step 4: step 6 rewritten intact, and step 8 written.
    EXPECT_EQ(testing::run_lathe_bounded("checkpoint verify " + run).first, 0) << d.name;
    const auto got = testing::loss_lines(run), want = testing::loss_lines(base);
    ASSERT_EQ(got.size(), 8u) << d.name;
    EXPECT_EQ(std::vector<std::string>(got.begin(), got.begin() + 4), std::vector<std::string>(want.begin(), want.begin() + 4))
        << d.name << ": the metrics of steps 1-4 were kept";
  }

  // Every checkpoint damaged: a clear error naming the folder and the way out, and nothing is changed.
  const std::string run = dir_ + "/all_damaged";
  fs::copy(base, run, fs::copy_options::recursive);
  for (const char* s : {"step_00000002", "step_00000004", "step_00000006"}) flip_bit(run + "/checkpoints/" + s + "/model.safetensors", 500);
  const auto before = snapshot(run);
  r = pretrain(run, "schedule.steps=8 --resume");
  EXPECT_TRUE(is_clean_error(r, "no intact checkpoint")) << r.second;
  EXPECT_TRUE(is_clean_error(r, "lathe checkpoint verify " + run)) << r.second;
  EXPECT_EQ(snapshot(run), before);
  r = testing::run_lathe_bounded("checkpoint verify " + run);
  EXPECT_TRUE(is_clean_error(r, "0 of 3 checkpoints intact")) << r.second;
}

// `lathe checkpoint verify` on what is not a checkpoint, and its usage errors.
TEST_F(RunFolder, CheckpointVerifyRejectsWhatIsNotACheckpoint) {
  auto r = testing::run_lathe_bounded("checkpoint verify " + data_);
  EXPECT_TRUE(is_clean_error(r, data_)) << r.second;
  r = testing::run_lathe_bounded("checkpoint verify " + dir_ + "/missing");
  EXPECT_TRUE(is_clean_error(r, dir_ + "/missing")) << r.second;
  r = testing::run_lathe_bounded("checkpoint check " + data_);
  EXPECT_TRUE(is_clean_error(r, "check")) << r.second;
  r = testing::run_lathe_bounded("checkpoint verify a b");
  EXPECT_TRUE(is_clean_error(r, "one DIR")) << r.second;
}

// A checkpoint is a complete Hugging Face folder: the tokenizer the data was prepared with and a
// generation_config.json with its special tokens; `lathe tokenize` and `lathe generate` take it as is.
TEST_F(RunFolder, CheckpointsCarryTheTokenizerAndGenerationConfig) {
  const std::string run = dir_ + "/hf";
  auto r = pretrain(run, "schedule.steps=2 checkpoint.every=0");
  ASSERT_EQ(r.first, 0) << r.second;
  const std::string ckpt = printed_checkpoint(r.second);
  for (const char* f : {"config.json", "model.safetensors", "generation_config.json", "tokenizer.json"})
    EXPECT_TRUE(fs::exists(ckpt + "/" + f)) << f;
  const std::string tok = dir_ + "/world/tokenizer";
  EXPECT_EQ(read_file(ckpt + "/tokenizer.json"), read_file(tok + "/tokenizer.json"));
  if (fs::exists(tok + "/tokenizer_config.json")) {
    EXPECT_EQ(read_file(ckpt + "/tokenizer_config.json"), read_file(tok + "/tokenizer_config.json"));
  }
  const nlohmann::json gen = nlohmann::json::parse(read_file(ckpt + "/generation_config.json"));
  EXPECT_TRUE(gen.contains("eos_token_id")) << gen.dump();
  r = testing::run_shell("echo '{\"text\": \"the river\"}' | " + testing::lathe_bin() + " tokenize " + ckpt);
  EXPECT_EQ(r.first, 0) << r.second;
  r = testing::run_lathe_bounded("generate " + ckpt + " --prompt-ids 256 --max-tokens 3");
  EXPECT_EQ(r.first, 0) << r.second;

  // Data prepared with a tokenizer file of another name: the checkpoint still holds it as tokenizer.json,
  // the name loaders look for.
  fs::create_directories(dir_ + "/renamed");
  fs::copy_file(tok + "/tokenizer.json", dir_ + "/renamed/world_tok.json");
  for (const char* f : {"tokenizer_config.json", "special_tokens_map.json"})  // the BOS / EOS are named there
    if (fs::exists(tok + "/" + f)) fs::copy_file(tok + "/" + f, dir_ + "/renamed/" + f);
  r = testing::run_lathe_bounded("data prepare " + dir_ + "/world/world.jsonl --tokenizer " + dir_ +
                                 "/renamed/world_tok.json --out " + dir_ + "/data2 --name world --val-fraction 0.05");
  ASSERT_EQ(r.first, 0) << r.second;
  r = testing::run_lathe_bounded(tiny(dir_ + "/data2", dir_ + "/hf2", "schedule.steps=2 checkpoint.every=0"), 120);
  ASSERT_EQ(r.first, 0) << r.second;
  const std::string ckpt2 = printed_checkpoint(r.second);
  EXPECT_EQ(read_file(ckpt2 + "/tokenizer.json"), read_file(tok + "/tokenizer.json"));
  EXPECT_FALSE(fs::exists(ckpt2 + "/world_tok.json"));
}

// The class of row 1 in pretrain: the run writes run.dir/recipe.yaml, so a fresh run whose recipe is that
// very file is refused before anything is written, and the hand-written recipe is intact.
TEST_F(RunFolder, ARecipeInsideTheRunFolderIsNeverOverwritten) {
  const std::string run = dir_ + "/own_recipe";
  fs::create_directories(run);
  fs::copy_file("recipes/quickstart.yaml", run + "/recipe.yaml");
  const std::string before = read_file(run + "/recipe.yaml");
  std::string cmd = tiny(data_, run, "schedule.steps=2");
  cmd.replace(cmd.find("recipes/quickstart.yaml"), 23, run + "/recipe.yaml");
  auto r = testing::run_lathe_bounded(cmd, 120);
  EXPECT_TRUE(is_clean_error(r, "is run.dir's recipe.yaml")) << r.second;
  r = testing::run_lathe_bounded(cmd + " --overwrite", 120);
  EXPECT_TRUE(is_clean_error(r, "is run.dir's recipe.yaml")) << r.second;
  r = testing::run_lathe_bounded(cmd + " --resume", 120);  // nothing to continue: a fresh start, refused too
  EXPECT_TRUE(is_clean_error(r, "is run.dir's recipe.yaml")) << r.second;
  EXPECT_EQ(read_file(run + "/recipe.yaml"), before);
  EXPECT_FALSE(fs::exists(run + "/checkpoints"));
}

// Rows 11 and 16 (readers): plot and --resume cope with null values, garbage and torn lines in
// metrics.jsonl, naming file:line; no raw JSON library error.
TEST_F(RunFolder, PlotAndResumeSurviveBadMetricsLines) {
  const std::string run = dir_ + "/bad_metrics";
  auto r = pretrain(run, "schedule.steps=4 checkpoint.every=2");
  ASSERT_EQ(r.first, 0) << r.second;
  const std::string metrics = run + "/metrics.jsonl";
  const size_t good_lines = [&] {
    std::ifstream in(metrics);
    size_t n = 0;
    for (std::string l; std::getline(in, l);) ++n;
    return n;
  }();
  std::ofstream(metrics, std::ios::app) << "{\"step\":4,\"val_loss\":null}\n"
                                        << "not json at all\n"
                                        << "[1,2,3]\n"
                                        << "{\"step\":\"four\",\"loss\":1}\n"
                                        << "{\"step\":3,\"loss\":null,\"lr\":0.1}\n"
                                        << "{\"step\":4,\"lo";  // torn
  r = testing::run_lathe_bounded("plot " + run);
  EXPECT_EQ(r.first, 0) << r.second;
  EXPECT_NE(r.second.find(metrics + ":" + std::to_string(good_lines + 1) + ": val_loss is null"), std::string::npos)
      << r.second;
  EXPECT_NE(r.second.find(metrics + ":" + std::to_string(good_lines + 2) + ": not valid JSON"), std::string::npos)
      << r.second;
  EXPECT_NE(r.second.find(metrics + ":" + std::to_string(good_lines + 4) + ": step is \"four\""), std::string::npos)
      << r.second;
  EXPECT_EQ(r.second.find("json.exception"), std::string::npos) << r.second;
  EXPECT_NE(read_file(run + "/loss.svg").find("<svg"), std::string::npos);

  r = pretrain(run, "schedule.steps=6 checkpoint.every=2 --resume");
  ASSERT_EQ(r.first, 0) << r.second;
  EXPECT_EQ(r.second.find("json.exception"), std::string::npos) << r.second;
  EXPECT_EQ(testing::loss_lines(run).size(), 6u) << read_file(metrics);

  // Another member: a metrics.jsonl that is all garbage plots an empty curve; one that is a folder is an error.
  const std::string junk = dir_ + "/junk";
  fs::create_directories(junk);
  std::ofstream(junk + "/metrics.jsonl") << "\x01\x02garbage\n{\"step\":1e999}\n";
  r = testing::run_lathe_bounded("plot " + junk);
  EXPECT_EQ(r.first, 0) << r.second;
  EXPECT_NE(r.second.find(junk + "/metrics.jsonl:1"), std::string::npos) << r.second;
  fs::remove(junk + "/metrics.jsonl");
  fs::create_directories(junk + "/metrics.jsonl");
  r = testing::run_lathe_bounded("plot " + junk);
  EXPECT_TRUE(is_clean_error(r, junk + "/metrics.jsonl")) << r.second;
}

// Row 12: a failed metrics write stops the run with the path and the errno text, after a checkpoint.
// metrics.jsonl as a link to /dev/full (every write fails with ENOSPC) on a resumed run: the run stops at
// the first step it cannot log, and the checkpoint of that step is written and intact.
TEST_F(RunFolder, FailedMetricsWriteStopsTheRunAfterACheckpoint) {
  const std::string run = dir_ + "/devfull";
  auto r = pretrain(run, "schedule.steps=4 checkpoint.every=0");
  ASSERT_EQ(r.first, 0) << r.second;
  const std::string kept = read_file(run + "/metrics.jsonl");
  fs::rename(run + "/metrics.jsonl", run + "/metrics.kept");
  fs::create_symlink("/dev/full", run + "/metrics.jsonl");
  r = pretrain(run, "schedule.steps=100 checkpoint.every=0 --resume");
  EXPECT_TRUE(is_clean_error(r, run + "/metrics.jsonl: write failed: No space left on device")) << r.second;
  EXPECT_TRUE(is_clean_error(r, "training stopped at step 5")) << r.second;
  EXPECT_TRUE(is_clean_error(r, "checkpoint " + run + "/checkpoints/step_00000005 written")) << r.second;
  EXPECT_EQ(testing::run_lathe_bounded("checkpoint verify " + run + "/checkpoints/step_00000005").first, 0);
  EXPECT_EQ(read_file(run + "/metrics.kept"), kept);
}

// Row 12 on a real full disk (a tmpfs filled while the run trains; needs root, else skipped): the run
// stops within a few steps, the lines written before the disk filled are kept, and the error says why.
TEST_F(RunFolder, FullDiskDuringTrainingStopsTheRunWithTheMetricsPath) {
  const std::string disk = dir_ + "/disk";
  const testing::ScopedTmpfs tmpfs(disk, "4m");
  if (!tmpfs.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here (not root, or no CAP_SYS_ADMIN)";
  const std::string run = disk + "/run";
  const pid_t pid = testing::spawn_lathe_logged(tiny(data_, run, "schedule.steps=1000000 checkpoint.every=0 eval.every=0"), dir_ + "/full.log");
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(wait_for_losses(run, 5)) << read_file(dir_ + "/full.log");
  std::system(("dd if=/dev/zero of=" + disk + "/fill bs=64k 2>/dev/null").c_str());  // until ENOSPC
  const int rc = testing::wait_exit(pid, std::chrono::seconds(60));
  const std::string log = read_file(dir_ + "/full.log");
  EXPECT_EQ(rc, 1) << log;
  EXPECT_NE(log.find(run + "/metrics.jsonl: write failed: No space left on device"), std::string::npos) << log;
  EXPECT_NE(log.find("training stopped at step"), std::string::npos) << log;
  EXPECT_NE(log.find("not written (earlier checkpoints are intact)"), std::string::npos) << log;
  EXPECT_GE(testing::loss_lines(run).size(), 5u) << "lines written before the disk filled were lost";
}

}  // namespace
}  // namespace lathe
