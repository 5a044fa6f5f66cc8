// Model loading (validated against the config, zero-copy where possible), saving, and the heads.
#include "lathe/models/model.h"

#include <array>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include "lathe/autograd/node.h"
#include "lathe/base/context.h"
#include "lathe/base/error.h"
#include "lathe/base/huge_page_arena.h"
#include "lathe/base/rng.h"
#include "lathe/io/file_read.h"
#include "lathe/io/mapped_file.h"
#include "lathe/io/safetensors.h"
#include "lathe/io/gguf.h"
#include "lathe/models/family.h"
#include "lathe/models/gguf_import.h"
#include "lathe/models/nf4_checkpoint.h"
#include "lathe/models/tensor_source.h"
#include "lathe/nn/linear.h"
#include "lathe/ops/cast.h"
#include "lathe/ops/cross_entropy.h"
#include "lathe/ops/linear.h"
#include "lathe/ops/quant_linear.h"
#include "lathe/ops/reshape.h"
#include "lathe/ops/softcap.h"
#include "lathe/tensor/arena_tensor.h"

namespace lathe {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Tensors some exporters leave in checkpoints that carry no learned state.
bool ignorable(const std::string& name, const ModelConfig& c) {
  if (name.ends_with("rotary_emb.inv_freq") || name.ends_with(".attn.bias") || name.ends_with(".attn.masked_bias"))
    return true;
  return c.tie_embeddings && name == "lm_head.weight";
}

// Bytes of the arena that holds a model's weights: each binding's checkpoint tensor in the dtype it is
// held in, plus one alignment per slot (a fused tensor's parts are each rounded up on their own).
// Weights under 2 MiB (GPT-2 124M's and a 110M Llama's [C, C] projections: 1.2 MB in bf16) got their
// own 4 KiB pages, or the checkpoint map's page-cache pages, and the decode GEMV, which walks every row
// of every weight per token, took a TLB miss per page; in one arena they share 2 MiB pages, at a waste
// under 64 bytes per tensor (rounding each weight up to 2 MiB would waste 40% on those projections).
size_t weight_arena_bytes(const std::vector<TensorBinding>& bindings,
                          const std::function<DType(const TensorBinding&)>& held) {
  size_t bytes = 0;
  for (const TensorBinding& b : bindings)
    bytes += HugePageArena::footprint(static_cast<size_t>(shape_numel(b.shape)) * dtype_size(held(b))) +
             HugePageArena::kAlignment * b.slots.size();
  return bytes;
}

// The quantisation a checkpoint's config.json declares (docs/quantization.md), or nullopt for a plain one.
std::optional<QuantSpec> checkpoint_quant_spec(const json& hf, const std::string& where) {
  // Absent or null: a plain checkpoint (config validation has refused any other quant_method already).
  if (!hf.contains("quantization_config") || hf["quantization_config"].is_null()) return std::nullopt;
  const json& qc = hf["quantization_config"];
  const std::string method = qc.is_object() ? qc.value("quant_method", std::string()) : std::string();
  // bitsandbytes NF4 (validated by check_quantization_config); the blocksize is each tensor's quant_state's.
  if (method == "bitsandbytes") return QuantSpec{QuantFormat::kNf4, 64};
  LATHE_CHECK_ARG(method == "lathe", where, ": quantization_config.quant_method '", method,
                  "' is not supported (lathe reads the layout `lathe quantize` writes: quant_method \"lathe\", "
                  "docs/quantization.md)");
  LATHE_CHECK_ARG(qc.contains("format") && qc["format"].is_string(), where, ": quantization_config has no \"format\"");
  return parse_quant_spec(qc["format"].get<std::string>());
}

// The LM head's format in a quantised checkpoint: quantization_config.lm_head_format, else the checkpoint's.
std::optional<QuantSpec> checkpoint_head_spec(const json& hf, const std::optional<QuantSpec>& spec) {
  if (!spec) return std::nullopt;
  const json& qc = hf["quantization_config"];
  if (!qc.contains("lm_head_format")) return spec;
  LATHE_CHECK_ARG(qc["lm_head_format"].is_string(), "config.json: quantization_config.lm_head_format must be a "
                  "format name, got ", qc["lm_head_format"].dump());
  return parse_quant_spec(qc["lm_head_format"].get<std::string>());
}

}  // namespace

