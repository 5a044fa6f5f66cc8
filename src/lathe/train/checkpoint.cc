#include "lathe/train/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lathe/base/error.h"
#include "lathe/io/mapped_file.h"
#include "lathe/io/safetensors.h"

namespace lathe::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::string step_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step_%08lld", static_cast<long long>(step));
  return buf;
}

// Complete checkpoints, oldest first.
std::vector<fs::path> complete_checkpoints(const fs::path& ckpt_root) {
  std::vector<fs::path> out;
  if (!fs::is_directory(ckpt_root)) return out;
  for (const auto& e : fs::directory_iterator(ckpt_root)) {
    const std::string name = e.path().filename().string();
    if (e.is_directory() && name.rfind("step_", 0) == 0 && fs::exists(e.path() / "DONE")) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());  // zero-padded step numbers sort in step order
  return out;
}

}  // namespace

std::string save_checkpoint(const std::string& run_dir, const Model& model, const AdamW& opt, const TrainState& st,
                            int keep) {
  const fs::path root = fs::path(run_dir) / "checkpoints";
  fs::create_directories(root);
  const fs::path final_dir = root / step_name(st.step);
  const fs::path tmp = root / (".tmp." + step_name(st.step) + "." + std::to_string(::getpid()));
  fs::remove_all(tmp);
  try {
    model.save(tmp.string());
    std::vector<std::pair<std::string, Tensor>> moments;
    const auto& params = opt.params();
    for (size_t i = 0; i < params.size(); ++i) {
      moments.push_back({"exp_avg." + params[i].name, opt.exp_avg()[i]});
      moments.push_back({"exp_avg_sq." + params[i].name, opt.exp_avg_sq()[i]});
    }
    save_safetensors((tmp / "optimizer.safetensors").string(), moments);
    const json state = {{"step", st.step},
                        {"data_cursor", st.data_cursor},
                        {"seed", st.seed},
                        {"world_size", st.world_size},
                        {"optimizer_steps", opt.steps_done()},
                        {"recipe_hash", st.recipe_hash}};
    write_file_atomic((tmp / "state.json").string(), state.dump(2) + "\n");
    write_file_atomic((tmp / "DONE").string(), "");
    fsync_path(tmp.string());
    if (fs::exists(final_dir)) fs::remove_all(final_dir);  // a re-run of the same step replaces it
    fs::rename(tmp, final_dir);
    fsync_path(root.string());
  } catch (const fs::filesystem_error& e) {
    std::error_code ec;
    fs::remove_all(tmp, ec);
    throw IoError(str_cat("checkpoint ", final_dir.string(), ": ", e.what()));
  } catch (...) {
    std::error_code ec;
    fs::remove_all(tmp, ec);  // a full disk leaves no partial folder behind; older checkpoints are intact
    throw;
  }
  // Prune: keep the newest `keep` complete checkpoints; also drop stale temporaries of dead processes.
  // The initial weights (step 0, checkpoint.save_initial) are a reference point and never pruned.
  auto done = complete_checkpoints(root);
  std::erase_if(done, [](const fs::path& p) { return p.filename() == step_name(0); });
  for (size_t i = 0; i + keep < done.size(); ++i) fs::remove_all(done[i]);
  for (const auto& e : fs::directory_iterator(root)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(".tmp.", 0) == 0) {
      std::error_code ec;
      fs::remove_all(e.path(), ec);
    }
  }
  return final_dir.string();
}

std::optional<std::string> latest_checkpoint(const std::string& run_dir) {
  auto done = complete_checkpoints(fs::path(run_dir) / "checkpoints");
  for (auto it = done.rbegin(); it != done.rend(); ++it) {
    try {
      std::ifstream in(*it / "state.json");
      const json st = json::parse(in);
      if (st.contains("step") && fs::exists(*it / "model.safetensors") && fs::exists(*it / "optimizer.safetensors"))
        return it->string();
    } catch (const std::exception&) {
      // unreadable: fall back to the previous one
    }
  }
  return std::nullopt;
}

TrainState load_checkpoint_state(const std::string& dir, AdamW& opt) {
  json st;
  try {
    std::ifstream in(fs::path(dir) / "state.json");
    st = json::parse(in);
  } catch (const json::exception& e) {
    throw FormatError(str_cat(dir, "/state.json: ", e.what()));
  }
  TrainState s;
  try {
    s.step = st.at("step").get<int64_t>();
    s.data_cursor = st.at("data_cursor").get<int64_t>();
    s.seed = st.at("seed").get<uint64_t>();
    s.world_size = st.at("world_size").get<int>();
    s.recipe_hash = st.at("recipe_hash").get<std::string>();
    opt.set_steps_done(st.at("optimizer_steps").get<int64_t>());
  } catch (const json::exception& e) {
    throw FormatError(str_cat(dir, "/state.json: ", e.what()));
  }
  const SafetensorsFile f = SafetensorsFile::open((fs::path(dir) / "optimizer.safetensors").string());
  const auto& params = opt.params();
  for (size_t i = 0; i < params.size(); ++i) {
    for (int which = 0; which < 2; ++which) {
      const std::string name = (which == 0 ? "exp_avg." : "exp_avg_sq.") + params[i].name;
      const Tensor src = f.tensor(name);  // throws naming the file when missing
      const Shape& want = params[i].value.shape();
      LATHE_CHECK_FORMAT(src.shape() == want, dir, "/optimizer.safetensors: ", name, " has shape ",
                         shape_str(src.shape()), ", the model needs ", shape_str(want));
      // The elements this optimizer owns (all of them, or a ZeRO-1 rank's range): a checkpoint always
      // holds the whole state, so it resumes on any world size.
      const auto [first, last] = opt.owned_part(i);
      if (first == last) continue;
      Tensor& dst = which == 0 ? opt.exp_avg()[i] : opt.exp_avg_sq()[i];
      dst.view({-1}).copy_from(src.contiguous().view({-1}).slice(0, first, last));
    }
  }
  return s;
}

}  // namespace lathe::train
