#!/usr/bin/env python3
"""The PyTorch side of bench/train_step_bench.cc: one training step, forward + cross-entropy + backward, no
optimizer, fp32, random init and random token ids, in self-written nn.Modules of the same architectures.
--optimizer adds clipping and AdamW; --lora-rank R trains LoRA adapters instead of every weight.

    OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 \\
    LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp \\
    /usr/bin/python3 bench/torch_train_step.py --model gpt2 --threads 2 --batch 4 --seq 64

  gpt2       GPT-2 124M: learned positions, pre-LayerNorm, GELU (tanh), biases, tied head
  llama110m  Llama-style 110M (dim 768, 12 layers, 12 heads, ffn 2048, vocab 32000): RMSNorm, SwiGLU,
             RoPE (theta 1e4), no biases, tied head

LoRA (--lora-rank R, --lora-alpha, default 32), as PEFT's lora.Linear and train_step_bench.cc --lora_rank:
every Linear of the decoder layers (all-linear: Llama's q, k, v, o, gate, up, down; GPT-2's c_attn, c_proj,
c_fc, mlp c_proj) becomes base(x) + alpha/R * B(A(x)), A kaiming-uniform(a=sqrt(5)), B = 0, no dropout; every
base parameter has requires_grad False; with --optimizer, clipping and AdamW (decay 0.1) see the adapters only.

Warm-up steps, then the median of --steps steps; prints one JSON line. FLOPs per step use the same formula
as train_step_bench.cc: 6 * N * B*T + 12 * L * T * C * B*T (N = parameters, tied embedding once); with LoRA
(4 * N + 6 * N_lora) * B*T + 12 * L * T * C * B*T (the frozen base has no weight gradient).
"peak_rss_mib" is resource.getrusage's ru_maxrss after the timed steps (the whole process).
Needs Debian python3-torch with libopenblas0-openmp: without OpenBLAS, torch falls back to the reference
BLAS and is ~12x slower (the JSON's "blas" field says which library was loaded). OpenBLAS picks its kernel
for the CPU itself; "openblas_corename" (openblas_get_corename() of the loaded library) says which it chose.
Debian's OpenBLAS 0.3.21 does not know Zen 5 and falls back to "Prescott" (SSE3 kernels, ~5x slower than its
AVX-512 ones): there set OPENBLAS_CORETYPE to a kernel the CPU can run (run_all.sh: TORCH_OPENBLAS_CORETYPE).
"""
import argparse
import ctypes
import json
import math
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SHAPES = {
    "gpt2": dict(dim=768, n_layers=12, n_heads=12, ffn=3072, vocab=50257, ctx=1024),
    "llama110m": dict(dim=768, n_layers=12, n_heads=12, ffn=2048, vocab=32000, ctx=2048, rope_theta=10000.0),
}


def causal_attention(q, k, v):
    """q, k, v [B, H, T, D] -> [B, H, T, D]; explicit softmax(QK^T/sqrt(D) + mask) V, as HF's eager path."""
    t = q.size(-2)
    att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.size(-1)))
    mask = torch.ones(t, t, dtype=torch.bool, device=q.device).triu(1)
    att = att.masked_fill(mask, float("-inf"))
    return F.softmax(att, dim=-1) @ v


# --- GPT-2 -----------------------------------------------------------------------------------------
class Gpt2Block(nn.Module):
    def __init__(self, c, h, f):
        super().__init__()
        self.h = h
        self.ln_1, self.ln_2 = nn.LayerNorm(c, eps=1e-5), nn.LayerNorm(c, eps=1e-5)
        self.c_attn, self.c_proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.c_fc, self.mlp_proj = nn.Linear(c, f), nn.Linear(f, c)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.h, c // self.h).transpose(1, 2) for z in (q, k, v))
        y = causal_attention(q, k, v).transpose(1, 2).reshape(b, t, c)
        x = x + self.c_proj(y)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class Gpt2(nn.Module):
    def __init__(self, s):
        super().__init__()
        c = s["dim"]
        self.wte, self.wpe = nn.Embedding(s["vocab"], c), nn.Embedding(s["ctx"], c)
        self.blocks = nn.ModuleList(Gpt2Block(c, s["n_heads"], s["ffn"]) for _ in range(s["n_layers"]))
        self.ln_f = nn.LayerNorm(c, eps=1e-5)
        for name, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)
            elif "ln" in name and name.endswith("weight"):
                nn.init.ones_(p)
            else:
                nn.init.zeros_(p)

    def forward(self, ids):
        pos = torch.arange(ids.size(1), device=ids.device)
        x = self.wte(ids) + self.wpe(pos)
        for blk in self.blocks:
            x = blk(x)
        return F.linear(self.ln_f(x), self.wte.weight)  # tied head


