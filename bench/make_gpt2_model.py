#!/usr/bin/env python3
"""Write a random-init GPT-2 124M Hugging Face folder (config.json + model.safetensors) for benchmarks.

    python3 bench/make_gpt2_model.py --out bench/out/gpt2-124M

The layout is what transformers' GPT2LMHeadModel.save_pretrained writes: tensor names
transformer.{wte,wpe,h.{i}.{ln_1,attn.c_attn,attn.c_proj,ln_2,mlp.c_fc,mlp.c_proj},ln_f}.*, Conv1D
weights stored [in, out], the head tied to wte (no lm_head.weight). Init as GPT2PreTrainedModel:
weights ~ Normal(0, 0.02) (c_proj ~ Normal(0, 0.02 / sqrt(2 * n_layer))), biases 0, LayerNorm 1 / 0;
fixed seed. The safetensors file is written by hand (8-byte little-endian header length, JSON header,
raw data), so numpy is the only dependency (Debian: python3-numpy).
"""
import argparse
import json
import math
import os
import struct
import sys

try:
    import numpy as np
except ImportError:
    sys.exit("make_gpt2_model.py needs numpy (Debian: apt-get install python3-numpy)")

CONFIG = {
    "activation_function": "gelu_new",
    "architectures": ["GPT2LMHeadModel"],
    "attn_pdrop": 0.1,
    "bos_token_id": 50256,
    "embd_pdrop": 0.1,
    "eos_token_id": 50256,
    "initializer_range": 0.02,
    "layer_norm_epsilon": 1e-05,
    "model_type": "gpt2",
    "n_ctx": 1024,
    "n_embd": 768,
    "n_head": 12,
    "n_inner": None,
    "n_layer": 12,
    "n_positions": 1024,
    "reorder_and_upcast_attn": False,
    "resid_pdrop": 0.1,
    "scale_attn_by_inverse_layer_idx": False,
    "scale_attn_weights": True,
    "summary_activation": None,
    "summary_first_dropout": 0.1,
    "summary_proj_to_labels": True,
    "summary_type": "cls_index",
    "summary_use_proj": True,
    "tie_word_embeddings": True,
    "torch_dtype": "float32",
    "use_cache": True,
    "vocab_size": 50257,
}


def tensors(cfg, seed):
    rng = np.random.default_rng(seed)
    c, n_layer, v, p = cfg["n_embd"], cfg["n_layer"], cfg["vocab_size"], cfg["n_positions"]
    f = cfg["n_inner"] or 4 * c
    std = np.float32(cfg["initializer_range"])
    std_proj = np.float32(cfg["initializer_range"] / math.sqrt(2 * n_layer))

    def nrm(shape, s=std):
        return rng.standard_normal(shape, dtype=np.float32) * s

    yield "transformer.wte.weight", nrm((v, c))
    yield "transformer.wpe.weight", nrm((p, c), np.float32(0.01))
    for i in range(n_layer):
        h = f"transformer.h.{i}."
        yield h + "ln_1.weight", np.ones(c, np.float32)
        yield h + "ln_1.bias", np.zeros(c, np.float32)
        yield h + "attn.c_attn.weight", nrm((c, 3 * c))  # Conv1D: [in, out]
        yield h + "attn.c_attn.bias", np.zeros(3 * c, np.float32)
        yield h + "attn.c_proj.weight", nrm((c, c), std_proj)
        yield h + "attn.c_proj.bias", np.zeros(c, np.float32)
        yield h + "ln_2.weight", np.ones(c, np.float32)
        yield h + "ln_2.bias", np.zeros(c, np.float32)
        yield h + "mlp.c_fc.weight", nrm((c, f))
        yield h + "mlp.c_fc.bias", np.zeros(f, np.float32)
        yield h + "mlp.c_proj.weight", nrm((f, c), std_proj)
        yield h + "mlp.c_proj.bias", np.zeros(c, np.float32)
    yield "transformer.ln_f.weight", np.ones(c, np.float32)
    yield "transformer.ln_f.bias", np.zeros(c, np.float32)


def write_safetensors(path, items):
    header, off = {"__metadata__": {"format": "pt"}}, 0
    for name, x in items:
        header[name] = {"dtype": "F32", "shape": list(x.shape), "data_offsets": [off, off + x.nbytes]}
        off += x.nbytes
    hb = json.dumps(header, separators=(",", ":")).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)  # pad so the data starts 8-byte aligned
    tmp = path + ".tmp"
    with open(tmp, "wb") as fo:
        fo.write(struct.pack("<Q", len(hb)))
        fo.write(hb)
        for _, x in items:
            np.ascontiguousarray(x, dtype="<f4").tofile(fo)
    os.replace(tmp, path)  # atomic: an interrupted run leaves no half-written model behind
    return off


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    items = list(tensors(CONFIG, a.seed))
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(CONFIG, f, indent=2, sort_keys=True)
        f.write("\n")
    nbytes = write_safetensors(os.path.join(a.out, "model.safetensors"), items)
    n = sum(x.size for _, x in items)
    print(f"wrote {a.out}: {n} params ({n / 1e6:.1f}M), {nbytes / 1e9:.3f} GB of F32 weights")


if __name__ == "__main__":
    main()
