// lathe launch --nproc MIN:MAX [--hostfile F] -- pretrain|sft|dpo|distill|grpo RECIPE [key=value ...]: an elastic
// supervisor over mpirun. It starts the job on as many ranks as the hostfile offers (at most MAX), and when
// the job fails (a rank killed, a collective timeout naming a stopped rank, an error) relaunches it with
// --resume on the ranks still available (at least MIN), with the batch split so the optimizer sees the same
// global batch (train/elastic_batch.h; GRPO's in whole groups per rank). When slots come back (the hostfile
// is re-read every second) the job is stopped at the end of its step with a checkpoint and relaunched larger.
// Restarts are logged to <run>/elastic/restarts.jsonl. docs/multi-node.md.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "args.h"
#include "launch_job.h"
#include "lathe/base/error.h"
#include "lathe/dist/hostfile.h"
#include "lathe/io/mapped_file.h"
#include "lathe/posttrain/grpo_options.h"
#include "lathe/train/elastic_batch.h"
#include "lathe/train/recipe.h"
#include "lathe/train/run_folder.h"
#include "lathe/train/step_beacon.h"

namespace lathe::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::atomic<bool> user_stop{false};  // SIGINT / SIGTERM to the supervisor
extern "C" void on_launch_signal(int) { user_stop.store(true); }

std::string seconds_text(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f s", s);
  return buf;
}

// "localhost:2 node2:1"
std::string hosts_text(const std::vector<dist::HostSlots>& hosts) {
  std::string out;
  for (const dist::HostSlots& h : hosts) out += str_cat(out.empty() ? "" : " ", h.host, ":", h.slots);
  return out;
}

double unix_now() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

struct LaunchOptions {
  int min_world = 1, max_world = 1;
  std::string hostfile;       // "": this machine, max_world slots
  int max_restarts = 3;       // restarts after failures (growing back is not a failure)
  double rdzv_timeout = 60;   // seconds to wait for min_world slots before giving up
  std::vector<std::string> mpirun_args;
  std::string command;                 // pretrain | sft | dpo | distill | grpo
  int64_t group = 1;                   // sequences a rank keeps together: GRPO's num_generations
  int64_t steps_per_accum = 0;         // GRPO: grpo.steps_per_generation / data.grad_accum when the recipe sets it
  std::string recipe;
  std::vector<std::string> overrides;  // key=value, the user's
  std::vector<std::string> switches;   // the command's own (--no-samples), passed on
  std::string first_mode;              // "", "--resume" or "--overwrite": the first attempt's only
};

// The slots offered now: the hostfile's hosts that answer (ssh for a remote one), or this machine.
std::vector<dist::HostSlots> available_hosts(const LaunchOptions& o, std::string* dropped) {
  if (o.hostfile.empty()) return {{"localhost", o.max_world}};
  std::vector<dist::HostSlots> hosts;
  for (const dist::HostSlots& h : dist::read_hostfile(o.hostfile)) {
    const std::string probe = "ssh -o BatchMode=yes -o ConnectTimeout=5 " + h.host + " true >/dev/null 2>&1";
    if (dist::is_local_host(h.host) || std::system(probe.c_str()) == 0) hosts.push_back(h);
    else if (dropped) *dropped += (dropped->empty() ? "" : ", ") + h.host;
  }
  return hosts;
}

// The steps the job reports through its beacon file (train/step_beacon.h), read as they come.
class BeaconReader {
 public:
  explicit BeaconReader(std::string path) : path_(std::move(path)) {}
  // New complete lines since the last call.
  std::vector<train::BeaconLine> read_new() {
    std::vector<train::BeaconLine> out;
    std::ifstream f(path_);
    if (!f) return out;
    f.seekg(offset_);
    std::string line;
    while (std::getline(f, line) && !f.eof()) {  // a line without its newline is still being written
      offset_ += static_cast<std::streamoff>(line.size() + 1);
      train::BeaconLine b;
      if (train::parse_beacon_line(line, b)) out.push_back(b);
    }
    return out;
  }

 private:
  std::string path_;
  std::streamoff offset_ = 0;
};

// A restart on its way: written to restarts.jsonl once the new attempt finishes its first step.
struct PendingRestart {
  json entry;
  double last_step_time = 0, detected_time = 0;
};

class Supervisor {
 public:
  Supervisor(LaunchOptions o, train::TrainConfig cfg)
      : o_(std::move(o)), cfg_(std::move(cfg)), dir_((fs::path(cfg_.run_dir) / "elastic").string()),
        beacon_(dir_ + "/steps") {}
  int run();