// Parses config.json text into the model's config (parse_model_config: the family, then validation).
void Model::parse_config_text(const std::string& text, const std::string& where) {
  config_text_ = text;
  cfg_ = parse_model_config(text, where);
  inv_freq_ = rotary_tables(cfg_);
}

std::unique_ptr<Model> Model::load(const std::string& path, const LoadOptions& opts) {
  std::unique_ptr<Model> m(new Model());
  std::unique_ptr<TensorSource> source;
  const CheckpointReader* nf4_reader = nullptr;  // a bitsandbytes NF4 folder's tensors
  if (is_gguf_path(path)) {
    // A llama.cpp GGUF file (models/gguf_import.h): its metadata as config.json, its tensors renamed.
    auto g = std::make_shared<const GgufFile>(GgufFile::open(path));
    m->parse_config_text(gguf_config_json(*g), path);
    // llama.cpp's rope_freqs (Llama 3 scaling as convert_hf_to_gguf writes it) divides each frequency.
    const std::vector<float> factors = gguf_rope_freq_factors(*g);
    for (std::vector<float>& inv : m->inv_freq_) {
      LATHE_CHECK_ARG(factors.empty() || factors.size() == inv.size(), path, ": rope_freqs.weight has ", factors.size(),
                      " entries; the rotary dimension needs ", inv.size());
      for (size_t i = 0; i < factors.size(); ++i) {
        LATHE_CHECK_ARG(factors[i] > 0.f, path, ": rope_freqs.weight[", i, "] must be > 0, got ", factors[i]);
        inv[i] = inv[i] / factors[i];
      }
    }
    source = std::make_unique<GgufTensors>(std::move(g), m->cfg_);
  } else {
    const std::string& dir = path;
    const fs::path root(dir);
    LATHE_CHECK_ARG(fs::is_directory(root), dir,
                    ": not a directory (expected a Hugging Face model folder or a .gguf file)");
    const fs::path config_path = root / "config.json";
    LATHE_CHECK_ARG(fs::exists(fs::symlink_status(config_path)), dir, ": no config.json");
    m->parse_config_text(read_file(config_path.string()), config_path.string());
    const fs::path gen_path = root / "generation_config.json";
    if (fs::exists(fs::symlink_status(gen_path))) {
      m->generation_config_text_ = read_file(gen_path.string());  // kept to be written back byte for byte
      m->generation_config_ = parse_json_object(m->generation_config_text_, gen_path.string());
    }
    const std::optional<QuantSpec> qspec = checkpoint_quant_spec(m->cfg_.hf_config, config_path.string());
    auto folder = std::make_unique<FolderTensors>(dir, qspec, checkpoint_head_spec(m->cfg_.hf_config, qspec));
    if (qspec && qspec->format == QuantFormat::kNf4) nf4_reader = &folder->reader();  // bitsandbytes' layout
    const Family& fam = find_family(m->cfg_.hf_config);
    if (fam.read_checkpoint_layout) fam.read_checkpoint_layout(folder->reader(), m->cfg_);
    source = std::move(folder);
  }
  const TensorSource& src = *source;
  const Family& fam = find_family(m->cfg_.hf_config);
  const ModelConfig& cfg = m->cfg_;
  ModelWeights& w = m->w_;
  w.layers.resize(cfg.n_layers);
  m->bindings_ = fam.bindings(m->cfg_, w);
  const std::vector<TensorBinding>& bindings = m->bindings_;

  // Widen what the kernels only take in f32: 1-D tensors and stacked experts (copied anyway). 2-D bf16
  // and f16 matrices stay as stored (every op reading a matrix takes them: linear, embedding, the chunked
  // head).
  const auto widened = [&](const Shape& shape) { return opts.force_f32 || shape.size() == 1 || cfg.n_experts > 0; };
  // The Linears stored quantised (codes + scales (+ mins)) take the quant slot (or, with force_f32, the f32
  // weight those codes stand for). Read first: the arena's size counts their planes.
  std::map<const Tensor*, Linear*> linear_of;
  for_each_linear_module(w, [&](Linear& l) { linear_of[&l.weight] = &l; });
  std::map<std::string, QuantWeight> quants;
  std::set<std::string> nf4_parts;  // an NF4 weight's absmax, quant_map, nested_* and quant_state tensors
  // The float decoder Linears that opts.quantize_linears quantises as they load (QLoRA's frozen base; not
  // into the arena).
  const auto quantised_at_load = [&](const TensorBinding& b) {
    return opts.quantize_linears && b.layer >= 0 && b.slots.size() == 1 && linear_of.count(b.slots[0]) &&
           !b.transposed && b.shape.size() == 2 && src.contains(b.name) && !quants.count(b.name) &&
           dtype_is_float(src.dtype(b.name));
  };
  for (const TensorBinding& b : bindings) {
    if (!src.contains(b.name)) continue;
    const bool linear = b.slots.size() == 1 && linear_of.count(b.slots[0]) && !b.transposed && b.shape.size() == 2;
    std::optional<QuantWeight> q;
    if (nf4_reader && nf4_reader->contains(b.name + ".absmax")) {
      LATHE_CHECK_ARG(linear, nf4_reader->file_of(b.name), ": '", b.name,
                      "' is stored as NF4, but only a plain Linear weight can be");
      q = read_nf4_weight(*nf4_reader, b.name, b.shape, nf4_parts);
    } else {
      q = src.quant_weight(b.name, linear);
    }
    if (!q) continue;
    q->out = b.shape[0];
    q->in = b.shape[1];
    q->check(str_cat(src.file_of(b.name), ": '", b.name, "'"));
    quants.emplace(b.name, std::move(*q));
  }
  // A tied LM head stored quantised beside its float embedding (lathe quantize): the head reads the codes,
  // the token lookup the float table.
  std::optional<QuantWeight> tied_head;
  if (cfg.tie_embeddings && src.contains("lm_head.weight")) {
    tied_head = src.quant_weight("lm_head.weight", true);
    if (tied_head) {
      tied_head->out = cfg.vocab_size;
      tied_head->in = cfg.hidden;
      tied_head->check(str_cat(src.file_of("lm_head.weight"), ": 'lm_head.weight'"));
    }
  }
  // Each binding's tensors are copied into the arena as soon as they are loaded, so a converted
  // temporary lives for one tensor only.
  std::optional<HugePageArena> arena;
  if (!opts.map_in_place) {
    size_t bytes = weight_arena_bytes(bindings, [&](const TensorBinding& b) {
      if (quants.count(b.name)) return opts.force_f32 ? DType::kF32 : DType::kU8;  // codes (an upper bound)
      return !src.contains(b.name) || widened(b.shape) ? DType::kF32 : src.dtype(b.name);
    });
    // A quantised weight's scales and mins come on top of its codes.
    for (const auto& [name, q] : quants)
      for (const Tensor* t : {&q.scales, &q.mins})
        if (t->defined()) bytes += HugePageArena::footprint(t->nbytes()) + HugePageArena::kAlignment;
    for (const TensorBinding& b : bindings)
      if (quantised_at_load(b))
        bytes -= HugePageArena::footprint(static_cast<size_t>(shape_numel(b.shape)) *
                                          dtype_size(widened(b.shape) ? DType::kF32 : src.dtype(b.name))) +
                 HugePageArena::kAlignment;
    // A tied head stored quantised has no binding of its own.
    if (tied_head)
      for (const Tensor* t : {&tied_head->codes, &tied_head->scales, &tied_head->mins})
        if (t->defined()) bytes += HugePageArena::footprint(t->nbytes()) + HugePageArena::kAlignment;
    arena.emplace(bytes);
  }
  const auto install = [&](QuantWeight& q, Linear& lin) {
    if (opts.force_f32) {
      lin.weight = dequantize_weight(q);
      if (arena) move_into_arena(std::span<Tensor* const>(std::array{&lin.weight}), *arena);
    } else {
      if (arena) {
        Tensor* parts[] = {&q.codes, &q.scales, &q.mins};
        move_into_arena(std::span<Tensor* const>(parts, q.mins.defined() ? 3 : 2), *arena);
      }
      lin.weight = Tensor();
      lin.quant = std::move(q);
    }
  };
  for (const TensorBinding& b : bindings) {
    const auto it = quants.find(b.name);
    if (it != quants.end()) install(it->second, *linear_of[b.slots[0]]);
  }
  std::set<std::string> used = nf4_parts;
  if (tied_head) {
    install(*tied_head, w.lm_head);
    used.insert("lm_head.weight");
  }
  for (const TensorBinding& b : bindings) {
    used.insert(b.name);
    if (quants.count(b.name)) continue;
    LATHE_CHECK_ARG(src.contains(b.name), src.where(), ": missing tensor '", b.name, "' (", cfg.architecture,
                    " with this config needs it)");
    Tensor t = src.tensor(b.name);
    LATHE_CHECK_ARG(dtype_is_float(t.dtype()), src.file_of(b.name), ": tensor '", b.name, "' has dtype ",
                    dtype_name(t.dtype()), "; weights must be F32, BF16 or F16");
    if (widened(t.shape())) t = t.to(DType::kF32);
    try {
      b.load(t);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(str_cat(src.file_of(b.name), ": ", e.what()));
    }
    if (quantised_at_load(b)) {
      Linear& lin = *linear_of[b.slots[0]];
      lin.quant = quantize_weight(lin.weight, *opts.quantize_linears);
      lin.weight = Tensor();
      used.insert(b.name);
      continue;
    }
    if (arena) move_into_arena(b.slots, *arena);
  }
  for (const std::string& name : src.names())
    LATHE_CHECK_ARG(used.count(name) || ignorable(name, cfg), src.file_of(name), ": unexpected tensor '", name,
                    "' (not part of ", cfg.architecture, " with this config)");
  if (cfg.tie_embeddings && !tied_head) w.lm_head.weight = w.embed_tokens.weight;
  return m;
}

