// Issue 9 row 7's class on the training side: a FIFO, folder or other non-regular file where lathe reads a
// user file (a recipe or its base_recipe, a data prepare input, a data manifest, a token shard, a
// checkpoint's state.json or DONE, metrics.jsonl) fails at once, naming the path and what it is; nothing
// blocks on a FIFO (every command runs under a timeout: a hang exits 124). On --resume such a checkpoint
// is skipped with the reason, as for other damage.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli_run.h"
#include "lathe/io/test_paths.h"

namespace lathe {
namespace {

namespace fs = std::filesystem;
using testing::is_clean_error;
using testing::run_lathe_bounded;

constexpr int kTimeout = 60;  // seconds; a hang shows as exit 124
constexpr const char* kFifo = "is a FIFO (named pipe), not a regular file";
constexpr const char* kFolder = "is a directory, not a regular file";

void make_fifo(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0) << path;
}

void make_folder(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  fs::create_directory(path);
}

// The quickstart recipe shrunk to a 2-layer model, `extra` appended.
std::string tiny(const std::string& data, const std::string& run_dir, const std::string& extra) {
  return "pretrain " + std::string(LATHE_SOURCE_DIR) + "/recipes/quickstart.yaml data.train=" + data +
         " data.val=" + data + " run.dir=" + run_dir +
         " run.threads=2 model.config.hidden_size=32 model.config.intermediate_size=64"
         " model.config.num_hidden_layers=2 model.config.num_attention_heads=4 model.config.num_key_value_heads=2"
         " model.config.head_dim=8 data.seq_len=32 data.batch_size=4 schedule.warmup_steps=1 eval.every=0"
         " eval.batches=2 eval.target_val_loss=0 --no-samples " +
         extra;
}

// A world corpus prepared once for the suite: DIR/world (jsonl, tokenizer), DIR/data/world*.
class TrainInputFiles : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new std::string(testing::scratch_dir("train_input_files"));
    const auto r = testing::prepare_world_data(*dir_, 200);
    ASSERT_EQ(r.first, 0) << r.second;
  }
  static void TearDownTestSuite() {
    delete dir_;
    dir_ = nullptr;
  }
  // A copy of the prepared data folder, to damage.
  static std::string data_copy(const std::string& name) {
    const std::string d = *dir_ + "/" + name;
    fs::remove_all(d);
    fs::copy(*dir_ + "/data", d, fs::copy_options::recursive);
    return d;
  }
  static std::string* dir_;
};
std::string* TrainInputFiles::dir_ = nullptr;

TEST(TrainInputFilesRecipe, RecipeFifoOrFolderFailsAtOnce) {
  const std::string d = testing::scratch_dir("train_input_recipe");
  make_fifo(d + "/r.yaml");
  auto r = run_lathe_bounded("pretrain " + d + "/r.yaml", kTimeout);
  EXPECT_EQ(r.first, 1) << r.second;
  EXPECT_TRUE(is_clean_error(r, d + "/r.yaml: " + kFifo)) << r.second;

  make_folder(d + "/dir.yaml");
  r = run_lathe_bounded("pretrain " + d + "/dir.yaml", kTimeout);
  EXPECT_TRUE(is_clean_error(r, d + "/dir.yaml: " + kFolder)) << r.second;

  // The same through a base_recipe: the included file is named, not the recipe that names it.
  std::ofstream(d + "/child.yaml") << "base_recipe: base.yaml\nschedule:\n  steps: 2\n";
  make_fifo(d + "/base.yaml");
  r = run_lathe_bounded("pretrain " + d + "/child.yaml", kTimeout);
  EXPECT_TRUE(is_clean_error(r, d + "/base.yaml: " + kFifo)) << r.second;
  make_folder(d + "/base.yaml");
  r = run_lathe_bounded("pretrain " + d + "/child.yaml", kTimeout);
  EXPECT_TRUE(is_clean_error(r, d + "/base.yaml: " + kFolder)) << r.second;
}

TEST_F(TrainInputFiles, DataPrepareInputFifoOrFolderFailsBeforeWriting) {
  const std::string out = *dir_ + "/prep_out";
  const std::string tok = " --tokenizer " + *dir_ + "/world/tokenizer --out " + out + " --name p";
  for (const bool fifo : {true, false}) {
    const std::string in = *dir_ + (fifo ? "/in_fifo.jsonl" : "/in_dir.txt");
    if (fifo) make_fifo(in);
    else make_folder(in);
    // The bad input second: every input is checked before anything is read or written.
    const auto r = run_lathe_bounded("data prepare " + *dir_ + "/world/world.jsonl " + in + tok, kTimeout);
    EXPECT_TRUE(is_clean_error(r, in + ": " + (fifo ? kFifo : kFolder))) << r.second;
    EXPECT_FALSE(fs::exists(out + "/p.json")) << r.second;
    EXPECT_FALSE(fs::exists(out + "/p_train_000000.bin")) << r.second;
  }
}

