// Model: a ModelConfig, its weights and its checkpoint bindings. Loads and saves Hugging Face folders
// (config.json, generation_config.json, model.safetensors or sharded), and runs the shared decoder.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "lathe/models/config.h"
#include "lathe/models/forward_batch.h"
#include "lathe/models/weights.h"
#include "lathe/nn/forward_options.h"
#include "lathe/ops/logprob.h"
#include "lathe/nn/param_role.h"

namespace lathe {

struct LoadOptions {
  // Convert every weight to f32 (training, or to compare against f32 references). Otherwise 2-D
  // weights keep their stored dtype (f32, bf16 or f16; inference only: a 16-bit weight takes no gradient)
  // and 1-D tensors (norms, biases) and MoE models' weights are widened to f32.
  bool force_f32 = false;
  // Leave the weights that need no conversion on the checkpoint's read-only memory map (no copy, no extra
  // memory) for a caller that reads few of them or each once (lathe info, merge). By default every
  // weight is copied into the model's huge-page arena (base/huge_page_arena.h): writable, and a decode
  // GEMV reading it takes no TLB miss per 4 KiB page-cache page.
  bool map_in_place = false;
  // Hold every decoder layer's Linear weight (attention and MLP projections) in this format from load on
  // (QLoRA's frozen base, recipe key model.quantize): each is quantised as it is read and its float copy
  // never enters the arena. The LM head, embeddings and MoE experts stay as loaded.
  std::optional<QuantSpec> quantize_linears;
};

class Model {
 public:
  // The weights live in one huge-page arena per model (models/model.cc: weight_arena_bytes).
  static std::unique_ptr<Model> load(const std::string& dir, const LoadOptions& opts = {});
  // A new f32 model from config.json text, initialised as the family's Hugging Face class initialises it:
  // matrices and embeddings ~ normal(0, initializer_range), GPT-2's residual projections (c_proj) scaled
  // by 1/sqrt(2 L), norms at identity (1, or 0 for (1 + w) norms), biases 0. Each tensor draws from a
  // counter-based RNG keyed by (seed, checkpoint name): the same seed gives the same weights.
  static std::unique_ptr<Model> create(const std::string& config_json, uint64_t seed);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // Writes config.json (as read), generation_config.json (when read) and model.safetensors.
  void save(const std::string& dir) const;

  const ModelConfig& config() const { return cfg_; }
  ModelWeights& weights() { return w_; }
  const ModelWeights& weights() const { return w_; }
  const std::vector<TensorBinding>& bindings() const { return bindings_; }

  // The parameter walk: fn(name, tensor, role, layer) once per distinct parameter tensor (a tied
  // embedding once, as kEmbedding), in binding order; layer -1 for tensors outside the decoder layers.
  // name is the checkpoint name of the tensor holding it, "#i" added for part i of a fused checkpoint
  // tensor (GPT-2 c_attn.weight#0 is q_proj); a stack of per-expert checkpoint tensors takes its first's
  // name. Optimizer state is saved under these names. Roles come from the family file (TensorBinding).
  using ParamFn = std::function<void(const std::string& name, Tensor& t, ParamRole role, int layer)>;
  using ConstParamFn = std::function<void(const std::string& name, const Tensor& t, ParamRole role, int layer)>;
  void for_each_param(const ParamFn& fn);
  void for_each_param(const ConstParamFn& fn) const;
  int64_t n_params() const;
  void set_requires_grad(bool on);
  void zero_grad();
  // Gradients in checkpoint layout and names (as `grad.<name>` of reference files), after backward().
  std::vector<std::pair<std::string, Tensor>> gradients_by_name();

  // bf16 mixed-precision training (ForwardOptions::bf16): make_bf16_copies allocates a bf16 compute copy
  // (Linear::bf16, 2 bytes/param) of every f32 Linear weight, all in one huge-page arena as the weights;
  // round_bf16_copies must then fill them.
  // drop_bf16_copies frees them. Norms, biases, embedding lookups and MoE weights get none.
  void make_bf16_copies();
  void drop_bf16_copies();
  bool has_bf16_copies() const { return n_bf16_copies_ > 0; }
  // Rewrites every copy from its f32 weight by stochastic rounding; copy i (for_each_linear order) draws
  // from derive_key(key, i), so the copies are a pure function of (weights, key): a resumed run rebuilds
  // them bit for bit. Call after every optimizer step and at the start of a run.
  void round_bf16_copies(uint64_t key);

