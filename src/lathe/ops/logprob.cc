// token_logprobs front and gradient rule (row kernels from cross_entropy.cc).
#include "lathe/ops/logprob.h"

#include "lathe/autograd/node.h"
#include "lathe/ops/cross_entropy.h"
#include "lathe/ops/parallel_rows.h"

namespace lathe {

Tensor token_logprobs(const Tensor& logits_in, const Tensor& ids_in) {
  LATHE_CHECK_ARG(logits_in.defined() && logits_in.dtype() == DType::kF32 && logits_in.dim() >= 1,
                  "[token_logprobs] logits must be f32 [..., V]");
  Shape lead = logits_in.shape();
  lead.pop_back();
  LATHE_CHECK_ARG(ids_in.defined() && ids_in.dtype() == DType::kI32 && ids_in.shape() == lead,
                  "[token_logprobs] ids must be i32 ", shape_str(lead), " to match logits ",
                  shape_str(logits_in.shape()), ", got ", ids_in.defined() ? shape_str(ids_in.shape()) : "undefined");
  const Tensor logits = logits_in.contiguous(), ids = ids_in.contiguous();
  const int64_t v = logits.size(-1), n = ids.numel();
  const int32_t* idp = ids.data<int32_t>();
  for (int64_t i = 0; i < n; ++i)
    LATHE_CHECK_ARG(idp[i] >= 0 && idp[i] < v, "[token_logprobs] id ", idp[i], " at position ", i,
                    " is out of range for a vocabulary of ", v);
  const float* x = logits.data<float>();
  Tensor out = Tensor::empty(lead);
  Tensor lse = Tensor::empty({n});  // [N], kept for backward
  float *op = out.data<float>(), *lsep = lse.data<float>();
  parallel_rows(n, v, [&](int64_t, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      lsep[i] = row_logsumexp(x + i * v, v);
      op[i] = x[i * v + idp[i]] - lsep[i];
    }
  });

  if (needs_grad({&logits_in})) {
    Tensor xs = logits.detach(), is = ids.detach();
    record(out, "token_logprobs", {logits_in}, [=](const Tensor& g_in) -> std::vector<Tensor> {
      // Gradient: dlogits[i] = −g_i·(softmax − onehot), i.e. the cross-entropy row rule with scale −g_i.
      const Tensor g = g_in.contiguous();
      Tensor dx = Tensor::empty(xs.shape());
      const float *xp = xs.data<float>(), *gp = g.data<float>(), *lp = lse.data<float>();
      const int32_t* ip = is.data<int32_t>();
      float* d = dx.data<float>();
      parallel_rows(n, v, [&](int64_t, int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) row_softmax_backward(xp + i * v, lp[i], -gp[i], ip[i], d + i * v, v);
      });
      return {dx};
    });
  }
  return out;
}

}  // namespace lathe
