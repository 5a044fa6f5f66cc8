#!/usr/bin/env python3
"""PyTorch re-implementation of a `lathe pretrain` run, for checking that lathe learns correctly.

Reads the run folder lathe wrote (recipe.json, checkpoints/step_00000000 = the initial weights, saved
with checkpoint.save_initial=true), rebuilds the same Llama-family model in PyTorch from those weights,
feeds it the same batches in the same order (the data loader's documented shuffle, re-implemented here
from docs/recipes.md / src/lathe/train/data_loader.h), applies the same AdamW update, clipping and LR
schedule, and compares its loss with lathe's metrics.jsonl step by step.

    bench/torch_pretrain_ref.py RUN_DIR [--steps 100] [--threads 2] [--rtol 1e-3]

Exit status 0 when every step's loss is within rtol (relative) of lathe's.
"""
import argparse
import glob
import json
import math
import os
import struct
import sys

import numpy as np
import torch

M64 = (1 << 64) - 1


def mix64(z):
    z = (z + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def derive_key(key, label):
    return mix64(key ^ mix64((label + 0x632BE59BD9B4E019) & M64))


class CounterRng:
    def __init__(self, key):
        self.key, self.counter = key, 0

    def next_u64(self):
        self.counter += 1
        return mix64((self.key + 0x9E3779B97F4A7C15 * self.counter) & M64)

    def next_below(self, n):
        return (self.next_u64() * n) >> 64


def shuffle_with_key(v, key):
    rng = CounterRng(key)
    for i in range(len(v), 1, -1):
        j = rng.next_below(i)
        v[i - 1], v[j] = v[j], v[i - 1]


def read_shard(path):
    with open(path, "rb") as f:
        header = np.frombuffer(f.read(1024), dtype="<i4")
        dtype = {20240520: "<u2", 20240801: "<u4"}[int(header[0])]
        return np.frombuffer(f.read(), dtype=dtype)[: int(header[2])].astype(np.int64)


class Loader:
    """The global sample order of lathe's DataLoader: a function of (seed, epoch)."""

    def __init__(self, prefix, seq_len, seed, shuffle):
        d, name = os.path.split(prefix)
        self.paths = sorted(p for p in glob.glob(os.path.join(d or ".", name + "*_train_*.bin")))
        if os.path.isdir(prefix):
            self.paths = sorted(glob.glob(os.path.join(prefix, "*_train_*.bin")))
        if os.path.isfile(prefix + ".json"):  # lathe reads exactly the shards its manifest lists
            manifest = json.load(open(prefix + ".json"))
            self.paths = [os.path.join(d or ".", s) for s in manifest["train"]["shards"]]
        self.shards = [read_shard(p) for p in self.paths]
        self.T, self.seed, self.shuffle = seq_len, seed, shuffle
        self.windows = [(len(s) - 1) // seq_len if len(s) > seq_len else 0 for s in self.shards]
        self.total = sum(self.windows)
        self.cache = {}

    def order(self, epoch):
        if epoch not in self.cache:
            shard_at = list(range(len(self.shards)))
            if self.shuffle:
                shuffle_with_key(shard_at, derive_key(self.seed, epoch))
            start, acc = [], 0
            for s in shard_at:
                start.append(acc)
                acc += self.windows[s]
            perms = {}
            for s in shard_at:
                perm = list(range(self.windows[s]))
                if self.shuffle:
                    shuffle_with_key(perm, derive_key(derive_key(self.seed, epoch), 1000003 + s))
                perms[s] = perm
            self.cache = {epoch: (shard_at, start, perms)}
        return self.cache[epoch]

    def sample(self, k):
        epoch, j = divmod(k, self.total)
        shard_at, start, perms = self.order(epoch)
        p = max(i for i in range(len(start)) if start[i] <= j)
        s = shard_at[p]
        w = perms[s][j - start[p]]
        return self.shards[s][w * self.T : w * self.T + self.T + 1]

    def batch(self, cursor, n):
        rows = np.stack([self.sample(k) for k in range(cursor, cursor + n)])
        return torch.from_numpy(rows[:, :-1].copy()), torch.from_numpy(rows[:, 1:].copy())


def load_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", f"{name}: {info['dtype']}"
        b, e = info["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(data[b:e], dtype="<f4").copy()).reshape(info["shape"])
    return out


class Llama(torch.nn.Module):
    """Llama / Mistral / Qwen2-style decoder (RMSNorm, RoPE, GQA, SwiGLU), as transformers computes it."""

    def __init__(self, cfg, weights):
        super().__init__()
        self.cfg = cfg
        self.C = cfg["hidden_size"]
        self.H = cfg["num_attention_heads"]
        self.Hkv = cfg.get("num_key_value_heads", self.H)
        self.D = cfg.get("head_dim") or self.C // self.H
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        self.theta = cfg.get("rope_theta", 10000.0)
        self.params = torch.nn.ParameterDict()
        for name, t in weights.items():
            self.params[name.replace(".", "__")] = torch.nn.Parameter(t.clone())
        self.tied = cfg.get("tie_word_embeddings", False) or "lm_head.weight" not in weights

    def w(self, name):
        return self.params[name.replace(".", "__")]

    def rms(self, x, w):
        var = x.pow(2).mean(-1, keepdim=True)
        return x * torch.rsqrt(var + self.eps) * w

    def rope(self, x, T):
        inv = 1.0 / (self.theta ** (torch.arange(0, self.D, 2, dtype=torch.int64).float() / self.D))
        freqs = torch.outer(torch.arange(T).float(), inv)
        emb = torch.cat([freqs, freqs], -1)
        cos, sin = emb.cos(), emb.sin()
        x1, x2 = x[..., : self.D // 2], x[..., self.D // 2 :]
        return x * cos + torch.cat([-x2, x1], -1) * sin

    def forward(self, ids):
        B, T = ids.shape
        x = torch.nn.functional.embedding(ids, self.w("model.embed_tokens.weight"))
        mask = torch.full((T, T), float("-inf")).triu(1)
        for l in range(self.cfg["num_hidden_layers"]):
            p = f"model.layers.{l}."
            h = self.rms(x, self.w(p + "input_layernorm.weight"))
            q = (h @ self.w(p + "self_attn.q_proj.weight").t()).view(B, T, self.H, self.D).transpose(1, 2)
            k = (h @ self.w(p + "self_attn.k_proj.weight").t()).view(B, T, self.Hkv, self.D).transpose(1, 2)
            v = (h @ self.w(p + "self_attn.v_proj.weight").t()).view(B, T, self.Hkv, self.D).transpose(1, 2)
            q, k = self.rope(q, T), self.rope(k, T)
            k = k.repeat_interleave(self.H // self.Hkv, dim=1)
            v = v.repeat_interleave(self.H // self.Hkv, dim=1)
            att = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.D) + mask, dim=-1)
            o = (att @ v).transpose(1, 2).reshape(B, T, self.H * self.D)
            x = x + o @ self.w(p + "self_attn.o_proj.weight").t()
            h = self.rms(x, self.w(p + "post_attention_layernorm.weight"))
            g = torch.nn.functional.silu(h @ self.w(p + "mlp.gate_proj.weight").t())
            u = h @ self.w(p + "mlp.up_proj.weight").t()
            x = x + (g * u) @ self.w(p + "mlp.down_proj.weight").t()
        x = self.rms(x, self.w("model.norm.weight"))
        head = self.w("model.embed_tokens.weight") if self.tied else self.w("lm_head.weight")
        return x @ head.t()


def lr_at(step, sch, peak, total):
    W = sch.get("warmup_steps", 0)
    if step < W:
        return peak * (step + 1) / W
    kind = sch.get("kind", "cosine")
    lo = sch.get("final_fraction", 0.1) * peak
    if kind == "constant":
        return peak
    if kind == "wsd":
        D = total - sch.get("decay_fraction", 0.2) * total
        if step < D or D >= total:
            return peak
        p, style = (step - D) / (total - D), sch.get("decay_style", "1-sqrt")
    else:
        if total - W <= 0:
            return peak
        p, style = (step - W) / (total - W), kind
    p = min(max(p, 0.0), 1.0)
    if style == "cosine":
        return lo + 0.5 * (1 + math.cos(math.pi * p)) * (peak - lo)
    if style == "1-sqrt":
        return lo + (1 - math.sqrt(p)) * (peak - lo)
    return lo + (1 - p) * (peak - lo)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run_dir")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rtol", type=float, default=1e-3)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    recipe = json.load(open(os.path.join(a.run_dir, "recipe.json")))
    init = os.path.join(a.run_dir, "checkpoints", "step_00000000")
    cfg = json.load(open(os.path.join(init, "config.json")))
    assert cfg.get("model_type") in ("llama", "mistral", "qwen2"), "the reference implements Llama-style models"
    model = Llama(cfg, load_safetensors(os.path.join(init, "model.safetensors")))

    data, opt_cfg, sch = recipe["data"], recipe.get("optimizer", {}), recipe.get("schedule", {})
    T, B, accum = data["seq_len"], data["batch_size"], data.get("grad_accum", 1)
    loader = Loader(data["train"], T, recipe.get("run", {}).get("seed", 0), data.get("shuffle", True))
    peak, total = opt_cfg.get("lr", 3e-4), sch["steps"]
    b1, b2 = opt_cfg.get("beta1", 0.9), opt_cfg.get("beta2", 0.95)
    eps, wd, clip = opt_cfg.get("eps", 1e-8), opt_cfg.get("weight_decay", 0.0), opt_cfg.get("grad_clip", 1.0)
    names = list(model.params.keys())
    embeds = {"model__embed_tokens__weight"}
    decay = {n: model.params[n].dim() >= 2 and (opt_cfg.get("decay_embeddings", False) or n not in embeds) for n in names}
    m = {n: torch.zeros_like(model.params[n]) for n in names}
    v = {n: torch.zeros_like(model.params[n]) for n in names}

    lathe = {}
    for line in open(os.path.join(a.run_dir, "metrics.jsonl")):
        j = json.loads(line)
        if "loss" in j:
            lathe[j["step"]] = j["loss"]

    worst, cursor = 0.0, 0
    steps = min(a.steps, total)
    for step in range(steps):
        for n in names:
            model.params[n].grad = None
        loss_sum = 0.0
        for _ in range(accum):
            x, y = loader.batch(cursor, B)
            cursor += B
            loss = torch.nn.functional.cross_entropy(model(x).reshape(-1, cfg["vocab_size"]), y.reshape(-1))
            (loss / accum).backward()
            loss_sum += loss.item()
        loss_val = loss_sum / accum
        with torch.no_grad():
            gnorm = math.sqrt(sum(float((model.params[n].grad.double() ** 2).sum()) for n in names))
            scale = clip / gnorm if clip > 0 and gnorm > clip else 1.0
            lr, t = lr_at(step, sch, peak, total), step + 1
            for n in names:
                g = model.params[n].grad * scale
                m[n].mul_(b1).add_(g, alpha=1 - b1)
                v[n].mul_(b2).add_(g * g, alpha=1 - b2)
                mh, vh = m[n] / (1 - b1**t), v[n] / (1 - b2**t)
                th = model.params[n]
                th.sub_(lr * (mh / (vh.sqrt() + eps) + (wd if decay[n] else 0.0) * th))
        ref = lathe.get(step + 1)
        rel = abs(loss_val - ref) / abs(ref) if ref is not None else float("nan")
        worst = max(worst, rel) if ref is not None else worst
        if step < 5 or (step + 1) % 10 == 0:
            print(f"step {step + 1:4d}  torch {loss_val:.6f}  lathe {ref:.6f}  rel {rel:.2e}", flush=True)
    print(f"max relative loss difference over {steps} steps: {worst:.2e} (tolerance {a.rtol:g})")
    sys.exit(0 if worst <= a.rtol else 1)


if __name__ == "__main__":
    main()