std::unique_ptr<Model> Model::create(const std::string& config_json, uint64_t seed) {
  std::unique_ptr<Model> m(new Model());
  m->parse_config_text(config_json, "config.json");
  const Family& fam = find_family(m->cfg_.hf_config);
  m->w_.layers.resize(m->cfg_.n_layers);
  m->bindings_ = fam.bindings(m->cfg_, m->w_);
  const float std_dev = static_cast<float>(m->cfg_.initializer_range);  // validated: in (0, 1]
  HugePageArena arena(weight_arena_bytes(m->bindings_, [](const TensorBinding&) { return DType::kF32; }));
  // By role, per checkpoint tensor (in its checkpoint layout, as Hugging Face initialises it).
  for (const TensorBinding& b : m->bindings_) {
    Tensor t = Tensor::empty(b.shape);
    float* x = t.data<float>();
    const int64_t n = t.numel();
    if (b.role == ParamRole::kNormWeight) {
      std::fill(x, x + n, 1.f - m->cfg_.norm_weight_offset);  // identity: w = 1, or 0 for (1 + w)
    } else if (b.role == ParamRole::kBias) {
      std::fill(x, x + n, 0.f);  // biases (and LayerNorm shifts)
    } else {
      const float s = b.init_std > 0.f ? b.init_std : std_dev;
      // Element j draws from counters 2j+1 and 2j+2 of the tensor's key: the same values on any thread count.
      const uint64_t key = derive_key(seed, hash_name(b.name));
      constexpr int64_t kChunk = 1 << 16;
      current_context().pool.parallel_for((n + kChunk - 1) / kChunk, [&](int64_t c, int) {
        CounterRng rng{key, static_cast<uint64_t>(2 * c * kChunk)};
        for (int64_t j = c * kChunk; j < std::min(n, (c + 1) * kChunk); ++j) x[j] = s * rng.next_normal();
      });
    }
    b.load(t);
    move_into_arena(b.slots, arena);
  }
  if (m->cfg_.tie_embeddings) m->w_.lm_head.weight = m->w_.embed_tokens.weight;
  return m;
}

