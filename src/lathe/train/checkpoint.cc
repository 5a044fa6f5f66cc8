#include "lathe/train/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <span>
#include <sstream>

#include "lathe/base/error.h"
#include "lathe/io/checksum.h"
#include "lathe/io/file_read.h"
#include "lathe/io/mapped_file.h"
#include "lathe/io/safetensors.h"
#include "lathe/io/tokenizer/tokenizer.h"

namespace lathe::train {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// What every checkpoint must hold, whatever state.json lists.
constexpr const char* kRequiredFiles[] = {"config.json", "model.safetensors", "optimizer.safetensors"};
constexpr const char* kRequiredLoraFiles[] = {"adapter_config.json", "adapter_model.safetensors",
                                              "optimizer.safetensors"};

// The files a checkpoint folder must hold: a LoRA run's (SaveCheckpointOptions::lora) has the adapter's.
std::span<const char* const> required_files(const fs::path& dir) {
  std::error_code ec;
  if (fs::exists(dir / "adapter_config.json", ec)) return kRequiredLoraFiles;
  return kRequiredFiles;
}

std::string step_name(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "step_%08lld", static_cast<long long>(step));
  return buf;
}


// state.json as an object, or a FormatError naming the file.
json read_state_json(const fs::path& dir) {
  return read_json_object_file((dir / "state.json").string());
}

TrainState parse_state(const json& st, const fs::path& dir, int64_t* optimizer_steps) {
  TrainState s;
  try {
    s.step = st.at("step").get<int64_t>();
    s.data_cursor = st.at("data_cursor").get<int64_t>();
    s.seed = st.at("seed").get<uint64_t>();
    s.world_size = st.at("world_size").get<int>();
    s.recipe_hash = st.at("recipe_hash").get<std::string>();
    s.run_id = st.value("run_id", std::string());
    *optimizer_steps = st.at("optimizer_steps").get<int64_t>();
  } catch (const json::exception& e) {
    throw FormatError(str_cat((dir / "state.json").string(), ": ", e.what()));
  }
  LATHE_CHECK_FORMAT(s.step >= 0 && s.data_cursor >= 0, (dir / "state.json").string(), ": negative step or cursor");
  return s;
}

json digest_json(const FileDigest& d) { return {{"size", d.size}, {"xxh3_128", d.xxh3_128}}; }

// "" when the file matches the recorded {size, xxh3_128}, else why not.
std::string check_digest(const fs::path& file, const json& want) {
  std::error_code ec;
  if (!fs::exists(file, ec)) return "missing";
  if (!want.is_object() || !want.contains("size") || !want["size"].is_number_unsigned() || !want.contains("xxh3_128") ||
      !want["xxh3_128"].is_string())
    return "no valid digest recorded";
  FileDigest got;
  try {
    got = digest_file(file.string());
  } catch (const IoError& e) {
    return e.what();
  }
  const uint64_t size = want["size"].get<uint64_t>();
  if (got.size != size)
    return str_cat("size ", got.size, " bytes, recorded ", size, got.size < size ? " (truncated)" : " (grown)");
  if (got.xxh3_128 != want["xxh3_128"].get<std::string>())
    return str_cat("checksum mismatch (XXH3-128 ", got.xxh3_128, ", recorded ", want["xxh3_128"].get<std::string>(),
                   "): the file was changed or damaged");
  return "";
}

}  // namespace

std::vector<fs::path> checkpoint_folders(const fs::path& ckpt_root) {
  std::vector<fs::path> out;
  std::error_code ec;
  if (!fs::is_directory(ckpt_root, ec)) return out;
  for (const auto& e : fs::directory_iterator(ckpt_root, ec)) {
    const std::string name = e.path().filename().string();
    if (e.is_directory() && name.rfind("step_", 0) == 0) out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());  // zero-padded step numbers sort in step order
  return out;
}

void prune_checkpoints(const std::string& run_dir, const TrainState& st, int keep) {
  LATHE_CHECK_ARG(keep >= 1, "[prune_checkpoints] keep must be >= 1, got ", keep);
  const fs::path root = fs::path(run_dir) / "checkpoints";
  std::vector<fs::path> ours;
  for (const fs::path& p : checkpoint_folders(root)) {
    if (p.filename() == step_name(0) || !fs::exists(p / "DONE")) continue;
    try {
      const json s = read_state_json(p);
      if (st.run_id.empty() || !s.contains("run_id") || s["run_id"] != st.run_id) continue;
      if (!s.contains("step") || !s["step"].is_number_integer() || s["step"].get<int64_t>() > st.step) continue;
    } catch (const Error&) {
      continue;  // unreadable: not provably ours
    }
    ours.push_back(p);
  }
  for (size_t i = 0; i + keep < ours.size(); ++i) fs::remove_all(ours[i]);
  for (const auto& e : fs::directory_iterator(root)) {  // stale temporaries of dead processes
    const std::string name = e.path().filename().string();
    if (name.rfind(".tmp.", 0) == 0) {
      std::error_code ec;
      fs::remove_all(e.path(), ec);
    }
  }
}

