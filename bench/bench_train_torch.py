#!/usr/bin/python3
"""The PyTorch side of bench/bench_train (not a test): the same models as bench_train.c builds
(bench/models.c; bench/bench_remat_torch.py uses them too, ResNet-50 and BERT-base included),
trained by one step at a time on the CPU, timed and measured on request.

bench_train runs it with --serve and speaks one line a command, one line an answer ("ok ..." or
"error ..."):
  hello                   ok torch=VERSION threads=N
  build OPT NAME k=v ...  a fresh model of that shape and its optimizer (sgd: momentum 0.9,
                          lr 0.01; adam: the defaults), a random batch: ok params=N
  check DIR               the parameters (NAME.npy, clrun's layout: a Linear's weight [in, out]
                          is transposed) and the batch (feed0.npy, feed1.npy) from DIR, a fresh
                          optimizer, two steps: ok loss0=L loss1=L (each the step's loss before
                          its update)
  time K                  K steps: ok ms=a,b,... cpu=a,b,... idle_cpu=C (wall and process CPU time
                          of each step; C: the process's CPU time in ms since the last `time`
                          ended, while the other side ran: threads spinning idle show there)
  mem                     the memory of one step: ok base=B peak=P rss_rise=R
  quit
A step is zero_grad(set_to_none=True), forward, cross-entropy (the mean over rows), backward,
optimizer.step() and loss.item().

Memory: base is the bytes of the tensors alive when a step starts (parameters, optimizer state,
the batch; gradients are None); peak is base plus the highest running sum of the allocation
and free events that torch.profiler(profile_memory=True) records over one step (every block
PyTorch's CPU allocator hands out, oneDNN's included; not OpenBLAS's own buffers, malloc's
overhead or Python objects). rss_rise is the process's peak RSS during another step (VmHWM after
writing 5 to /proc/self/clear_refs) less its RSS before it: malloc's retained memory blurs it.

By hand: bench/bench_train_torch.py [--threads T] OPT NAME k=v ...   (prints the same figures)
"""
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def parse_config(words):
    name = words[0]
    values = {}
    for w in words[1:]:
        k, v = w.split("=", 1)
        values[k] = int(v)
    return name, values


class MLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        width = c["in"]
        for i in range(c["depth"]):
            setattr(self, "fc%d" % (i + 1), nn.Linear(width, c["hidden"]))
            width = c["hidden"]
        setattr(self, "fc%d" % (c["depth"] + 1), nn.Linear(width, c["classes"]))
        self.depth = c["depth"]

    def forward(self, x):
        for i in range(self.depth):
            x = F.relu(getattr(self, "fc%d" % (i + 1))(x))
        return getattr(self, "fc%d" % (self.depth + 1))(x)


class BasicBlock(nn.Module):
    """ResNet's basic block without batch norm (clrun's batchnorm has no training mode yet)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1)
        self.downsample = nn.Conv2d(cin, cout, 1, stride, 0) if stride != 1 or cin != cout else None

    def forward(self, x):
        h = self.conv2(F.relu(self.conv1(x)))
        return F.relu(h + (self.downsample(x) if self.downsample is not None else x))


class ResNet18(nn.Module):
    def __init__(self, c):
        super().__init__()
        w = c["width"]
        self.conv1 = nn.Conv2d(3, w, 7, 2, 3)
        cin = w
        for stage in range(4):
            cout = w << stage
            blocks = []
            for block in range(2):
                blocks.append(BasicBlock(cin, cout, 2 if stage > 0 and block == 0 else 1))
                cin = cout
            setattr(self, "layer%d" % (stage + 1), nn.Sequential(*blocks))
        self.fc = nn.Linear(cin, c["classes"])

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv1(x)), 3, 2, 1)
        for stage in range(4):
            h = getattr(self, "layer%d" % (stage + 1))(h)
        return self.fc(h.mean((2, 3)))


class Bottleneck(nn.Module):
    """ResNet-50's bottleneck (torchvision's v1.5, the stride on the 3x3) without batch norm."""

    def __init__(self, cin, mid, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, mid, 1, 1, 0)
        self.conv2 = nn.Conv2d(mid, mid, 3, stride, 1)
        self.conv3 = nn.Conv2d(mid, 4 * mid, 1, 1, 0)
        self.downsample = nn.Conv2d(cin, 4 * mid, 1, stride, 0) if stride != 1 or cin != 4 * mid else None

    def forward(self, x):
        h = self.conv3(F.relu(self.conv2(F.relu(self.conv1(x)))))
        return F.relu(h + (self.downsample(x) if self.downsample is not None else x))


class ResNet50(ResNet18):
    """ResNet-50's layout: 3+4+6+3 bottleneck blocks (bench_remat)."""

    def __init__(self, c):
        nn.Module.__init__(self)
        w = c["width"]
        self.conv1 = nn.Conv2d(3, w, 7, 2, 3)
        cin = w
        for stage, count in enumerate((3, 4, 6, 3)):
            mid = w << stage
            blocks = []
            for block in range(count):
                blocks.append(Bottleneck(cin, mid, 2 if stage > 0 and block == 0 else 1))
                cin = 4 * mid
            setattr(self, "layer%d" % (stage + 1), nn.Sequential(*blocks))
        self.fc = nn.Linear(cin, c["classes"])


