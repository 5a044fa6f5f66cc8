#include "lathe/train/zero.h"

#include <algorithm>
#include <functional>

#include "lathe/base/error.h"

namespace lathe::train {

namespace {

// Elements per all-gather: the buffer stays bounded (16 M floats = 64 MiB) instead of a copy of the model.
constexpr int64_t kGatherChunk = int64_t{1} << 24;

int64_t total_elements(const std::vector<OptimParam>& params) {
  int64_t n = 0;
  for (const OptimParam& p : params) n += p.value.numel();
  return n;
}

// Calls fn(i, first, count, at) for each piece of parameter i inside flat elements [begin, end): its
// elements [first, first + count), which sit at position `at` of the range.
void for_each_piece(const std::vector<OptimParam>& params, int64_t begin, int64_t end,
                    const std::function<void(size_t i, int64_t first, int64_t count, int64_t at)>& fn) {
  int64_t offset = 0;
  for (size_t i = 0; i < params.size() && offset < end; ++i) {
    const int64_t n = params[i].value.numel();
    const int64_t b = std::max(begin, offset), e = std::min(end, offset + n);
    if (b < e) fn(i, b - offset, e - b, b - begin);
    offset += n;
  }
}

// All-gathers the flat concatenation chunk by chunk. pack(begin, end, dst) writes this rank's elements
// [begin, end) to dst; unpack(begin, end, src) receives every rank's elements [begin, end).
void all_gather_flat(const AdamW& opt, dist::Communicator& comm,
                     const std::function<void(int64_t, int64_t, float*)>& pack,
                     const std::function<void(int64_t, int64_t, const float*)>& unpack) {
  const int64_t total = total_elements(opt.params());
  const int world = comm.size();
  std::vector<ElementRange> owned(world);
  for (int r = 0; r < world; ++r) owned[r] = zero_owned_range(opt.params(), r, world);
  std::vector<float> buf(std::min(total, kGatherChunk));
  std::vector<int64_t> counts(world);
  for (int64_t cb = 0; cb < total; cb += kGatherChunk) {
    const int64_t ce = std::min(total, cb + kGatherChunk);
    // The ranges are adjacent and ascending, so rank r's block starts at max(cb, owned[r].begin) - cb.
    for (int r = 0; r < world; ++r)
      counts[r] = std::max<int64_t>(0, std::min(ce, owned[r].end) - std::max(cb, owned[r].begin));
    const ElementRange mine = owned[comm.rank()];
    if (counts[comm.rank()] > 0)
      pack(std::max(cb, mine.begin), std::min(ce, mine.end), buf.data() + (std::max(cb, mine.begin) - cb));
    comm.all_gather(buf.data(), counts);
    unpack(cb, ce, buf.data());
  }
}

}  // namespace

ElementRange zero_owned_range(const std::vector<OptimParam>& params, int rank, int world) {
  const int64_t n = total_elements(params);
  return {n * rank / world, n * (rank + 1) / world};
}

void zero_all_gather_params(const AdamW& opt, dist::Communicator& comm) {
  const auto& params = opt.params();
  all_gather_flat(
      opt, comm,
      [&](int64_t b, int64_t e, float* dst) {
        for_each_piece(params, b, e, [&](size_t i, int64_t first, int64_t count, int64_t at) {
          const float* src = params[i].value.data<float>() + first;
          std::copy(src, src + count, dst + at);
        });
      },
      [&](int64_t b, int64_t e, const float* src) {
        for_each_piece(params, b, e, [&](size_t i, int64_t first, int64_t count, int64_t at) {
          std::copy(src + at, src + at + count, params[i].value.data<float>() + first);
        });
      });
}

std::optional<AdamW> zero_gather_state(const AdamW& opt, dist::Communicator& comm) {
  const auto& params = opt.params();
  std::optional<AdamW> whole;
  if (comm.rank() == 0) {
    whole.emplace(params, opt.config());
    whole->set_steps_done(opt.steps_done());
  }
  for (int which = 0; which < 2; ++which) {
    const std::vector<Tensor>& mine = which == 0 ? opt.exp_avg() : opt.exp_avg_sq();
    all_gather_flat(
        opt, comm,
        [&](int64_t b, int64_t e, float* dst) {
          for_each_piece(params, b, e, [&](size_t i, int64_t first, int64_t count, int64_t at) {
            // mine[i] holds the owned part of parameter i, from its element owned_part(i).first on.
            const float* src = mine[i].data<float>() + (first - opt.owned_part(i).first);
            std::copy(src, src + count, dst + at);
          });
        },
        [&](int64_t b, int64_t e, const float* src) {
          if (!whole) return;
          std::vector<Tensor>& out = which == 0 ? whole->exp_avg() : whole->exp_avg_sq();
          for_each_piece(params, b, e, [&](size_t i, int64_t first, int64_t count, int64_t at) {
            std::copy(src + at, src + at + count, out[i].data<float>() + first);
          });
        });
  }
  return whole;
}

}  // namespace lathe::train