 private:
  int choose_world(std::vector<dist::HostSlots>& hosts);
  std::vector<std::string> attempt_argv(int world, const train::BatchSplit& split, bool first);
  void log_restart(PendingRestart& p, std::optional<double> first_step_time, const dist::JobReport& rep);
  void say(const std::string& m) {
    std::fprintf(stderr, "launch: %s\n", m.c_str());
    std::fflush(stderr);
  }

  LaunchOptions o_;
  train::TrainConfig cfg_;
  std::string dir_;  // <run>/elastic: the attempt's hostfile, the beacon, the restart log
  BeaconReader beacon_;
  int64_t last_step_ = 0;  // the newest step any attempt finished
  double last_step_time_ = 0;
};

// The largest world size in [MIN, MAX] the available slots allow and the global batch can be split over,
// waiting up to --rdzv-timeout for it; hosts: the slots it runs on.
int Supervisor::choose_world(std::vector<dist::HostSlots>& hosts) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(o_.rdzv_timeout);
  for (bool said = false;; said = true) {
    std::string dropped;
    hosts = available_hosts(o_, &dropped);
    const int slots = dist::total_slots(hosts);
    const int world =
        train::elastic_world_size(cfg_.batch_size, cfg_.grad_accum, o_.min_world, o_.max_world, slots, o_.group);
    if (world > 0) {
      hosts = dist::take_slots(hosts, world);
      return world;
    }
    const std::string why = str_cat(slots, " slots available", dropped.empty() ? "" : " (unreachable: " + dropped + ")",
                                    ", need ", o_.min_world, " to ", o_.max_world, " ranks that divide the global batch of ",
                                    cfg_.batch_size * cfg_.grad_accum, " sequences",
                                    o_.group > 1 ? str_cat(" in whole groups of ", o_.group) : "");
    if (std::chrono::steady_clock::now() >= deadline || user_stop.load())
      throw Error(str_cat("launch: ", why, "; gave up after --rdzv-timeout ", o_.rdzv_timeout, " s"));
    if (!said) say(why + "; waiting (re-reading " + (o_.hostfile.empty() ? "nothing" : o_.hostfile) + ")");
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

std::vector<std::string> Supervisor::attempt_argv(int world, const train::BatchSplit& split, bool first) {
  std::vector<std::string> a = {"mpirun", "-np", std::to_string(world), "--hostfile", dir_ + "/hostfile",
                                "-x", train::kStepBeaconEnv, "-x", "LATHE_LAUNCH_NOTE"};
  a.insert(a.end(), o_.mpirun_args.begin(), o_.mpirun_args.end());
  a.push_back(fs::read_symlink("/proc/self/exe").string());
  a.push_back(o_.command);
  a.push_back(o_.recipe);
  a.insert(a.end(), o_.overrides.begin(), o_.overrides.end());
  // After the user's overrides, so these win: the global batch split over this attempt's ranks.
  a.push_back(str_cat("data.batch_size=", split.batch_size));
  a.push_back(str_cat("data.grad_accum=", split.grad_accum));
  a.push_back(str_cat("eval.batches=", split.eval_batches));
  // A GRPO generation batch spans the same number of optimizer steps: its micro-batches scale with grad_accum.
  if (o_.steps_per_accum > 0) a.push_back(str_cat("grpo.steps_per_generation=", o_.steps_per_accum * split.grad_accum));
  a.insert(a.end(), o_.switches.begin(), o_.switches.end());
  if (!first) a.push_back("--resume");
  else if (!o_.first_mode.empty()) a.push_back(o_.first_mode);
  return a;
}

// down_s: from the last step finished before the failure to the first step after it (what the job lost
// in wall time, the time to notice included); relaunch_s: from noticing (mpirun ended) to that step.
void Supervisor::log_restart(PendingRestart& p, std::optional<double> first_step_time, const dist::JobReport& rep) {
  json& e = p.entry;
  e["checkpoint"] = rep.resumed_from;  // "": none (the job started again from step 0)
  e["resumed_step"] = std::max<int64_t>(0, rep.resumed_step);
  e["steps_redone"] = e["at_step"].get<int64_t>() - 1 - e["resumed_step"].get<int64_t>();
  if (first_step_time) {
    e["down_s"] = *first_step_time - p.last_step_time;
    e["relaunch_s"] = *first_step_time - p.detected_time;
    say(str_cat("restart ", e.value("restart", 0), ": back at step ", e["resumed_step"].get<int64_t>() + 1, " after ",
                seconds_text(*first_step_time - p.last_step_time), " down (",
                seconds_text(*first_step_time - p.detected_time), " from noticing the failure)"));
  } else {
    e["down_s"] = nullptr;  // the attempt ended before its first step
  }
  std::ofstream f(dir_ + "/restarts.jsonl", std::ios::app);
  f << e.dump() << "\n";
  if (!f) say("warning: " + dir_ + "/restarts.jsonl could not be written");
}

int Supervisor::run() {
  fs::create_directories(dir_);
  // A new run forgets an earlier run's attempts; a folder that holds a run without --overwrite is left
  // alone (the trainer refuses it).
  if (o_.first_mode == "--overwrite" || (o_.first_mode.empty() && train::earlier_run_contents(cfg_.run_dir).empty())) {
    fs::remove(dir_ + "/steps");
    fs::remove(dir_ + "/restarts.jsonl");
  }
  ::setenv(train::kStepBeaconEnv, (dir_ + "/steps").c_str(), 1);
  (void)beacon_.read_new();  // a resumed run: start after the steps already there
  if (cfg_.checkpoint_every == 0)
    say("warning: checkpoint.every is 0: a restart goes back to the last checkpoint written by a stop, or to step 0");

  int restarts = 0, world = 0;
  int64_t last_failure_step = -1;
  std::optional<PendingRestart> pending;
  for (int attempt = 1;; ++attempt) {
    std::vector<dist::HostSlots> hosts;
    world = choose_world(hosts);
    const auto split =
        train::split_global_batch(cfg_.batch_size, cfg_.grad_accum, cfg_.eval_batches, o_.max_world, world, o_.group);
    LATHE_ASSERT(split.has_value(), "choose_world returned a world size that does not divide the batch");
    write_file_atomic(dir_ + "/hostfile", dist::format_hostfile(hosts));
    const std::string note = str_cat("attempt ", attempt, ", ", world, "/", o_.max_world, " ranks", restarts ? str_cat(", ", restarts, " restarts") : "");
    ::setenv("LATHE_LAUNCH_NOTE", note.c_str(), 1);
    say(str_cat("attempt ", attempt, " on ", world, " rank", world > 1 ? "s" : "", " (", hosts_text(hosts),
                "): data.batch_size=", split->batch_size, " data.grad_accum=", split->grad_accum, " (global batch ",
                split->batch_size * split->grad_accum, " sequences)",
                split->eval_kept ? "" : "; eval.batches rounded up: the validation set is a little larger"));
    if (pending) {
      pending->entry["ranks_after"] = world;
      pending->entry["hosts"] = hosts_text(hosts);
      pending->entry["batch_size"] = split->batch_size;
      pending->entry["grad_accum"] = split->grad_accum;
    }

    LaunchedJob job(attempt_argv(world, *split, attempt == 1));
    bool stop_sent = false, grow = false;
    std::optional<double> first_step_time;
    auto next_host_check = std::chrono::steady_clock::now();
    while (!job.poll(100)) {
      for (const train::BeaconLine& b : beacon_.read_new()) {
        if (!first_step_time) first_step_time = b.unix_time;
        last_step_ = b.step;
        last_step_time_ = b.unix_time;
      }
      if (pending && first_step_time) {
        log_restart(*pending, first_step_time, job.report());
        pending.reset();
      }
      if (user_stop.load() && !stop_sent) {
        say("stopping the job at the end of its step (with a checkpoint)");
        job.request_stop();
        stop_sent = true;
      }
      // Grow back: more slots than ranks, and the batch splits over more of them.
      // (After the attempt's first step: until the ranks install their handler, SIGUSR1 would kill them.)
      if (!stop_sent && first_step_time && world < o_.max_world && !o_.hostfile.empty() &&
          std::chrono::steady_clock::now() >= next_host_check) {
        next_host_check = std::chrono::steady_clock::now() + std::chrono::seconds(1);
        try {
          const auto listed = dist::read_hostfile(o_.hostfile);
          if (train::elastic_world_size(cfg_.batch_size, cfg_.grad_accum, o_.min_world, o_.max_world,
                                        dist::total_slots(listed), o_.group) > world &&
              train::elastic_world_size(cfg_.batch_size, cfg_.grad_accum, o_.min_world, o_.max_world,
                                        dist::total_slots(available_hosts(o_, nullptr)), o_.group) > world) {
            say(str_cat("more slots in ", o_.hostfile, ": stopping at the end of step ", last_step_ + 1,
                        " (a checkpoint) to grow from ", world, " ranks"));
            job.request_stop();
            stop_sent = grow = true;
          }
        } catch (const Error&) {
          // A hostfile being edited may be malformed for a moment: read it again at the next check.
        }
      }
    }
    const double detected = unix_now();
    // mpirun's exit, but a rank on this machine may outlive it: nothing of this attempt may survive.
    job.kill_group();
    for (const train::BeaconLine& b : beacon_.read_new()) {
      if (!first_step_time) first_step_time = b.unix_time;
      last_step_ = b.step;
      last_step_time_ = b.unix_time;
    }
    const dist::JobReport& rep = job.report();
    if (pending) {  // the attempt ended before (or right at) its first step
      log_restart(*pending, first_step_time, rep);
      pending.reset();
    }
    if (job.exit_code() == 0) {
      say(str_cat("done after ", attempt, " attempt", attempt > 1 ? "s" : "", " (", restarts, " restart",
                  restarts == 1 ? "" : "s", " after failures); log: ", dir_, "/restarts.jsonl"));
      return 0;
    }
    if (user_stop.load()) return 130;
    // The step being trained when the job ended: after the last one it finished, or after the checkpoint
    // it resumed from when it finished none.
    const int64_t fail_step = (first_step_time || rep.resumed_step < 0 ? last_step_ : rep.resumed_step) + 1;
    if (grow) {
      pending = PendingRestart{.entry = {{"restart", restarts},     {"attempt", attempt + 1}, {"reason", "grow"},
                                         {"at_step", fail_step},    {"ranks_before", world}},
                               .last_step_time = last_step_time_, .detected_time = detected};
      continue;
    }
    const std::string cause =
        rep.failure.empty() ? str_cat("mpirun exited with status ", job.exit_code()) : rep.failure;
    if (restarts >= o_.max_restarts) {
      say(str_cat("the job failed during step ", fail_step, ": ", cause));
      throw Error(str_cat("launch: giving up: --max-restarts ", o_.max_restarts, " reached (last failure during step ",
                          fail_step, ": ", cause, "); continue by hand with `lathe launch ... -- ", o_.command,
                          " ... --resume` once the cause is fixed"));
    }
    if (fail_step == last_failure_step)
      throw Error(str_cat("launch: the job failed twice during step ", fail_step, " (", cause,
                          "); not restarting: a failure that repeats at the same step is not a lost machine "
                          "(a bad batch or a diverging run?). Fix the cause and resume with --resume"));
    last_failure_step = fail_step;
    ++restarts;
    say(str_cat("restart ", restarts, "/", o_.max_restarts, ": the job failed during step ", fail_step, ": ", cause));
    json ranks = rep.failed_ranks;
    pending = PendingRestart{.entry = {{"restart", restarts},  {"attempt", attempt + 1},  {"reason", cause},
                                       {"failed_ranks", ranks}, {"at_step", fail_step},   {"ranks_before", world},
                                       {"exit_code", job.exit_code()}},
                             .last_step_time = last_step_time_, .detected_time = detected};
  }
}

}  // namespace