void Model::save(const std::string& dir) const {
  fs::create_directories(dir);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const TensorBinding& b : bindings_) tensors.push_back({b.name, b.save()});
  save_safetensors((fs::path(dir) / "model.safetensors").string(), tensors);
  // The JSON files are written back as read, byte for byte.
  write_file_atomic((fs::path(dir) / "config.json").string(), config_text_);
  if (!generation_config_text_.empty())
    write_file_atomic((fs::path(dir) / "generation_config.json").string(), generation_config_text_);
}

// for_each_param over the bindings: T is Tensor or const Tensor.
template <class T, class Bindings, class Fn>
void walk_params(Bindings& bindings, const Fn& fn) {
  std::set<const TensorImpl*> seen;
  for (const TensorBinding& b : bindings)
    for (size_t i = 0; i < b.slots.size(); ++i) {
      T& t = *b.slots[i];
      if (!t.defined() || !seen.insert(t.impl()).second) continue;
      fn(b.slots.size() == 1 ? b.name : b.name + "#" + std::to_string(i), t, b.role, b.layer);
    }
}

void Model::for_each_param(const ParamFn& fn) { walk_params<Tensor>(bindings_, fn); }
void Model::for_each_param(const ConstParamFn& fn) const { walk_params<const Tensor>(bindings_, fn); }

