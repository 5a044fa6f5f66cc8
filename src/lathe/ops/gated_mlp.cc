// gated_activation front and gradient rule (kernels from activation.cc), and the gated_mlp composition.
#include "lathe/ops/gated_mlp.h"

#include "lathe/autograd/node.h"
#include "lathe/ops/linear.h"

namespace lathe {

Tensor gated_activation(const Tensor& gate_in, const Tensor& up_in, Activation kind) {
  LATHE_CHECK_ARG(gate_in.defined() && up_in.defined() && gate_in.dtype() == DType::kF32 &&
                      up_in.dtype() == DType::kF32,
                  "[gated_activation] gate and up must be f32");
  LATHE_CHECK_ARG(gate_in.shape() == up_in.shape(), "[gated_activation] gate ", shape_str(gate_in.shape()),
                  " and up ", shape_str(up_in.shape()), " must have one shape");
  LATHE_CHECK_ARG(kind < Activation::kCount, "[gated_activation] bad kind ", static_cast<int>(kind));
  const Tensor gate = gate_in.contiguous(), up = up_in.contiguous();
  Tensor y = Tensor::empty(gate.shape());
  // act(gate) is rounded to f32 before the product, as HF's act_fn(gate_proj(x)) * up_proj(x).
  activation_forward(kind, gate.data<float>(), up.data<float>(), y.data<float>(), gate.numel());
  if (needs_grad({&gate_in, &up_in})) {
    const bool want_gate = gate_in.requires_grad(), want_up = up_in.requires_grad();
    Tensor gs = gate.detach(), us = up.detach();
    record(y, "gated_activation", {gate_in, up_in}, [=](const Tensor& g_in) -> std::vector<Tensor> {
      const Tensor g = g_in.contiguous();
      // The kernel always writes dgate; with a frozen gate and a trainable up it is computed and dropped.
      Tensor dgate = Tensor::empty(gs.shape()), dup = want_up ? Tensor::empty(us.shape()) : Tensor();
      activation_backward(kind, gs.data<float>(), us.data<float>(), g.data<float>(), dgate.data<float>(),
                          want_up ? dup.data<float>() : nullptr, gs.numel());
      return {want_gate ? dgate : Tensor(), dup};
    });
  }
  return y;
}

Tensor gated_mlp(const Tensor& x, const Tensor& w_gate, const Tensor& w_up, const Tensor& w_down, Activation kind) {
  LATHE_CHECK_ARG(w_gate.defined() && w_up.defined() && w_gate.shape() == w_up.shape(),
                  "[gated_mlp] w_gate and w_up must both be [F, C]");
  return linear(gated_activation(linear(x, w_gate), linear(x, w_up), kind), w_down);
}

}  // namespace lathe