std::vector<std::pair<std::string, std::string>> checkpoint_companion_files(const ModelConfig& cfg,
                                                                             const std::string& tokenizer) {
  std::vector<std::pair<std::string, std::string>> files;
  std::optional<tokenizer::SpecialTokens> special;
  if (!tokenizer.empty()) {
    tokenizer::TokenizerFiles t = tokenizer::read_tokenizer_files(tokenizer);
    // Saved as tokenizer.json whatever its source is called: that is the name loaders look for.
    files.push_back({"tokenizer.json", t.tokenizer_json});
    if (!t.config_json.empty()) files.push_back({"tokenizer_config.json", t.config_json});
    if (!t.special_map_json.empty()) files.push_back({"special_tokens_map.json", t.special_map_json});
    special = tokenizer::Tokenizer::from_files(std::move(t)).special_tokens();
  }
  json g = {{"_from_model_config", true}};
  if (cfg.bos_token_id >= 0) g["bos_token_id"] = cfg.bos_token_id;
  else if (special && special->bos_id) g["bos_token_id"] = *special->bos_id;
  if (cfg.eos_token_ids.size() == 1) g["eos_token_id"] = cfg.eos_token_ids[0];
  else if (!cfg.eos_token_ids.empty()) g["eos_token_id"] = cfg.eos_token_ids;
  else if (special && special->eos_id) g["eos_token_id"] = *special->eos_id;
  if (cfg.pad_token_id >= 0) g["pad_token_id"] = cfg.pad_token_id;
  else if (special && special->pad_id) g["pad_token_id"] = *special->pad_id;
  files.push_back({"generation_config.json", g.dump(2) + "\n"});
  return files;
}