const CommandSpec& launch_spec() {
  static const CommandSpec spec{
      .name = "launch",
      .usage = "--nproc MIN:MAX [options] -- pretrain|sft|dpo|distill|grpo RECIPE.yaml [key=value ...]",
      .brief = "elastic data-parallel training over mpirun: restarts on failure, shrinks and grows",
      .summary =
          "Runs the training command under mpirun on up to MAX ranks (the hostfile's slots; this machine without\n"
          "one). When a rank dies, or a collective times out (run.collective_timeout) because one stopped, the job\n"
          "is relaunched with --resume on the ranks still available (at least MIN), data.batch_size and\n"
          "data.grad_accum split so the global batch stays the same (GRPO: in whole groups of\n"
          "grpo.num_generations per rank). When the hostfile offers more slots again the job stops at the end\n"
          "of its step (with a checkpoint) and grows back. Each restart is logged to\n"
          "run.dir/elastic/restarts.jsonl. docs/multi-node.md.\n",
      .options = {
          {"--nproc", "MIN:MAX", "ranks: at least MIN, at most MAX (N = N:N)"},
          {"--hostfile", "FILE", "OpenMPI hostfile (HOST slots=N per line), re-read before every attempt and every second"},
          {"--max-restarts", "K", "restarts after failures before giving up (default 3; growing back does not count)"},
          {"--rdzv-timeout", "S", "seconds to wait for MIN slots before giving up (default 60)"},
          {"--mpirun-arg", "ARG", "one more argument for mpirun (e.g. -x NAME: pass a variable to remote ranks)", true},
      }};
  return spec;
}

