// Per-call run options of a forward (not part of the model's architecture, and never stored in it).
#pragma once

namespace lathe {

struct ForwardOptions {
  bool recompute = false;  // re-run each layer in the backward pass instead of keeping its activations
  bool bf16 = false;       // matmuls read the bf16 weight copies with bf16-rounded inputs
};

}  // namespace lathe
