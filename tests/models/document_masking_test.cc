// Packed rows with document masking: each document's hidden states equal those of the document run
// alone (positions restart, attention does not cross the boundary), for rotary, learned-position and
// sliding-window families.
#include <gtest/gtest.h>

#include <cmath>

#include "lathe/autograd/node.h"
#include "lathe/io/test_paths.h"
#include "lathe/models/model.h"
#include "fixture_model.h"

namespace lathe {
namespace {

TEST(DocumentMasking, PackedDocumentsEqualSeparateRuns) {
  for (const std::string family : {"llama", "gpt2", "gemma3", "qwen3_moe"}) {
    SCOPED_TRACE(family);
    auto m = testing::load_fixture_model_f32(family);
    NoGradGuard ng;
    const int64_t V = m->config().vocab_size;
    // One row: document A (5 tokens) then document B (7 tokens).
    std::vector<int32_t> a, b, row;
    for (int i = 0; i < 5; ++i) a.push_back(static_cast<int32_t>((i * 37 + 3) % V));
    for (int i = 0; i < 7; ++i) b.push_back(static_cast<int32_t>((i * 53 + 11) % V));
    row = a;
    row.insert(row.end(), b.begin(), b.end());
    std::vector<int32_t> pos;
    for (int i = 0; i < 12; ++i) pos.push_back(i < 5 ? i : i - 5);
    const Tensor packed = m->hidden(ForwardBatch::packed(row, pos));  // positions restart: two sequences
    const Tensor alone_a = m->hidden(ForwardBatch::rows(Tensor::from_data_i32({1, 5}, a)));
    const Tensor alone_b = m->hidden(ForwardBatch::rows(Tensor::from_data_i32({1, 7}, b)));
    const auto p = packed.to_vector(), va = alone_a.to_vector(), vb = alone_b.to_vector();
    const int64_t C = m->config().hidden;
    double worst = 0;
    for (int64_t i = 0; i < 5 * C; ++i) worst = std::max(worst, std::fabs(double(p[i]) - va[i]));
    for (int64_t i = 0; i < 7 * C; ++i) worst = std::max(worst, std::fabs(double(p[5 * C + i]) - vb[i]));
    EXPECT_LT(worst, 1e-5);
    // Without the layout, document B sees document A: different states (the test can fail).
    const Tensor unmasked = m->hidden(ForwardBatch::rows(Tensor::from_data_i32({1, 12}, row)));
    const auto u = unmasked.to_vector();
    double diff = 0;
    for (int64_t i = 0; i < 7 * C; ++i) diff = std::max(diff, std::fabs(double(u[5 * C + i]) - vb[i]));
    EXPECT_GT(diff, 1e-3);
  }
}

}  // namespace
}  // namespace lathe
