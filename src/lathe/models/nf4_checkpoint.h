// NF4 weights in a Hugging Face folder as bitsandbytes / transformers write them (load_in_4bit, nf4, double
// quantisation; specs/posttrain.md §3.3): for a Linear "X", X.weight (u8 packed codes [ceil(n/2), 1]), X.weight.absmax,
// X.weight.quant_map, X.weight.nested_absmax, X.weight.nested_quant_map and X.weight.quant_state.bitsandbytes__nf4 (the
// JSON of the non-tensor state, as u8 bytes), plus config.json's quantization_config.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "lathe/io/safetensors.h"
#include "lathe/tensor/quant_weight.h"

namespace lathe {

// Reads the NF4 weight `name` ("X.weight") of shape [out, in] and its state; adds every tensor name it reads to `used`.
// InvalidArgument naming the file and tensor on a missing part, a quant_type other than nf4, a quant_map other than
// NF4's code, or a shape that does not fit.
QuantWeight read_nf4_weight(const CheckpointReader &ckpt, const std::string &name, const Shape &shape,
                            std::set<std::string> &used);

// The tensors bitsandbytes saves for the NF4 weight `name`, in its order.
void append_nf4_tensors(const std::string &name, const QuantWeight &q,
                        std::vector<std::pair<std::string, Tensor>> &out);

// The packed quant_state: Python's json.dumps of {quant_type, blocksize, dtype, shape, nested_blocksize, nested_dtype,
// nested_offset} (", " and ": " separators, the offset as Python's repr of the f32 value).
std::string nf4_quant_state_json(const QuantWeight &q);

// transformers' BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4", bnb_4bit_use_double_quant=True,
// bnb_4bit_compute_dtype=compute_dtype).to_dict(), as config.json holds it.
nlohmann::json bnb_nf4_quantization_config(const std::string &compute_dtype, const std::vector<std::string> &skipped);

// Python's repr() of a double: the shortest digits that read back, fixed for exponents in [-4, 16), else d.ddde±XX.
std::string python_float_repr(double v);

}  // namespace lathe
