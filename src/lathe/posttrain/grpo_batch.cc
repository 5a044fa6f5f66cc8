#include "lathe/posttrain/grpo_batch.h"

#include "lathe/base/error.h"

namespace lathe::posttrain {

GrpoBatch make_grpo_batch(std::span<const Trajectory> trajectories) {
  GrpoBatch b;
  b.offsets.push_back(0);
  for (size_t i = 0; i < trajectories.size(); ++i) {
    const Trajectory& tr = trajectories[i];
    LATHE_CHECK_ARG(!tr.prompt.empty(), "[make_grpo_batch] trajectory ", i, " has an empty prompt");
    LATHE_CHECK_ARG(tr.loss_mask.empty() || tr.loss_mask.size() == tr.completion.size(), "[make_grpo_batch] trajectory ",
                    i, " has ", tr.loss_mask.size(), " loss-mask entries for ", tr.completion.size(), " completion tokens");
    const auto start = static_cast<int32_t>(b.tokens.size());
    const auto p = static_cast<int32_t>(tr.prompt.size());
    int32_t pos = 0;
    for (int32_t t : tr.prompt) b.tokens.push_back(t), b.positions.push_back(pos++);
    for (int32_t t : tr.completion) b.tokens.push_back(t), b.positions.push_back(pos++);
    // Row P−1+j (the prompt's last token, then each completion token) predicts completion token j.
    for (size_t j = 0; j < tr.completion.size(); ++j) {
      b.output_rows.push_back(start + p - 1 + static_cast<int32_t>(j));
      b.targets.push_back(tr.completion[j]);
      b.loss_mask.push_back(tr.loss_mask.empty() ? 1 : tr.loss_mask[j]);
    }
    b.offsets.push_back(static_cast<int64_t>(b.targets.size()));
  }
  return b;
}

ForwardBatch GrpoBatch::forward_batch() const {
  ForwardBatch fb = ForwardBatch::packed(tokens, positions);
  fb.output_rows = Tensor::from_data_i32({static_cast<int64_t>(output_rows.size())}, output_rows);
  return fb;
}

}  // namespace lathe::posttrain
