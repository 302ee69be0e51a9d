#!/usr/bin/python3
"""The PyTorch side of bench/bench_remat (not a test): one model of bench/bench_train_torch.py
(the same architectures as bench/models.c builds), trained one step at a time on the CPU, without
checkpointing and then under torch.utils.checkpoint.checkpoint_sequential (non-reentrant) at the
segment count clrun's sqrt_n uses. Prints two lines, or one saying why it cannot run (exit 3
when torch or numpy is missing).

  bench_remat_torch.py [--threads T] [--repeat N] [--segments S] [--optimizer sgd|adam] NAME k=v ...

checkpoint_sequential runs a list of modules; the models become one (mlp: each Linear and ReLU;
resnet: the stem, each block, the pool and fc; bert: the embeddings, each encoder layer, the
head), so S is capped at that list's length (bench_remat passes about the square root of the
model's nodes, which can be more than a model has blocks: the line says what was used). A step is
zero_grad(set_to_none=True), forward, cross-entropy, backward, optimizer.step() and loss.item();
the time is the median of N steps after two. Memory as bench_train_torch.py measures it: peak is
the bytes alive when the step starts (parameters, optimizer state, the batch) plus the highest
running sum of torch.profiler's allocation events over a step; act is peak less the parameters
and the optimizer state (clrun's activation_peak_bytes: the batch included).
"""
import math
import os
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    from torch.utils.checkpoint import checkpoint, checkpoint_sequential

    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import bench_train_torch as btt
except ImportError as e:
    print("PyTorch: not run (%s: %s)" % (sys.executable, e))
    sys.exit(3)


class Lambda(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def parts(name, model):
    """The model as a list of modules that checkpoint_sequential runs one after another."""
    if name == "mlp":
        out = []
        for i in range(model.depth):
            out += [getattr(model, "fc%d" % (i + 1)), nn.ReLU()]
        return out + [getattr(model, "fc%d" % (model.depth + 1))]
    if name.startswith("resnet"):
        out = [Lambda(lambda x: F.max_pool2d(F.relu(model.conv1(x)), 3, 2, 1))]
        for stage in range(4):
            out += list(getattr(model, "layer%d" % (stage + 1)))
        return out + [Lambda(lambda h: model.fc(h.mean((2, 3))))]
    out = [Lambda(lambda ids: model.emb_ln(model.tok_emb(ids) + model.pos_emb))]
    return out + list(model.layers) + [model.head]


def checkpoint_sequential_nonreentrant(functions, segments, x):
    """checkpoint_sequential's segmentation (torch 2's code), each segment but the last under
    checkpoint(use_reentrant=False): for a PyTorch whose checkpoint_sequential cannot be asked
    for that (1.13's runs the reentrant variant, which gives no gradient to the first segment's
    parameters when its input, token ids, needs none)."""

    def run(start, end):
        def forward(h):
            for j in range(start, end + 1):
                h = functions[j](h)
            return h

        return forward

    size = len(functions) // segments
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        x = checkpoint(run(start, end), x, use_reentrant=False)
    return run(end + 1, len(functions) - 1)(x)


class RematBench(btt.Bench):
    segments = 0  # 0: no checkpointing
    native = True  # torch's checkpoint_sequential takes use_reentrant

    def loss(self):
        if self.segments and self.native:
            try:
                logits = checkpoint_sequential(self.parts, self.segments, self.x, use_reentrant=False)
            except (TypeError, ValueError) as e:  # "Unexpected keyword arguments: use_reentrant" (1.13)
                if "use_reentrant" not in str(e):
                    raise
                self.native = False
        if self.segments and not self.native:
            logits = checkpoint_sequential_nonreentrant(self.parts, self.segments, self.x)
        elif not self.segments:
            logits = self.model(self.x)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), self.y.reshape(-1))

    def measure(self, repeat):
        self.opt.zero_grad(set_to_none=True)
        for _ in range(2):
            self.step()
        ms = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            self.step()
            ms.append((time.perf_counter() - t0) * 1e3)
        ms.sort()
        median = ms[repeat // 2] if repeat % 2 else (ms[repeat // 2 - 1] + ms[repeat // 2]) / 2
        mem = dict(kv.split("=") for kv in self.mem().split())
        state = sum(btt.tensor_bytes(p) for p in self.model.parameters())
        for s in self.opt.state.values():
            state += sum(btt.tensor_bytes(v) for v in s.values() if torch.is_tensor(v))
        peak = int(mem["peak"])
        return median, peak, peak - state


def main():
    args = sys.argv[1:]
    threads, repeat, segments, opt = os.cpu_count() or 1, 5, 0, "sgd"
    while args and args[0].startswith("--") and len(args) >= 2:
        key, value = args[0], args[1]
        if key == "--threads":
            threads = int(value)
        elif key == "--repeat":
            repeat = int(value)
        elif key == "--segments":
            segments = int(value)
        elif key == "--optimizer":
            opt = value
        else:
            sys.exit("bench_remat_torch.py: unknown option " + key)
        args = args[2:]
    if not args:
        sys.exit("usage: bench_remat_torch.py [--threads T] [--repeat N] [--segments S] [--optimizer sgd|adam] "
                 "NAME k=v ...")
    bench = RematBench(threads)
    bench.build(opt, args)
    name = args[0]
    bench.parts = parts(name, bench.model)
    used = max(1, min(segments or int(math.sqrt(len(bench.parts))), len(bench.parts)))
    MIB = 1024.0 * 1024.0
    base_ms, base_peak, base_act = bench.measure(repeat)
    print("PyTorch %s (%d threads), no checkpointing: %.2f ms, peak %.2f MiB, act %.2f MiB"
          % (torch.__version__, torch.get_num_threads(), base_ms, base_peak / MIB, base_act / MIB))
    bench.segments = used
    ms, peak, act = bench.measure(repeat)
    print("PyTorch checkpoint_sequential%s, %d segments of %d modules (sqrt_n's %d): %.2f ms (%.2fx), peak %.2f MiB, "
          "act %.2f MiB (%.3f of no checkpointing)"
          % ("" if bench.native else " (its segments, checkpoint(use_reentrant=False): this torch's cannot)",
             used, len(bench.parts), segments, ms, ms / base_ms, peak / MIB, act / MIB, act / base_act))


if __name__ == "__main__":
    main()
