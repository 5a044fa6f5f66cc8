#include "lathe/posttrain/distill_cache.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "lathe/autograd/node.h"
#include "lathe/base/context.h"
#include "lathe/base/error.h"
#include "lathe/dist/communicator.h"
#include "lathe/posttrain/distill_objective.h"
#include "lathe/posttrain/teacher_cache.h"
#include "lathe/train/run_start.h"

namespace lathe::posttrain {

DistillCacheResult write_distill_cache(train::TrainConfig cfg, const std::string& out,
                                       const std::function<void(const std::string&)>& note) {
  const std::string where = cfg.recipe_path.empty() ? "recipe" : cfg.recipe_path;
  const DistillOptions o = distill_options(cfg);
  LATHE_CHECK_ARG(!o.teacher.empty(), where, ": distill-cache runs distill.teacher, and this recipe names"
                  " distill.teacher_logits instead (override it: distill.teacher=DIR distill.teacher_logits=null)");
  const int64_t k = o.loss.top_k;
  LATHE_CHECK_ARG(k > 0, where, ": distill-cache needs distill.top_k > 0 (the logits kept per position)");
  Context ctx(resolve_thread_count(cfg.threads));
  ContextScope scope(ctx);
  // The data exactly as training reads it (the student's encoder, masks and rows): the student gives its config,
  // vocabulary and stop tokens; its weights are not used (a checkpoint is mapped in place).
  const std::unique_ptr<Model> student = cfg.model_base.empty() ? train::open_model(cfg, std::nullopt)
                                                                 : Model::load(cfg.model_base, {.map_in_place = true});
  const std::unique_ptr<dist::Communicator> one = dist::make_single_process();
  SftObjective data(o.sft, 1);
  data.start({.model = *student, .comm = *one, .forward = {}, .note = note});
  const std::vector<SftRow> sources = source_rows(data.train_rows());
  const std::unique_ptr<Model> teacher = Model::load(o.teacher);
  check_teacher_vocab(*student, *teacher, o.teacher);
  const int64_t V = teacher->config().vocab_size;
  LATHE_CHECK_ARG(k <= V, where, ": distill.top_k ", k, " exceeds the vocabulary (", V, " tokens)");
  TeacherCacheInfo info{.k = k, .vocab_size = V, .n_sources = static_cast<int64_t>(sources.size()),
                        .data_fingerprint = teacher_cache_fingerprint(sources)};
  for (const SftRow& s : sources) info.n_rows += s.n_targets;
  if (const auto dir = std::filesystem::path(out).parent_path(); !dir.empty()) std::filesystem::create_directories(dir);
  note(str_cat("teacher: ", o.teacher, " over ", sources.size(), " sequences; top-", k, " logits of ", info.n_rows,
               " trained positions -> ", out));
  write_teacher_cache(out, info, [&](const TeacherCacheRowFn& put) {
    NoGradGuard no_grad;
    const auto per_batch = static_cast<size_t>(std::max<int64_t>(1, o.sft.batch_size));
    std::vector<int32_t> ids(static_cast<size_t>(k));
    std::vector<float> top(static_cast<size_t>(k));
    for (size_t s0 = 0; s0 < sources.size(); s0 += per_batch) {
      SftBatch b;
      for (size_t s = s0; s < std::min(sources.size(), s0 + per_batch); ++s) b.append(sources[s]);
      if (b.n_targets == 0) continue;
      const Tensor h = teacher->hidden(b.forward_batch());  // [N, C_teacher]
      const auto n = static_cast<int64_t>(b.targets.size());
      for (int64_t r0 = 0; r0 < n; r0 += o.loss.chunk_rows) {
        const int64_t r = std::min(o.loss.chunk_rows, n - r0);
        const Tensor z = teacher_head(*teacher, h.slice(0, r0, r0 + r));  // [r, V]
        const float* zp = z.data<float>();
        for (int64_t i = 0; i < r; ++i) {
          if (b.targets[static_cast<size_t>(r0 + i)] == -100) continue;
          teacher_top_k(zp + i * V, V, k, ids.data(), top.data());
          put(ids.data(), top.data());
        }
      }
    }
  });
  return {.n_sources = info.n_sources, .n_rows = info.n_rows, .k = k,
          .bytes = static_cast<int64_t>(std::filesystem::file_size(out))};
}

}  // namespace lathe::posttrain