  // Weight version: a counter of parameter updates (the trainer bumps it after every optimizer step), so
  // a reader such as an in-process rollout can pin the version it generated with and check it later.
  // 0 after load or create (not saved); the training loop sets it to the step it resumes from.
  uint64_t weight_version() const { return weight_version_; }
  void bump_weight_version() { ++weight_version_; }
  void set_weight_version(uint64_t v) { weight_version_ = v; }  // a resumed run: the steps already taken

  // The one forward, over any ForwardBatch (equal rows, packed documents, prefill chunks and decode rows
  // over a KV store, mixes). Without a store, autograd records when parameters require grad and the bf16
  // copies are read in bf16 compute; over a store it records nothing and reads the f32 weights.
  // Final-normed hidden states of the batch's output rows -> [M, C].
  Tensor hidden(const ForwardBatch& batch, const ForwardOptions& o = {}) const;
  // Logits of the output rows -> [M, V] f32 (soft-capped when the family caps them).
  Tensor forward(const ForwardBatch& batch, const ForwardOptions& o = {}) const;
  // Mean cross-entropy of predicting targets [M] (int32, one per output row; -100 = ignored), fused with
  // the head so no [M, V] probability tensor is kept -> [1].
  Tensor loss(const ForwardBatch& batch, const Tensor& targets, const ForwardOptions& o = {}) const;
  // Per-token log-probabilities of targets [M] (int32; -100 = ignored: 0) under the output rows'
  // distributions, and with want_entropy each row's entropy, fused with the head (linear_token_logprobs:
  // no [M, V] tensor) -> {logprobs [M], entropy [M]}. The post-training losses start from these. `processing`:
  // the sampler's temperature / top-k / top-p, replayed after the soft-cap (GRPO's ratios; ops/logprob.h).
  TokenLogprobs token_logprobs(const ForwardBatch& batch, const Tensor& targets, const ForwardOptions& o = {},
                               bool want_entropy = false, const LogprobProcessing& processing = {}) const;

  // Conveniences over ForwardBatch::rows(ids), ids int32 [B, T]: logits [B, T, V]; and the mean
  // next-token cross-entropy over all B*(T-1) shifted positions (labels = ids) -> [1].
  Tensor forward(const Tensor& ids, const ForwardOptions& o = {}) const;
  Tensor next_token_loss(const Tensor& ids, const ForwardOptions& o = {}) const;

  const nlohmann::json& generation_config() const { return generation_config_; }

 private:
  Model() = default;
  void parse_config_text(const std::string& text, const std::string& where);
  void check_options(const ForwardOptions& o, const char* where) const;
  void check_head_targets(const ForwardBatch& batch, const Tensor& targets, const char* where) const;
  // The fused heads' input: checks targets and options, runs the decoder -> hidden [M, C] (bf16-rounded
  // when the head reads its bf16 copy).
  Tensor head_input(const ForwardBatch& batch, const Tensor& targets, const ForwardOptions& o, const char* where) const;
  ModelConfig cfg_;
  ModelWeights w_;
  std::vector<std::vector<float>> inv_freq_;  // per layer, [R/2] (empty with learned positions): rotary_tables
  std::vector<TensorBinding> bindings_;
  int64_t n_bf16_copies_ = 0;
  uint64_t weight_version_ = 0;
  nlohmann::json generation_config_;
  std::string config_text_, generation_config_text_;
};

// Every id must index the vocabulary: InvalidArgument "<where>: token id X (position i) is outside the
// vocabulary [0, V)" for the first that does not (before any cache or activation is sized from them).
void check_token_ids(std::span<const int64_t> ids, int64_t vocab_size, const std::string& where);
void check_token_ids(std::span<const int32_t> ids, int64_t vocab_size, const std::string& where);

// Rotary inverse frequencies of every layer ([R/2] each; none with learned positions), computed once
// per model.
std::vector<std::vector<float>> rotary_tables(const ModelConfig& cfg);

// The decoder body shared by every family: the batch's token rows -> final-normed hidden states of its
// output rows [M, C] (decoder.cc says how each kind of batch is attended).
Tensor decoder_hidden(const ModelConfig& cfg, const ModelWeights& w, std::span<const std::vector<float>> inv_freq,
                      const ForwardBatch& batch, const ForwardOptions& o);

}  // namespace lathe