class EncoderLayer(nn.Module):
    """Post-LN: x = ln1(x + attention(x)); x = ln2(x + ff2(gelu(ff1(x)))). No mask, no dropout."""

    def __init__(self, d, heads, ff):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln1 = nn.LayerNorm(d)
        self.ff1 = nn.Linear(d, ff)
        self.ff2 = nn.Linear(ff, d)
        self.ln2 = nn.LayerNorm(d)

    def forward(self, x):
        b, s, d = x.shape
        dh = d // self.heads
        q, k, v = (t.reshape(b, s, self.heads, dh).transpose(1, 2) for t in self.qkv(x).split(d, dim=-1))
        p = torch.softmax((q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(dh)), dim=-1)
        ctx = (p @ v).transpose(1, 2).reshape(b, s, d)
        x = self.ln1(x + self.proj(ctx))
        return self.ln2(x + self.ff2(F.gelu(self.ff1(x))))


class Bert(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["d"]
        self.tok_emb = nn.Embedding(c["vocab"], d)
        self.pos_emb = nn.Parameter(torch.randn(c["seq"], d) * 0.02)
        nn.init.normal_(self.tok_emb.weight, 0.0, 0.02)
        self.emb_ln = nn.LayerNorm(d)
        self.layers = nn.ModuleList(EncoderLayer(d, c["heads"], c["ff"]) for _ in range(c["layers"]))
        self.head = nn.Linear(d, c["vocab"])

    def forward(self, ids):
        h = self.emb_ln(self.tok_emb(ids) + self.pos_emb)
        for layer in self.layers:
            h = layer(h)
        return self.head(h)


MODELS = {"mlp": MLP, "resnet18": ResNet18, "resnet50": ResNet50, "bert": Bert, "bert_base": Bert}


def tensor_bytes(t):
    return t.numel() * t.element_size()


class Bench:
    def __init__(self, threads):
        torch.set_num_threads(threads)
        self.threads = threads
        self.idle_since = None  # process time at the end of the last `time`

    def make_optimizer(self):
        if self.opt_name == "sgd":
            return torch.optim.SGD(self.model.parameters(), lr=0.01, momentum=0.9)
        return torch.optim.Adam(self.model.parameters())

    def build(self, opt_name, words):
        name, c = parse_config(words)
        torch.manual_seed(0)
        self.name, self.config, self.opt_name = name, c, opt_name
        self.idle_since = None
        self.model = MODELS[name](c)
        self.opt = self.make_optimizer()
        classes = c["vocab"] if name.startswith("bert") else c["classes"]
        if name == "mlp":
            self.x = torch.rand(c["batch"], c["in"]) * 2 - 1
            self.y = torch.randint(0, classes, (c["batch"],))
        elif name.startswith("resnet"):
            self.x = torch.rand(c["batch"], 3, c["image"], c["image"]) * 2 - 1
            self.y = torch.randint(0, classes, (c["batch"],))
        else:
            self.x = torch.randint(0, c["vocab"], (c["batch"], c["seq"]))
            self.y = torch.randint(0, classes, (c["batch"], c["seq"]))
        return "params=%d" % sum(p.numel() for p in self.model.parameters())

    def loss(self):
        logits = self.model(self.x)
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), self.y.reshape(-1))

    def body(self):
        """Forward, loss, backward, update: the step less zero_grad."""
        loss = self.loss()
        loss.backward()
        self.opt.step()
        return loss.item()

    def step(self):
        self.opt.zero_grad(set_to_none=True)
        return self.body()

    def check(self, directory):
        linear = {name + ".weight" for name, m in self.model.named_modules() if isinstance(m, nn.Linear)}
        with torch.no_grad():
            for name, p in self.model.named_parameters():
                a = np.load(os.path.join(directory, name + ".npy"))
                if name in linear:
                    a = a.T  # clrun's matmul weight is [in, out], nn.Linear's [out, in]
                if a.shape != tuple(p.shape):
                    raise ValueError("%s: clrun's is %s, PyTorch's %s" % (name, a.shape, tuple(p.shape)))
                p.copy_(torch.from_numpy(np.ascontiguousarray(a)))
        self.x = torch.from_numpy(np.load(os.path.join(directory, "feed0.npy")))
        if self.x.dtype != torch.float32:
            self.x = self.x.long()
        self.y = torch.from_numpy(np.load(os.path.join(directory, "feed1.npy"))).long()
        self.opt = self.make_optimizer()
        return "loss0=%.9g loss1=%.9g" % (self.step(), self.step())

    def time(self, k):
        idle = (time.process_time() - self.idle_since) * 1e3 if self.idle_since is not None else 0.0
        ms, cpu = [], []
        for _ in range(k):
            c0, t0 = time.process_time(), time.perf_counter()
            self.step()
            ms.append((time.perf_counter() - t0) * 1e3)
            cpu.append((time.process_time() - c0) * 1e3)
        self.idle_since = time.process_time()
        return "ms=%s cpu=%s idle_cpu=%.3f" % (",".join("%.4f" % v for v in ms), ",".join("%.4f" % v for v in cpu),
                                               idle)

    def live_bytes(self):
        total = sum(tensor_bytes(p) for p in self.model.parameters())
        total += sum(tensor_bytes(p.grad) for p in self.model.parameters() if p.grad is not None)
        for state in self.opt.state.values():
            total += sum(tensor_bytes(v) for v in state.values() if torch.is_tensor(v))
        return total + tensor_bytes(self.x) + tensor_bytes(self.y)

    def mem(self):
        from torch.profiler import ProfilerActivity, profile

        self.opt.zero_grad(set_to_none=True)
        base = self.live_bytes()
        with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
            self.body()
        events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
        events.sort(key=lambda e: e.start_us())  # stable: ties keep their recorded order
        running = high = 0
        for e in events:
            running += e.nbytes()
            high = max(high, running)
        rss_rise = -1
        self.opt.zero_grad(set_to_none=True)
        try:
            before = read_status("VmRSS")
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.body()
            rss_rise = read_status("VmHWM") - before
        except OSError:
            pass
        return "base=%d peak=%d rss_rise=%d" % (base, base + high, rss_rise)