# --- Llama ------------------------------------------------------------------------------------------
class RMSNorm(nn.Module):
    def __init__(self, c, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(c))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(t, d, theta):
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    ang = torch.outer(torch.arange(t, dtype=torch.float32), inv)  # [T, D/2]
    ang = torch.cat([ang, ang], dim=-1)  # HF's rotate_half layout
    return ang.cos(), ang.sin()


def apply_rope(x, cos, sin):
    x1, x2 = x.chunk(2, dim=-1)
    return x * cos + torch.cat([-x2, x1], dim=-1) * sin


class LlamaBlock(nn.Module):
    def __init__(self, c, h, f):
        super().__init__()
        self.h = h
        self.input_layernorm, self.post_attention_layernorm = RMSNorm(c), RMSNorm(c)
        self.q_proj, self.k_proj = nn.Linear(c, c, bias=False), nn.Linear(c, c, bias=False)
        self.v_proj, self.o_proj = nn.Linear(c, c, bias=False), nn.Linear(c, c, bias=False)
        self.gate_proj, self.up_proj = nn.Linear(c, f, bias=False), nn.Linear(c, f, bias=False)
        self.down_proj = nn.Linear(f, c, bias=False)

    def forward(self, x, cos, sin):
        b, t, c = x.shape
        hx = self.input_layernorm(x)
        q, k, v = (p(hx).view(b, t, self.h, c // self.h).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        x = x + self.o_proj(causal_attention(q, k, v).transpose(1, 2).reshape(b, t, c))
        hx = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(hx)) * self.up_proj(hx))


class Llama(nn.Module):
    def __init__(self, s):
        super().__init__()
        c = s["dim"]
        self.theta, self.hd = s["rope_theta"], c // s["n_heads"]
        self.embed_tokens = nn.Embedding(s["vocab"], c)
        self.layers = nn.ModuleList(LlamaBlock(c, s["n_heads"], s["ffn"]) for _ in range(s["n_layers"]))
        self.norm = RMSNorm(c)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, ids):
        cos, sin = rope_tables(ids.size(1), self.hd, self.theta)
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x, cos, sin)
        return F.linear(self.norm(x), self.embed_tokens.weight)  # tied head


# --- LoRA -------------------------------------------------------------------------------------------
class LoraLinear(nn.Module):
    """PEFT's lora.Linear without dropout: base(x) + scaling * lora_B(lora_A(x)), scaling = alpha / r."""

    def __init__(self, base, r, alpha):
        super().__init__()
        self.base, self.scaling = base, alpha / r
        self.lora_A = nn.Linear(base.in_features, r, bias=False)
        self.lora_B = nn.Linear(r, base.out_features, bias=False)
        nn.init.kaiming_uniform_(self.lora_A.weight, a=math.sqrt(5))  # PEFT's init_lora_weights=True
        nn.init.zeros_(self.lora_B.weight)

    def forward(self, x):
        return self.base(x) + self.lora_B(self.lora_A(x)) * self.scaling


def add_lora(model, r, alpha):
    """Freezes every parameter, then wraps each Linear of the decoder layers (PEFT's all-linear); returns
    the adapter parameters, the only ones that train."""
    for p in model.parameters():
        p.requires_grad_(False)
    for blk in model.blocks if hasattr(model, "blocks") else model.layers:
        for name, child in list(blk.named_children()):
            if isinstance(child, nn.Linear):
                setattr(blk, name, LoraLinear(child, r, alpha))
    return [p for p in model.parameters() if p.requires_grad]


def embeddings(model):
    return [model.wte.weight, model.wpe.weight] if hasattr(model, "wte") else [model.embed_tokens.weight]


