#!/usr/bin/env python3
"""Generates the allocation traces under tests/data/traces/ (id,lower,upper,size CSV).

Deterministic (fixed seeds, integer arithmetic only), so re-running it rewrites the same files:
    python3 tests/data/traces/gen_traces.py tests/data/traces

resnet50_train.csv  ResNet-50 training step, batch 32, fp32: forward activations live until the
                    backward op that needs them, gradients from their producer's backward to
                    their consumer's, weight gradients until the optimizer step, short-lived
                    convolution workspaces.
resnet50_infer.csv  ResNet-50 inference, batch 32: each activation freed after its last use.
growing.csv         Adversarial for a binned pool: two live buffers whose sizes grow by 7% per
                    step, so no freed block's bin is ever asked for again.
random.csv          Random lifetimes (geometric), log-uniform sizes from 256 B to 16 MiB.
"""
import os
import random
import sys


def write(path, rows):
    with open(path, "w") as f:
        f.write("id,lower,upper,size\n")
        for i, (lo, up, size) in enumerate(rows):
            assert up > lo and size > 0
            f.write(f"{i},{lo},{up},{size}\n")


def resnet50(batch, training):
    """Ops of ResNet-50: (output_bytes, input_op_ids, weight_bytes, workspace_bytes)."""
    ops = []

    def op(size, inputs, weights=0, workspace=0):
        ops.append((size * 4 * batch, inputs, weights * 4, workspace * 4 * batch))
        return len(ops) - 1

    x = op(3 * 224 * 224, [])  # the input
    c = op(64 * 112 * 112, [x], 64 * 3 * 49, 3 * 49 * 112 * 112 // 8)
    c = op(64 * 112 * 112, [c], 128)          # batch norm
    c = op(64 * 112 * 112, [c])               # relu
    h = op(64 * 56 * 56, [c])                 # max pool
    cin = 64
    for width, blocks, side in ((64, 3, 56), (128, 4, 28), (256, 6, 14), (512, 3, 7)):
        for b in range(blocks):
            s = side * side
            a = op(width * s, [h], cin * width)
            a = op(width * s, [a], 2 * width)
            a = op(width * s, [a])
            a = op(width * s, [a], width * width * 9, width * 9 * s // 4)
            a = op(width * s, [a], 2 * width)
            a = op(width * s, [a])
            a = op(4 * width * s, [a], width * 4 * width)
            a = op(4 * width * s, [a], 8 * width)
            short = h
            if b == 0:
                short = op(4 * width * s, [h], cin * 4 * width)
                short = op(4 * width * s, [short], 8 * width)
            a = op(4 * width * s, [a, short])  # add
            h = op(4 * width * s, [a])         # relu
            cin = 4 * width
    p = op(2048, [h])                          # average pool
    op(1000, [p], 2048 * 1000)                 # fully connected

    n = len(ops)
    consumers = [[] for _ in range(n)]
    for i, (_, inputs, _, _) in enumerate(ops):
        for j in inputs:
            consumers[j].append(i)
    rows = []
    if not training:
        for i, (size, _, _, ws) in enumerate(ops):
            last = max(consumers[i]) if consumers[i] else i
            rows.append((i, last + 1, size))
            if ws:
                rows.append((i, i + 1, ws))
        return rows
    # Forward op i runs at moment i, its backward at moment 2n - i, the optimizer at 2n + 1.
    end = 2 * n + 1
    for i, (size, inputs, weights, ws) in enumerate(ops):
        first_use = min(consumers[i]) if consumers[i] else i
        rows.append((i, 2 * n - first_use + 1, size))       # saved for backward
        if ws:
            rows.append((i, i + 1, ws))                       # forward workspace
            rows.append((2 * n - i, 2 * n - i + 1, ws))       # backward workspace
        if weights:
            rows.append((2 * n - i, end + 1, weights))        # weight gradient
        if i > 0:                                             # gradient of the output
            born = 2 * n - max(consumers[i]) if consumers[i] else 2 * n - i - 1
            rows.append((born, 2 * n - i + 1, size))
    return rows


def growing():
    rows, live, size, t = [], [], 1 << 20, 0
    for _ in range(64):
        if len(live) == 2:
            lo, s = live.pop(0)
            rows.append((lo, t, s))
        live.append((t, size))
        size = size * 107 // 100
        t += 1
    rows += [(lo, t, s) for lo, s in live]
    return rows


def random_trace(seed, n):
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        lo = rng.randrange(n // 4)
        life = 1
        while rng.randrange(16):
            life += 1
        size = int(256 * (65536 ** rng.random()))
        rows.append((lo, lo + life, size))
    return rows


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    write(os.path.join(out, "resnet50_train.csv"), resnet50(32, True))
    write(os.path.join(out, "resnet50_infer.csv"), resnet50(32, False))
    write(os.path.join(out, "growing.csv"), growing())
    write(os.path.join(out, "random.csv"), random_trace(7, 2000))


if __name__ == "__main__":
    main()