int64_t Model::n_params() const {
  int64_t n = 0;
  for_each_param([&](const std::string&, const Tensor& t, ParamRole, int) { n += t.numel(); });
  return n;
}

void Model::set_requires_grad(bool on) {
  for_each_param([&](const std::string&, Tensor& t, ParamRole, int) { t.set_requires_grad(on); });
}

void Model::zero_grad() {
  for_each_param([&](const std::string&, Tensor& t, ParamRole, int) { t.zero_grad(); });
}

std::vector<std::pair<std::string, Tensor>> Model::gradients_by_name() {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const TensorBinding& b : bindings_) {
    // The binding's save() reads its slots; point them at the gradients for a moment.
    std::vector<Tensor> saved;
    bool complete = true;
    for (Tensor* t : b.slots) {
      saved.push_back(*t);
      complete = complete && t->grad().defined();
    }
    if (!complete) continue;
    for (Tensor* t : b.slots) *t = t->grad();
    out.push_back({b.name, b.save()});
    for (size_t i = 0; i < b.slots.size(); ++i) *b.slots[i] = saved[i];
  }
  return out;
}

void Model::make_bf16_copies() {
  drop_bf16_copies();
  for_each_linear(w_, [&](Linear& l) {
    LATHE_CHECK_ARG(l.weight.dtype() == DType::kF32, "[bf16 compute] weights must be f32 (load with force_f32), got ",
                    dtype_name(l.weight.dtype()));
  });
  size_t bytes = 0;
  for_each_linear(w_, [&](Linear& l) {
    bytes += HugePageArena::footprint(static_cast<size_t>(l.weight.numel()) * dtype_size(DType::kBF16));
  });
  HugePageArena arena(bytes);  // the copies are read as often as the weights: huge pages too
  for_each_linear(w_, [&](Linear& l) {
    l.bf16 = empty_in_arena(arena, l.weight.shape(), DType::kBF16);
    ++n_bf16_copies_;
  });
}

void Model::drop_bf16_copies() {
  for_each_linear(w_, [](Linear& l) { l.bf16 = Tensor(); });
  n_bf16_copies_ = 0;
}

void Model::round_bf16_copies(uint64_t key) {
  LATHE_CHECK_ARG(has_bf16_copies(), "[round_bf16_copies] the model has no bf16 copies (make_bf16_copies)");
  uint64_t i = 0;
  for_each_linear(w_, [&](Linear& l) {
    LATHE_ASSERT(l.bf16.defined() && l.bf16.shape() == l.weight.shape(),
                 "the model's Linears changed since the bf16 copies were made");
    stochastic_round_bf16(l.weight.contiguous(), l.bf16, derive_key(key, i));
    ++i;
  });
}

void Model::check_options(const ForwardOptions& o, const char* where) const {
  LATHE_CHECK_ARG(!o.bf16 || has_bf16_copies(), where, " bf16 compute needs the bf16 copies (make_bf16_copies)");
}

Tensor Model::hidden(const ForwardBatch& batch, const ForwardOptions& o) const {
  // Over a store (generation) the f32 weights and no recompute or recording, as a rollout reads the
  // masters (also inside a training process, whose parameters require grad).
  if (batch.kv) {
    NoGradGuard no_grad;
    return decoder_hidden(cfg_, w_, inv_freq_, batch, {});
  }
  check_options(o, "[forward]");
  return decoder_hidden(cfg_, w_, inv_freq_, batch, o);
}