TEST_F(TrainInputFiles, ManifestFifoOrFolderFailsNamingIt) {
  const std::string data = data_copy("manifest");
  const std::string run = *dir_ + "/manifest_run";
  for (const bool fifo : {true, false}) {
    if (fifo) make_fifo(data + "/world.json");
    else make_folder(data + "/world.json");
    const std::string want = data + "/world.json: " + (fifo ? kFifo : kFolder);
    // Named as DIR/NAME, as the manifest itself, and as the folder holding it: never a fallback to
    // globbing the shards.
    for (const std::string& d : {data + "/world", data + "/world.json", data}) {
      const auto r = run_lathe_bounded(tiny(d, run, "schedule.steps=1 checkpoint.every=0"), kTimeout);
      EXPECT_TRUE(is_clean_error(r, want)) << d << "\n" << r.second;
    }
  }
}

TEST_F(TrainInputFiles, ShardFifoOrFolderFailsNamingIt) {
  const std::string data = data_copy("shard");
  const std::string run = *dir_ + "/shard_run";
  for (const char* shard : {"world_train_000000.bin", "world_val_000000.bin"}) {
    const std::string path = data + "/" + shard;
    const std::string kept = *dir_ + "/kept.bin";
    fs::copy_file(path, kept, fs::copy_options::overwrite_existing);
    make_fifo(path);
    auto r = run_lathe_bounded(tiny(data + "/world", run, "schedule.steps=1 checkpoint.every=0"), kTimeout);
    EXPECT_TRUE(is_clean_error(r, path + ": " + kFifo)) << r.second;
    make_folder(path);
    r = run_lathe_bounded(tiny(data + "/world", run, "schedule.steps=1 checkpoint.every=0"), kTimeout);
    EXPECT_TRUE(is_clean_error(r, path + ": " + kFolder)) << r.second;
    fs::remove_all(path);
    fs::copy_file(kept, path);
  }
}

// A FIFO state.json (or DONE as a folder) in the newest checkpoint: `checkpoint verify` names it, and
// --resume skips that checkpoint with the reason and resumes from the one before.
TEST_F(TrainInputFiles, ResumeSkipsACheckpointWithAFifoStateJson) {
  const std::string base = *dir_ + "/resume_base";
  auto r = run_lathe_bounded(tiny(*dir_ + "/data/world", base, "schedule.steps=4 checkpoint.every=2 checkpoint.keep=3"),
                             120);
  ASSERT_EQ(r.first, 0) << r.second;
  struct Damage {
    const char* file;
    bool fifo;
  };
  int i = 0;
  for (const Damage& d : {Damage{"state.json", true}, Damage{"DONE", false}, Damage{"DONE", true}}) {
    const std::string run = *dir_ + "/resume" + std::to_string(i++);
    fs::copy(base, run, fs::copy_options::recursive);
    const std::string newest = run + "/checkpoints/step_00000004";
    const std::string path = newest + "/" + d.file;
    if (d.fifo) make_fifo(path);
    else make_folder(path);
    const std::string why = path + ": " + (d.fifo ? kFifo : kFolder);
    r = run_lathe_bounded("checkpoint verify " + newest, kTimeout);
    EXPECT_TRUE(is_clean_error(r, std::string("FAIL ") + d.file)) << r.second;
    EXPECT_TRUE(is_clean_error(r, why)) << r.second;
    r = run_lathe_bounded(tiny(*dir_ + "/data/world", run, "schedule.steps=5 checkpoint.every=0 --resume"), 120);
    ASSERT_EQ(r.first, 0) << d.file << ": " << r.second;
    EXPECT_NE(r.second.find("skipped checkpoint " + newest + ": " + d.file), std::string::npos) << r.second;
    EXPECT_NE(r.second.find(why), std::string::npos) << r.second;
    EXPECT_NE(r.second.find("resumed from " + run + "/checkpoints/step_00000002 at step 2"), std::string::npos)
        << r.second;
  }
}

// The run folder's lock file as a FIFO or folder: refused naming it, before anything is written.
TEST_F(TrainInputFiles, LockFileFifoOrFolderFailsNamingIt) {
  const std::string run = *dir_ + "/lock_run";
  fs::create_directories(run);
  for (const bool fifo : {true, false}) {
    if (fifo) make_fifo(run + "/lock");
    else make_folder(run + "/lock");
    const auto r = run_lathe_bounded(tiny(*dir_ + "/data/world", run, "schedule.steps=1 checkpoint.every=0"), kTimeout);
    EXPECT_TRUE(is_clean_error(r, run + "/lock: " + (fifo ? kFifo : kFolder))) << r.second;
    EXPECT_FALSE(fs::exists(run + "/recipe.yaml")) << r.second;
  }
}

// metrics.jsonl as a FIFO: --resume (which reads it back, then appends) and plot fail naming it.
TEST_F(TrainInputFiles, MetricsFifoFailsNamingIt) {
  const std::string run = *dir_ + "/metrics_run";
  auto r = run_lathe_bounded(tiny(*dir_ + "/data/world", run, "schedule.steps=2 checkpoint.every=2"), 120);
  ASSERT_EQ(r.first, 0) << r.second;
  make_fifo(run + "/metrics.jsonl");
  const std::string why = run + "/metrics.jsonl: " + kFifo;
  r = run_lathe_bounded("plot " + run, kTimeout);
  EXPECT_TRUE(is_clean_error(r, why)) << r.second;
  r = run_lathe_bounded(tiny(*dir_ + "/data/world", run, "schedule.steps=3 checkpoint.every=0 --resume"), kTimeout);
  EXPECT_TRUE(is_clean_error(r, why)) << r.second;
}

}  // namespace
}  // namespace lathe
