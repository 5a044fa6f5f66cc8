#!/usr/bin/env python3
"""Write the inputs llm.c's CPU trainer (train_gpt2.c) opens, with random contents, into one folder.

    python3 bench/make_llmc_gpt2.py --out bench/out/llmc/run

Files (all relative to the folder train_gpt2 is started in):
  gpt2_124M.bin    checkpoint: 256 x int32 header (magic 20240326, version 3, max_seq_len 1024,
                   vocab_size 50257, num_layers 12, num_heads 12, channels 768, padded_vocab_size 50304),
                   then the fp32 parameters in train_gpt2.c's fill_in_parameter_sizes order:
                   wte [Vp, C], wpe [maxT, C], ln1w [L, C], ln1b [L, C], qkvw [L, 3C, C], qkvb [L, 3C],
                   attprojw [L, C, C], attprojb [L, C], ln2w [L, C], ln2b [L, C], fcw [L, 4C, C],
                   fcb [L, 4C], fcprojw [L, C, 4C], fcprojb [L, C], lnfw [C], lnfb [C].
                   Random init as llm.c's train_gpt2.py / GPT-2: weights ~ Normal(0, 0.02), biases 0,
                   LayerNorm weight 1 / bias 0, the padded wte rows (V..Vp) 0; fixed seed.
  dev/data/tinyshakespeare/tiny_shakespeare_{train,val}.bin
                   token shards: 256 x int32 header (magic 20240520, version 1, token count), then uint16
                   token ids, uniform random < 50257.
  gpt2_tokenizer.bin
                   tokenizer (decode only): 256 x uint32 header (magic 20240328, version 2, vocab 50257,
                   eot 50256), then per token a uint8 length and that many bytes (here the id in decimal
                   plus a space). train_gpt2.c only uses it to print samples, but it is NOT optional in
                   practice: when the file is missing, tokenizer_init leaves tokenizer.eot_token
                   uninitialised and the sampling at step 20 feeds that garbage id to the embedding lookup.

Only numpy is needed (Debian: python3-numpy). The files are ~500 MB; existing ones of the right size are
kept (use --force to rewrite).
"""
import argparse
import os
import sys

try:
    import numpy as np
except ImportError:
    sys.exit("make_llmc_gpt2.py needs numpy (Debian: apt-get install python3-numpy)")

MAXT, V, VP, L, NH, C = 1024, 50257, 50304, 12, 12, 768
EOT = 50256


def param_shapes():
    # name, shape, init kind: "w" Normal(0, 0.02), "one" 1, "zero" 0  (order = fill_in_parameter_sizes)
    return [
        ("wte", (VP, C), "w"), ("wpe", (MAXT, C), "w"),
        ("ln1w", (L, C), "one"), ("ln1b", (L, C), "zero"),
        ("qkvw", (L, 3 * C, C), "w"), ("qkvb", (L, 3 * C), "zero"),
        ("attprojw", (L, C, C), "w"), ("attprojb", (L, C), "zero"),
        ("ln2w", (L, C), "one"), ("ln2b", (L, C), "zero"),
        ("fcw", (L, 4 * C, C), "w"), ("fcb", (L, 4 * C), "zero"),
        ("fcprojw", (L, C, 4 * C), "w"), ("fcprojb", (L, C), "zero"),
        ("lnfw", (C,), "one"), ("lnfb", (C,), "zero"),
    ]


def n_params():
    return sum(int(np.prod(s)) for _, s, _ in param_shapes())


def write_model(path, seed):
    rng = np.random.default_rng(seed)
    header = np.zeros(256, dtype="<i4")
    header[:8] = (20240326, 3, MAXT, V, L, NH, C, VP)
    with open(path + ".tmp", "wb") as f:
        f.write(header.tobytes())
        for name, shape, kind in param_shapes():
            if kind == "w":
                t = rng.standard_normal(shape, dtype=np.float32) * np.float32(0.02)
                if name == "wte":
                    t[V:] = 0.0  # padded vocab rows
            elif kind == "one":
                t = np.ones(shape, dtype=np.float32)
            else:
                t = np.zeros(shape, dtype=np.float32)
            f.write(t.astype("<f4", copy=False).tobytes())
    os.replace(path + ".tmp", path)


def write_shard(path, n, seed, vocab=V):
    """An llm.c token shard (uint16, version 1) of n uniformly random ids in [0, vocab); also used by
    bench/pretrain_bench.py."""
    rng = np.random.default_rng(seed)
    header = np.zeros(256, dtype="<i4")
    header[:3] = (20240520, 1, n)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        f.write(rng.integers(0, vocab, n, dtype=np.int64).astype("<u2").tobytes())


def write_tokenizer(path):
    header = np.zeros(256, dtype="<u4")
    header[:4] = (20240328, 2, V, EOT)
    with open(path, "wb") as f:
        f.write(header.tobytes())
        for i in range(V):
            s = (b"<|endoftext|>" if i == EOT else b"%d " % i)
            f.write(bytes([len(s)]) + s)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder train_gpt2 will run in")
    ap.add_argument("--tokens", type=int, default=1 << 16, help="tokens per shard (train and val)")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--force", action="store_true")
    a = ap.parse_args()

    os.makedirs(os.path.join(a.out, "dev/data/tinyshakespeare"), exist_ok=True)
    model = os.path.join(a.out, "gpt2_124M.bin")
    want = 256 * 4 + n_params() * 4
    if a.force or not os.path.exists(model) or os.path.getsize(model) != want:
        print(f"writing {model} ({n_params()} params, {want / 1e6:.0f} MB)", file=sys.stderr)
        write_model(model, a.seed)
    for split, seed in (("train", a.seed + 1), ("val", a.seed + 2)):
        p = os.path.join(a.out, f"dev/data/tinyshakespeare/tiny_shakespeare_{split}.bin")
        if a.force or not os.path.exists(p) or os.path.getsize(p) != 1024 + 2 * a.tokens:
            write_shard(p, a.tokens, seed)
    tok = os.path.join(a.out, "gpt2_tokenizer.bin")
    if a.force or not os.path.exists(tok):
        write_tokenizer(tok)


if __name__ == "__main__":
    main()