std::string save_checkpoint(const std::string& run_dir, const Model& model, const AdamW& opt, const TrainState& st,
                            const SaveCheckpointOptions& opts) {
  const fs::path root = fs::path(run_dir) / "checkpoints";
  const fs::path final_dir = root / step_name(st.step);
  const fs::path tmp = root / (".tmp." + step_name(st.step) + "." + std::to_string(::getpid()));
  try {
    fs::create_directories(root);
    fs::remove_all(tmp);
    if (opts.lora) {
      opts.lora->save(tmp.string());
    } else {
      model.save(tmp.string());
    }
    std::vector<std::pair<std::string, Tensor>> moments;
    const auto& params = opt.params();
    for (size_t i = 0; i < params.size(); ++i) {
      moments.push_back({"exp_avg." + params[i].name, opt.exp_avg()[i]});
      moments.push_back({"exp_avg_sq." + params[i].name, opt.exp_avg_sq()[i]});
    }
    save_safetensors((tmp / "optimizer.safetensors").string(), moments);
    // A complete Hugging Face folder: the tokenizer and generation_config.json beside the weights.
    for (const auto& [name, bytes] : opts.companion_files)
      if (!fs::exists(tmp / name)) write_file_atomic((tmp / name).string(), bytes);
    json files = json::object();
    std::vector<fs::path> names;
    for (const auto& e : fs::directory_iterator(tmp)) names.push_back(e.path());
    std::sort(names.begin(), names.end());
    for (const fs::path& p : names) files[p.filename().string()] = digest_json(digest_file(p.string()));
    const json state = {{"step", st.step},
                        {"data_cursor", st.data_cursor},
                        {"seed", st.seed},
                        {"world_size", st.world_size},
                        {"optimizer_steps", opt.steps_done()},
                        {"recipe_hash", st.recipe_hash},
                        {"run_id", st.run_id},
                        {"files", files}};
    const std::string state_text = state.dump(2) + "\n";
    write_file_atomic((tmp / "state.json").string(), state_text);
    // DONE covers state.json, which covers every other file.
    const json done = {{"state.json", digest_json(digest_bytes(state_text.data(), state_text.size()))}};
    write_file_atomic((tmp / "DONE").string(), done.dump() + "\n");
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
  return final_dir.string();
}

CheckpointCheck verify_checkpoint(const std::string& dir_str) {
  const fs::path dir = dir_str;
  CheckpointCheck c;
  c.dir = dir_str;
  const auto fail = [&](const std::string& name, const std::string& why) {
    c.files.push_back({name, false, why});
    if (c.problem.empty()) c.problem = name + ": " + why;
  };
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    fail(dir.filename().string(), "not a folder");
    return c;
  }
  // DONE: written last; it records state.json's digest (empty in checkpoints of older lathe).
  json done;
  if (!fs::exists(dir / "DONE", ec)) {  // present but a FIFO or folder: reading it below says what it is
    fail("DONE", "missing: the checkpoint is incomplete (its write was interrupted, or the file was removed)");
  } else {
    std::string text;
    try {
      text = read_file((dir / "DONE").string());
    } catch (const IoError& e) {
      fail("DONE", e.what());
    }
    if (text.find_first_not_of(" \n") != std::string::npos) {
      done = json::parse(text, nullptr, false);
      if (done.is_discarded() || !done.is_object() || !done.contains("state.json")) {
        fail("DONE", "not the JSON lathe writes (damaged)");
        done = json();
      } else {
        c.files.push_back({"DONE", true, ""});
      }
    } else if (c.problem.empty()) {
      c.files.push_back({"DONE", true, "empty (an older lathe): state.json is not checksummed"});
    }
  }
  // state.json: its digest, then its content.
  json st;
  if (!fs::exists(dir / "state.json", ec)) {
    fail("state.json", "missing");
  } else {
    const std::string bad = done.is_object() ? check_digest(dir / "state.json", done["state.json"]) : "";
    if (!bad.empty()) {
      fail("state.json", bad);
    } else {
      try {
        st = read_state_json(dir);
        int64_t opt_steps = 0;
        const TrainState s = parse_state(st, dir, &opt_steps);
        if (dir.filename().string().rfind("step_", 0) == 0 && dir.filename() != step_name(s.step))
          throw FormatError(str_cat("records step ", s.step, ", but the folder is ", dir.filename().string()));
        c.files.push_back({"state.json", true, ""});
      } catch (const Error& e) {
        fail("state.json", e.what());
        st = json();
      }
    }
  }
  if (!st.is_object()) {
    for (const char* name : required_files(dir))
      if (!fs::exists(dir / name, ec)) fail(name, "missing");
    return c;
  }
  // Every file state.json lists (older checkpoints list none: their safetensors headers are checked).
  const json files = st.value("files", json::object());
  if (!files.is_object()) fail("state.json", "\"files\" is not an object");
  for (const char* name : required_files(dir))
    if (files.is_object() && !files.empty() && !files.contains(name)) fail(name, "not listed in state.json");
  if (files.is_object() && !files.empty()) {
    for (const auto& [name, want] : files.items()) {
      const std::string bad = check_digest(dir / name, want);
      if (bad.empty()) c.files.push_back({name, true, ""});
      else fail(name, bad);
    }
    return c;
  }
  for (const char* name : required_files(dir)) {
    if (!fs::exists(dir / name, ec)) {  // a FIFO or folder in its place: opening it below says what it is
      fail(name, "missing");
      continue;
    }
    try {
      if (std::string(name).ends_with(".safetensors")) SafetensorsFile::open((dir / name).string());
      c.files.push_back({name, true, "no checksum recorded (an older lathe)"});
    } catch (const Error& e) {
      fail(name, e.what());
    }
  }
  return c;
}

ResumePoint find_resume_checkpoint(const std::string& run_dir) {
  ResumePoint r;
  const auto folders = checkpoint_folders(fs::path(run_dir) / "checkpoints");
  for (auto it = folders.rbegin(); it != folders.rend(); ++it) {
    const CheckpointCheck c = verify_checkpoint(it->string());
    if (c.ok()) {
      r.dir = it->string();
      break;
    }
    r.skipped.push_back(it->string() + ": " + c.problem);
  }
  return r;
}

std::optional<std::string> latest_checkpoint(const std::string& run_dir) { return find_resume_checkpoint(run_dir).dir; }

TrainState load_checkpoint_state(const std::string& dir, AdamW& opt) {
  int64_t opt_steps = 0;
  TrainState s = parse_state(read_state_json(dir), dir, &opt_steps);
  opt.set_steps_done(opt_steps);
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