def loaded_blas():
    try:
        with open("/proc/self/maps") as f:
            libs = {line.split()[-1] for line in f if "blas" in line.lower()}
        return sorted(libs)
    except OSError:
        return []


def openblas_corename(blas):
    """OpenBLAS's chosen kernel ("Haswell", "SkylakeX", "Zen", ...) from the library torch loaded, or None."""
    for path in blas:
        if "openblas" not in path.lower():
            continue
        try:
            fn = ctypes.CDLL(path).openblas_get_corename  # already mapped: the same handle torch uses
        except (OSError, AttributeError):
            continue
        fn.restype = ctypes.c_char_p
        return fn().decode()
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(SHAPES), required=True)
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=None, help="default: 64 (gpt2), 256 (llama110m)")
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--optimizer", action="store_true",
                    help="a full training step: + global-norm clipping (1.0) and AdamW (decay 0.1 on matrices)")
    ap.add_argument("--lora-rank", type=int, default=0, help="train LoRA adapters of this rank on all linears")
    ap.add_argument("--lora-alpha", type=float, default=32.0)
    a = ap.parse_args()
    seq = a.seq or (64 if a.model == "gpt2" else 256)

    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    s = SHAPES[a.model]
    model = (Gpt2 if a.model == "gpt2" else Llama)(s).float().train()
    n_params = sum(p.numel() for p in model.parameters())  # tied: the shared tensor counts once
    lora = add_lora(model, a.lora_rank, a.lora_alpha) if a.lora_rank > 0 else None
    n_lora = sum(p.numel() for p in lora) if lora else 0
    ids = torch.randint(0, s["vocab"], (a.batch, seq))
    blas = loaded_blas()
    if not any("openblas" in b for b in blas):
        print(f"torch_train_step.py: warning: OpenBLAS not loaded ({blas}); install libopenblas0-openmp", file=sys.stderr)

    opt = None
    trained = lora if lora else list(model.parameters())
    if a.optimizer and lora:  # as lathe's lora_optim_params: every adapter matrix decays
        opt = torch.optim.AdamW(lora, lr=3e-4, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    elif a.optimizer:
        emb = {id(t) for t in embeddings(model)}  # as lathe: no decay on embeddings, norms and biases
        decay = [p for p in model.parameters() if p.dim() >= 2 and id(p) not in emb]
        no_decay = [p for p in model.parameters() if not (p.dim() >= 2 and id(p) not in emb)]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                lr=3e-4, betas=(0.9, 0.95), eps=1e-8)

    def step():
        model.zero_grad(set_to_none=True)
        logits = model(ids)
        loss = F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), ids[:, 1:].reshape(-1))
        loss.backward()
        if opt is not None:
            torch.nn.utils.clip_grad_norm_(trained, 1.0)
            opt.step()
        return loss.item()

    for _ in range(a.warmup):
        step()
    times, cpu = [], []
    for _ in range(a.steps):
        t0, c0 = time.perf_counter(), time.process_time()
        step()
        times.append(time.perf_counter() - t0)
        cpu.append(time.process_time() - c0)  # CPU seconds of all threads
    med = statistics.median(times)
    tokens = a.batch * seq
    weights = 4.0 * n_params + 6.0 * n_lora if lora else 6.0 * n_params
    flops = weights * tokens + 12.0 * s["n_layers"] * seq * s["dim"] * tokens
    print(json.dumps({
        "impl": "pytorch", "torch": torch.__version__, "optimizer": a.optimizer, "model": a.model, "threads": a.threads,
        "torch_threads": torch.get_num_threads(), "batch": a.batch, "seq": seq, "params": n_params,
        "lora_rank": a.lora_rank, "lora_alpha": a.lora_alpha if lora else None, "lora_params": n_lora,
        "steps": a.steps, "step_s": times, "median_step_s": med,
        "cpu_s": cpu, "median_cpu_s": statistics.median(cpu), "tokens_per_s": tokens / med,
        "gflops_per_step": flops / 1e9, "gflop_per_s": flops / med / 1e9,
        "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, "blas": blas,
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "openblas_coretype": os.environ.get("OPENBLAS_CORETYPE", "auto"),
        "openblas_corename": openblas_corename(blas),
    }))


if __name__ == "__main__":
    main()
