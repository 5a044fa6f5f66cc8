#!/usr/bin/env python3
"""Time per op from a `perf record --call-graph dwarf` profile of a lathe binary: each sample is charged
to the innermost lathe op on its stack (linear, linear_cross_entropy, attention, layer_norm, ...), split
into forward and backward (a `lathe::backward` frame on the stack), and to the leaf kind (GEMM
micro-kernel, GEMM packing, kernel page faults, other). Prints a table in ms per step.

    perf script -i perf.data -F comm,tid,time,ip,sym --no-inline > /tmp/stacks.txt
    python3 bench/perf_ops.py /tmp/stacks.txt --steps 1 [--interval-ms 4]

--interval-ms: the sampling period (1000 / perf record -F); --steps: timed steps in the profile.
"""
import argparse
import collections
import re
import sys

# Innermost match wins; order matters only among names that can nest (checked leaf upwards).
OPS = [
    ("head+loss (linear_cross_entropy)", re.compile(r"lathe::linear_cross_entropy|chunk_logits|gemm_head")),
    ("attention", re.compile(r"scaled_dot_product_attention|attention_(forward|backward)|softmax_row|lathe::attn::")),
    ("gated_mlp", re.compile(r"lathe::gated_mlp")),
    ("linear", re.compile(r"lathe::linear\b|lathe::linear\(|lathe::linear_pair|LinearJob")),
    ("layer_norm", re.compile(r"lathe::layer_norm")),
    ("rms_norm", re.compile(r"lathe::rms_norm")),
    ("rope", re.compile(r"lathe::(apply_)?rope")),
    ("activation", re.compile(r"lathe::activation")),
    ("embedding", re.compile(r"lathe::embedding")),
    ("elementwise (add/mul)", re.compile(r"lathe::(add|mul|add_into|elementwise)|add_into")),
    ("reshape/copy", re.compile(r"Tensor::(contiguous|copy_from|clone)|lathe::(reshape|transpose|permute|split)")),
    ("autograd (accumulate/free)", re.compile(r"accumulate_grad|lathe::backward")),
    ("zero_grad / alloc", re.compile(r"zero_grad|Tensor::zeros|Tensor::empty|Storage::allocate")),
]


def leaf_kind(sym):
    if "ukernel" in sym:
        return "gemm ukernel"
    if "pack" in sym:
        return "gemm pack"
    if sym.startswith("[k]") or "page_fault" in sym or "clear_page" in sym:
        return "kernel"
    if "memset" in sym or "memmove" in sym or "memcpy" in sym:
        return "mem*"
    return "other"


def parse(path):
    """Yields stacks (leaf first) of symbol names from `perf script` output."""
    stack = []
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line.strip():
                if stack:
                    yield stack
                stack = []
                continue
            if not line.startswith((" ", "\t")):
                continue  # the sample header line
            parts = line.strip().split(None, 1)
            sym = parts[1] if len(parts) > 1 else parts[0]
            sym = re.sub(r"\s+\(\S+\)$", "", sym)  # drop the trailing (dso)
            if "[kernel" in line or "kallsyms" in line:
                sym = "[k]" + sym
            stack.append(sym)
    if stack:
        yield stack


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("stacks")
    ap.add_argument("--steps", type=float, default=1)
    ap.add_argument("--interval-ms", type=float, default=4.0)
    a = ap.parse_args()
    table = collections.Counter()
    leaves = collections.defaultdict(collections.Counter)
    total = 0
    for st in parse(a.stacks):
        total += 1
        phase = "bwd" if any("lathe::backward" in s for s in st) else "fwd"
        op = "other"
        for s in st:  # leaf upwards: the innermost op
            hit = next((name for name, rx in OPS if rx.search(s)), None)
            if hit:
                op = hit
                break
        table[(op, phase)] += 1
        leaves[(op, phase)][leaf_kind(st[0])] += 1
    ms = a.interval_ms / a.steps
    print(f"{total} samples, {total * ms:.0f} ms of CPU per step (sampling every {a.interval_ms} ms, {a.steps:g} step(s))\n")
    print("| op | phase | ms/step | % | leaves (ms): ukernel / pack / kernel / mem* / other |")
    print("| --- | --- | --- | --- | --- |")
    for (op, phase), n in table.most_common():
        lv = leaves[(op, phase)]
        parts = " / ".join(f"{lv[k] * ms:.0f}" for k in ("gemm ukernel", "gemm pack", "kernel", "mem*", "other"))
        print(f"| {op} | {phase} | {n * ms:.0f} | {100 * n / total:.1f}% | {parts} |")


if __name__ == "__main__":
    sys.exit(main())