Tensor Model::forward(const ForwardBatch& batch, const ForwardOptions& o) const {
  std::optional<NoGradGuard> no_grad;
  if (batch.kv) no_grad.emplace();
  const ForwardOptions ro = batch.kv ? ForwardOptions{} : o;
  Tensor h = hidden(batch, ro);                   // [M, C]
  Tensor logits = linear(h, w_.lm_head, ro);      // [M, V]
  if (cfg_.final_softcap > 0) logits = softcap(logits, cfg_.final_softcap);
  return logits;
}

void Model::check_head_targets(const ForwardBatch& batch, const Tensor& targets, const char* where) const {
  LATHE_CHECK_ARG(!batch.kv, where, " runs without a KV store");
  LATHE_CHECK_ARG(targets.dim() == 1 && targets.dtype() == DType::kI32 && targets.numel() == batch.n_outputs(),
                  where, " targets must be int32 [M] (one per output row, M = ", batch.n_outputs(), "), got ",
                  dtype_name(targets.dtype()), " ", shape_str(targets.shape()));
}

Tensor Model::head_input(const ForwardBatch& batch, const Tensor& targets, const ForwardOptions& o,
                         const char* where) const {
  check_head_targets(batch, targets, where);
  check_options(o, where);
  return linear_input(decoder_hidden(cfg_, w_, inv_freq_, batch, o), w_.lm_head, o);  // [M, C]
}

Tensor Model::loss(const ForwardBatch& batch, const Tensor& targets, const ForwardOptions& o) const {
  const Tensor h = head_input(batch, targets, o, "[loss]");  // [M, C]
  LinearCrossEntropyOptions ce;
  ce.ignore_index = -100;
  ce.final_softcap = cfg_.final_softcap;
  return linear_cross_entropy(h, linear_weight(w_.lm_head, o), targets.contiguous(), ce);
}

TokenLogprobs Model::token_logprobs(const ForwardBatch& batch, const Tensor& targets, const ForwardOptions& o,
                                    bool want_entropy, const LogprobProcessing& processing) const {
  const Tensor h = head_input(batch, targets, o, "[token_logprobs]");  // [M, C]
  LinearTokenLogprobsOptions lo;
  lo.ignore_index = -100;
  lo.final_softcap = cfg_.final_softcap;
  lo.want_entropy = want_entropy;
  lo.processing = processing;
  return linear_token_logprobs(h, linear_weight(w_.lm_head, o), targets.contiguous(), lo);
}

Tensor Model::forward(const Tensor& ids, const ForwardOptions& o) const {
  const ForwardBatch batch = ForwardBatch::rows(ids);
  return forward(batch, o).view({ids.size(0), ids.size(1), cfg_.vocab_size});
}

Tensor Model::next_token_loss(const Tensor& ids, const ForwardOptions& o) const {
  LATHE_CHECK_ARG(ids.dim() == 2 && ids.size(1) >= 2, "[next_token_loss] ids must be [B, T] with T >= 2, got ",
                  shape_str(ids.shape()));
  const int64_t B = ids.size(0), T = ids.size(1);
  // Labels: ids shifted left; the last position of each row has no next token and is ignored.
  Tensor labels = Tensor::empty({B * T}, DType::kI32);
  const Tensor flat = ids.contiguous();
  const int32_t* ip = flat.data<int32_t>();
  int32_t* lp = labels.data<int32_t>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) lp[b * T + t] = t + 1 < T ? ip[b * T + t + 1] : -100;
  return loss(ForwardBatch::rows(ids), labels, o);
}

namespace {
template <class T>
void check_ids(std::span<const T> ids, int64_t vocab_size, const std::string& where) {
  for (size_t i = 0; i < ids.size(); ++i)
    LATHE_CHECK_ARG(ids[i] >= 0 && ids[i] < vocab_size, where, ": token id ", ids[i], " (position ", i,
                    ") is outside the vocabulary [0, ", vocab_size, ")");
}
}  // namespace

void check_token_ids(std::span<const int64_t> ids, int64_t vocab_size, const std::string& where) {
  check_ids(ids, vocab_size, where);
}
void check_token_ids(std::span<const int32_t> ids, int64_t vocab_size, const std::string& where) {
  check_ids(ids, vocab_size, where);
}

}  // namespace lathe