int cmd_launch(int argc, char** argv) {
  int sep = 2;
  while (sep < argc && std::string(argv[sep]) != "--") ++sep;
  const Args a = Args::parse(sep, argv, 2, launch_spec());
  if (a.help() || sep >= argc - 1) {
    std::fputs(help_text(launch_spec()).c_str(), stderr);
    return a.help() ? 0 : 2;
  }
  LATHE_CHECK_ARG(a.positional.empty(), "launch: '", a.positional.empty() ? "" : a.positional[0],
                  "': the training command goes after --");
  LaunchOptions o;
  const std::string nproc = a.str("--nproc", "");
  LATHE_CHECK_ARG(!nproc.empty(), "launch: --nproc MIN:MAX is required");
  {
    const size_t colon = nproc.find(':');
    size_t used = 0;
    try {
      o.min_world = std::stoi(nproc, &used);
      o.max_world = colon == std::string::npos ? o.min_world : std::stoi(nproc.substr(colon + 1), &used);
    } catch (const std::exception&) {
      used = 0;
    }
    const size_t want = colon == std::string::npos ? nproc.size() : nproc.size() - colon - 1;
    LATHE_CHECK_ARG(used == want && used > 0 && o.min_world >= 1 && o.max_world >= o.min_world, "launch: --nproc '",
                    nproc, "': expected MIN:MAX with 1 <= MIN <= MAX (or N)");
  }
  o.hostfile = a.str("--hostfile", "");
  o.max_restarts = static_cast<int>(a.integer("--max-restarts", 3, 0, 1000));
  o.rdzv_timeout = a.number("--rdzv-timeout", 60, {.min = 0});
  o.mpirun_args = a.all("--mpirun-arg");
  o.command = argv[sep + 1];
  LATHE_CHECK_ARG(o.command == "pretrain" || o.command == "sft" || o.command == "dpo" || o.command == "distill" ||
                      o.command == "grpo",
                  "launch: '", o.command, "' after --: expected pretrain, sft, dpo, distill or grpo");
  for (int i = sep + 2; i < argc; ++i) {
    const std::string s = argv[i];
    if (s == "--resume" || s == "--overwrite") {
      LATHE_CHECK_ARG(o.first_mode.empty() || o.first_mode == s, "launch: give one of --resume and --overwrite");
      o.first_mode = s;
    } else if (s.rfind("--", 0) == 0) {
      o.switches.push_back(s);
    } else if (s.find('=') != std::string::npos) {
      o.overrides.push_back(s);
    } else {
      LATHE_CHECK_ARG(o.recipe.empty(), "launch: more than one recipe given ('", o.recipe, "' and '", s, "')");
      o.recipe = s;
    }
  }
  LATHE_CHECK_ARG(!o.recipe.empty(), "launch: no recipe after `-- ", o.command, "`");
  train::TrainConfig cfg = train::load_recipe(o.recipe, o.overrides);
  if (o.command == "grpo") {
    train::TrainConfig resolved = cfg;
    const posttrain::GrpoOptions g = posttrain::grpo_options(resolved);  // a bad grpo: section fails now
    o.group = g.num_generations;
    if (cfg.grpo.contains("steps_per_generation")) {
      LATHE_CHECK_ARG(g.steps_per_generation % g.grad_accum == 0, "launch: grpo.steps_per_generation ",
                      g.steps_per_generation, " must be a multiple of data.grad_accum ", g.grad_accum);
      o.steps_per_accum = g.steps_per_generation / g.grad_accum;
    }
  }
  if (!o.hostfile.empty()) (void)dist::read_hostfile(o.hostfile);  // a malformed file fails now, not at a restart
  std::signal(SIGINT, on_launch_signal);
  std::signal(SIGTERM, on_launch_signal);
  std::printf("lathe launch: %s %s on %d to %d ranks -> %s\n", o.command.c_str(), o.recipe.c_str(), o.min_world,
              o.max_world, cfg.run_dir.c_str());
  std::fflush(stdout);
  return Supervisor(std::move(o), std::move(cfg)).run();
}

}  // namespace lathe::cli