def read_status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise OSError("no " + key)


def serve(bench):
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        try:
            if words[0] == "quit":
                return
            if words[0] == "hello":
                answer = "torch=%s threads=%d" % (torch.__version__, torch.get_num_threads())
            elif words[0] == "build":
                answer = bench.build(words[1], words[2:])
            elif words[0] == "check":
                answer = bench.check(words[1])
            elif words[0] == "time":
                answer = bench.time(int(words[1]))
            elif words[0] == "mem":
                answer = bench.mem()
            else:
                raise ValueError("unknown command " + words[0])
            print("ok " + answer, flush=True)
        except Exception as e:  # the answer says what failed; the bench goes on
            print("error %s: %s" % (type(e).__name__, str(e).replace("\n", " ")), flush=True)


def main():
    args = sys.argv[1:]
    threads = os.cpu_count() or 1
    if len(args) >= 2 and args[0] == "--threads":
        threads = int(args[1])
        args = args[2:]
    if args and args[0] == "--serve":
        args = args[1:]
        if len(args) >= 2 and args[0] == "--threads":
            threads = int(args[1])
        serve(Bench(threads))
        return
    if len(args) < 2:
        sys.exit("usage: bench_train_torch.py [--threads T] (--serve | OPT NAME k=v ...)")
    bench = Bench(threads)
    print(bench.build(args[0], args[1:]))
    bench.time(2)
    print(bench.time(5))
    print(bench.mem())


if __name__ == "__main__":
    main()
