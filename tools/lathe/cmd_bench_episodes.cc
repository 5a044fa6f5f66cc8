// lathe bench episodes: how much a slow tool slows multi-turn RL rollouts (rollout/episode_rollout.h). Runs
// the same episodes twice on one model, with an instant tool and with one that answers after --delay-ms, and
// prints both wall times and their ratio: with environment calls off the engine's thread, the slow run costs
// about the critical path (turns × delay) more, not episodes × turns × delay. The workload is synthetic
// (FixedTurnCodec: every turn is a tool call after --turn-tokens tokens), so any model folder works.
#include <cstdio>
#include <string>
#include <vector>

#include "args.h"
#include "lathe/base/context.h"
#include "lathe/models/model.h"
#include "lathe/rollout/episode_rollout.h"

namespace lathe::cli {

const CommandSpec& bench_episodes_spec() {
  static const CommandSpec spec{
      .name = "bench episodes",
      .usage = "MODEL_DIR [options]",
      .brief = "time multi-turn tool episodes with an instant tool and a slow one (the overlap of tool waits)",
      .summary =
          "Generates --episodes episodes (--group per prompt) of --turns turns on MODEL_DIR with the engine, each\n"
          "turn a tool call after --turn-tokens sampled tokens answered by the built-in echo environment: once\n"
          "instantly, once after --delay-ms. Prints both wall times, their ratio, and the time the tool calls\n"
          "would take one after another. A warm-up run first (the KV pool, the kernels).\n",
      .options = {
          {"--episodes", "N", "episodes (default 16)"},
          {"--group", "G", "episodes per prompt (default 4)"},
          {"--turns", "T", "model turns per episode (default 3: 2 answered calls)"},
          {"--turn-tokens", "K", "tokens per model turn (default 32)"},
          {"--delay-ms", "MS", "the slow tool's delay (default 200)"},
          {"--prompt-tokens", "P", "prompt length (default 64)"},
          {"--threads", "N", "threads (default: LATHE_NUM_THREADS, else all cores)"},
      }};
  return spec;
}

int cmd_bench_episodes(int argc, char** argv) {
  const Args a = Args::parse(argc, argv, 3, bench_episodes_spec());
  if (a.help() || a.positional.size() != 1) {
    std::fputs(help_text(bench_episodes_spec()).c_str(), stderr);
    return a.help() ? 0 : 2;
  }
  const int64_t episodes = a.integer("--episodes", 16, 1, 4096), group = a.integer("--group", 4, 1, 4096);
  const int64_t turns = a.integer("--turns", 3, 1, 1000), turn_tokens = a.integer("--turn-tokens", 32, 1, 100000);
  const int64_t delay = a.integer("--delay-ms", 200, 0, 600000), prompt_len = a.integer("--prompt-tokens", 64, 1, 100000);
  LATHE_CHECK_ARG(episodes % group == 0, "--episodes ", episodes, " must be a multiple of --group ", group);
  Context ctx(a.threads());
  ContextScope scope(ctx);
  const auto model = Model::load(a.positional[0]);
  const int64_t vocab = model->config().vocab_size;
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t p = 0; p < episodes / group; ++p) {
    std::vector<int32_t> ids;
    for (int64_t i = 0; i < prompt_len; ++i) ids.push_back(static_cast<int32_t>((p * 7919 + i * 104729) % vocab));
    prompts.push_back(ids);
  }
  const auto codec = std::make_shared<rollout::FixedTurnCodec>(turn_tokens, vocab);
  // The echo answers with the turn's ids as text, one token per byte: at most 7 per model token (6 digits and
  // a space), so no episode is cut short.
  const int64_t budget = turns * turn_tokens * 8;
  const auto run = [&](int64_t delay_ms) {
    rollout::EnvironmentSpec env{.builtin = "echo", .delay_ms = delay_ms, .max_turns = turns, .workers = episodes};
    rollout::EpisodeRolloutOptions o{
        .engine = {.max_completion_length = budget, .seed = 1}, .max_turns = turns, .workers = episodes};
    o.engine.sampling.ignore_eos = true;
    rollout::EpisodeRollout src(prompts, {"none"}, [](int64_t, std::span<const posttrain::Trajectory> group) {
      return std::vector<std::vector<double>>(group.size(), std::vector<double>{0});
    }, rollout::make_environment(env), codec, o);
    src.generate(*model, 0, episodes / group, group);
    return src.last_stats();
  };
  run(0);  // warm-up
  const rollout::EpisodeStats instant = run(0), slow = run(delay);
  std::printf("episodes %lld (group %lld), turns %lld of %lld tokens, %lld tool calls, %lld observation tokens\n",
              static_cast<long long>(episodes), static_cast<long long>(group), static_cast<long long>(turns),
              static_cast<long long>(turn_tokens), static_cast<long long>(slow.tool_calls),
              static_cast<long long>(slow.observation_tokens));
  const double answered = static_cast<double>(episodes * (turns - 1));
  std::printf("instant tool: %.3f s\n%lld ms tool: %.3f s\nratio: %.2f (one call after another would add %.1f s)\n",
              instant.seconds, static_cast<long long>(delay), slow.seconds, slow.seconds / instant.seconds,
              answered * static_cast<double>(delay) / 1000.0);
  return 0;
}

}  // namespace lathe::cli
