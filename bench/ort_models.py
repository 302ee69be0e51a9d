#!/usr/bin/python3
"""Exports the model set of bench/bench_ort_models.sh as ONNX, with random weights, at bench time
(never committed): the torchvision architectures from python3-torchvision when it is installed,
else the same architectures written out below (layer for layer as torchvision 0.14 builds them,
eval mode, so batch norms are there to fold), and small torch modules for the rest.

  resnet18        torchvision resnet18, 1x3x224x224
  mobilenet_v3s   torchvision mobilenet_v3_small, 1x3x224x224 (hardswish, squeeze-excite)
  efficientnet_b0 torchvision efficientnet_b0, 1x3x224x224 (silu, squeeze-excite)
  shufflenet_v2   torchvision shufflenet_v2_x1_0, 1x3x224x224 (channel shuffle, split)
  squeezenet      torchvision squeezenet1_1, 1x3x224x224
  seg_aspp        a segmentation head: a strided conv encoder, DeepLab's ASPP (dilated 3x3
                  branches and a global pooling branch), bilinear upsampling, 1x3x256x256
  bert            a BERT-style encoder: 4 layers, d 256, 4 heads, GELU, post-norm, 1x128
  gpt             a GPT-style decoder: 4 layers, d 256, 4 heads, causal mask, pre-norm, 1x128
  unet_convt      a U-Net/DBNet-style decoder: a strided encoder, ConvTranspose 2x2/s2 and
                  4x4/s2 up, skip concatenations, a sigmoid map, 1x3x256x256
  audio_conv1d    an audio front-end: STFT as a Conv1d (400 taps, stride 160, 402 filters),
                  power, log, three Conv1d+BN+ReLU blocks, a mean over time, a linear layer,
                  1x1x16000

Usage: ort_models.py OUTDIR [NAME...]   (prints one `NAME PATH` line per model written)"""
import math
import os
import sys

import torch
from torch import nn
import torch.nn.functional as F

try:
    import torchvision  # noqa: F401
    HAVE_TV = True
except ImportError:
    HAVE_TV = False

torch.manual_seed(20261204)


def conv_bn(cin, cout, k, stride=1, groups=1, act=None, dilation=1):
    pad = (k - 1) // 2 * dilation
    layers = [nn.Conv2d(cin, cout, k, stride, pad, dilation=dilation, groups=groups, bias=False),
              nn.BatchNorm2d(cout)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


def randomize_bn(model):
    """Batch norms with statistics that are not the identity, as a trained model has."""
    for m in model.modules():
        if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d)):
            with torch.no_grad():
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)
    return model


# ---- torchvision architectures, written out ----

class BasicBlock(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = conv_bn(cin, cout, 3, stride, act=nn.ReLU)
        self.conv2 = conv_bn(cout, cout, 3)
        self.down = conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else None

    def forward(self, x):
        identity = x if self.down is None else self.down(x)
        return F.relu(self.conv2(self.conv1(x)) + identity)


def resnet18():
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in [(64, 1), (128, 2), (256, 2), (512, 2)]:
        layers += [BasicBlock(cin, cout, stride), BasicBlock(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000)]
    return nn.Sequential(*layers)


def make_divisible(v, divisor=8):
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


class SqueezeExcite(nn.Module):
    def __init__(self, channels, squeeze, act, gate):
        super().__init__()
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.act, self.gate = act(), gate()

    def forward(self, x):
        s = F.adaptive_avg_pool2d(x, 1)
        return x * self.gate(self.fc2(self.act(self.fc1(s))))


class InvertedResidualV3(nn.Module):
    def __init__(self, cin, k, exp, cout, se, act, stride):
        super().__init__()
        layers = []
        if exp != cin:
            layers.append(conv_bn(cin, exp, 1, act=act))
        layers.append(conv_bn(exp, exp, k, stride, groups=exp, act=act))
        if se:
            layers.append(SqueezeExcite(exp, make_divisible(exp // 4), nn.ReLU, nn.Hardsigmoid))
        layers.append(conv_bn(exp, cout, 1))
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.block(x)
        return x + y if self.residual else y


def mobilenet_v3_small():
    RE, HS = nn.ReLU, nn.Hardswish
    cfg = [(16, 3, 16, 16, True, RE, 2), (16, 3, 72, 24, False, RE, 2), (24, 3, 88, 24, False, RE, 1),
           (24, 5, 96, 40, True, HS, 2), (40, 5, 240, 40, True, HS, 1), (40, 5, 240, 40, True, HS, 1),
           (40, 5, 120, 48, True, HS, 1), (48, 5, 144, 48, True, HS, 1), (48, 5, 288, 96, True, HS, 2),
           (96, 5, 576, 96, True, HS, 1), (96, 5, 576, 96, True, HS, 1)]
    layers = [conv_bn(3, 16, 3, 2, act=HS)]
    layers += [InvertedResidualV3(*c) for c in cfg]
    layers += [conv_bn(96, 576, 1, act=HS), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
               nn.Linear(576, 1024), nn.Hardswish(), nn.Dropout(0.2), nn.Linear(1024, 1000)]
    return nn.Sequential(*layers)


class MBConv(nn.Module):
    def __init__(self, expand, k, stride, cin, cout):
        super().__init__()
        exp = make_divisible(cin * expand)
        layers = []
        if exp != cin:
            layers.append(conv_bn(cin, exp, 1, act=nn.SiLU))
        layers.append(conv_bn(exp, exp, k, stride, groups=exp, act=nn.SiLU))
        layers.append(SqueezeExcite(exp, max(1, cin // 4), nn.SiLU, nn.Sigmoid))
        layers.append(conv_bn(exp, cout, 1))
        self.block = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.block(x)
        return x + y if self.residual else y


def efficientnet_b0():
    cfg = [(1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2), (6, 3, 2, 40, 80, 3),
           (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4), (6, 3, 1, 192, 320, 1)]
    layers = [conv_bn(3, 32, 3, 2, act=nn.SiLU)]
    for expand, k, stride, cin, cout, n in cfg:
        for i in range(n):
            layers.append(MBConv(expand, k, stride if i == 0 else 1, cin if i == 0 else cout, cout))
    layers += [conv_bn(320, 1280, 1, act=nn.SiLU), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
               nn.Dropout(0.2), nn.Linear(1280, 1000)]
    return nn.Sequential(*layers)


def channel_shuffle(x, groups):
    n, c, h, w = x.shape
    return x.view(n, groups, c // groups, h, w).transpose(1, 2).contiguous().view(n, c, h, w)


class ShuffleUnit(nn.Module):
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.stride = stride
        branch = cout // 2
        if stride > 1:
            self.branch1 = nn.Sequential(conv_bn(cin, cin, 3, stride, groups=cin),
                                         conv_bn(cin, branch, 1, act=nn.ReLU))
        b2_in = cin if stride > 1 else branch
        self.branch2 = nn.Sequential(conv_bn(b2_in, branch, 1, act=nn.ReLU),
                                     conv_bn(branch, branch, 3, stride, groups=branch),
                                     conv_bn(branch, branch, 1, act=nn.ReLU))

    def forward(self, x):
        if self.stride == 1:
            x1, x2 = x.chunk(2, dim=1)
            out = torch.cat((x1, self.branch2(x2)), dim=1)
        else:
            out = torch.cat((self.branch1(x), self.branch2(x)), dim=1)
        return channel_shuffle(out, 2)


def shufflenet_v2_x1_0():
    layers = [conv_bn(3, 24, 3, 2, act=nn.ReLU), nn.MaxPool2d(3, 2, 1)]
    cin = 24
    for cout, repeats in [(116, 4), (232, 8), (464, 4)]:
        layers.append(ShuffleUnit(cin, cout, 2))
        layers += [ShuffleUnit(cout, cout, 1) for _ in range(repeats - 1)]
        cin = cout
    layers += [conv_bn(464, 1024, 1, act=nn.ReLU)]

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(*layers)
            self.fc = nn.Linear(1024, 1000)

        def forward(self, x):
            return self.fc(self.body(x).mean([2, 3]))
    return Head()


class Fire(nn.Module):
    def __init__(self, cin, squeeze, e1, e3):
        super().__init__()
        self.squeeze = nn.Conv2d(cin, squeeze, 1)
        self.e1 = nn.Conv2d(squeeze, e1, 1)
        self.e3 = nn.Conv2d(squeeze, e3, 3, padding=1)

    def forward(self, x):
        s = F.relu(self.squeeze(x))
        return torch.cat([F.relu(self.e1(s)), F.relu(self.e3(s))], 1)


def squeezenet1_1():
    return nn.Sequential(
        nn.Conv2d(3, 64, 3, 2), nn.ReLU(), nn.MaxPool2d(3, 2, ceil_mode=True),
        Fire(64, 16, 64, 64), Fire(128, 16, 64, 64), nn.MaxPool2d(3, 2, ceil_mode=True),
        Fire(128, 32, 128, 128), Fire(256, 32, 128, 128), nn.MaxPool2d(3, 2, ceil_mode=True),
        Fire(256, 48, 192, 192), Fire(384, 48, 192, 192), Fire(384, 64, 256, 256),
        Fire(512, 64, 256, 256), nn.Dropout(0.5), nn.Conv2d(512, 1000, 1), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten())


def torchvision_or(name, fallback):
    if HAVE_TV:
        import torchvision.models as tvm
        return getattr(tvm, name)()
    return fallback()


# ---- small modules for the rest ----

class SegASPP(nn.Module):
    def __init__(self, classes=21):
        super().__init__()
        self.encoder = nn.Sequential(conv_bn(3, 32, 3, 2, act=nn.ReLU), conv_bn(32, 64, 3, 2, act=nn.ReLU),
                                     conv_bn(64, 128, 3, 2, act=nn.ReLU), conv_bn(128, 128, 3, 1, act=nn.ReLU))
        self.branches = nn.ModuleList([conv_bn(128, 64, 1, act=nn.ReLU)] +
                                      [conv_bn(128, 64, 3, dilation=d, act=nn.ReLU) for d in (2, 4, 6)])
        self.pool = conv_bn(128, 64, 1, act=nn.ReLU)
        self.project = conv_bn(5 * 64, 64, 1, act=nn.ReLU)
        self.classify = nn.Conv2d(64, classes, 1)

    def forward(self, x):
        size = x.shape[-2:]
        f = self.encoder(x)
        outs = [b(f) for b in self.branches]
        p = self.pool(F.adaptive_avg_pool2d(f, 1))
        outs.append(p.expand(-1, -1, f.shape[2], f.shape[3]))
        y = self.classify(self.project(torch.cat(outs, 1)))
        return F.interpolate(y, size=size, mode="bilinear", align_corners=False)


class Attention(nn.Module):
    def __init__(self, d, heads, causal):
        super().__init__()
        self.qkv, self.out = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.heads, self.causal = heads, causal

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        shape = (b, t, self.heads, d // self.heads)
        q, k, v = (z.reshape(shape).transpose(1, 2) for z in (q, k, v))
        s = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
        if self.causal:
            mask = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
            s = s.masked_fill(mask, float("-inf"))
        y = (s.softmax(-1) @ v).transpose(1, 2).reshape(b, t, d)
        return self.out(y)


class Layer(nn.Module):
    def __init__(self, d, heads, causal, pre_norm):
        super().__init__()
        self.attn = Attention(d, heads, causal)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.pre_norm = pre_norm

    def forward(self, x):
        if self.pre_norm:
            x = x + self.attn(self.n1(x))
            return x + self.mlp(self.n2(x))
        x = self.n1(x + self.attn(x))
        return self.n2(x + self.mlp(x))


class TextEncoder(nn.Module):
    def __init__(self, causal, vocab=8000, d=256, heads=4, layers=4, length=128):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Parameter(torch.randn(1, length, d) * 0.02)
        self.layers = nn.Sequential(*[Layer(d, heads, causal, causal) for _ in range(layers)])
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab if causal else 2)
        self.causal = causal

    def forward(self, ids):
        y = self.norm(self.layers(self.tok(ids) + self.pos))
        return self.head(y) if self.causal else self.head(y[:, 0])


class UNetConvT(nn.Module):
    def __init__(self):
        super().__init__()
        self.e1 = conv_bn(3, 32, 3, 2, act=nn.ReLU)    # 1/2
        self.e2 = conv_bn(32, 64, 3, 2, act=nn.ReLU)   # 1/4
        self.e3 = conv_bn(64, 128, 3, 2, act=nn.ReLU)  # 1/8
        self.e4 = conv_bn(128, 128, 3, 2, act=nn.ReLU)  # 1/16
        self.u3 = nn.ConvTranspose2d(128, 128, 2, 2)
        self.d3 = conv_bn(256, 64, 3, act=nn.ReLU)
        self.u2 = nn.ConvTranspose2d(64, 64, 2, 2)
        self.d2 = conv_bn(128, 32, 3, act=nn.ReLU)
        self.u1 = nn.ConvTranspose2d(32, 32, 4, 2, 1)
        self.d1 = conv_bn(64, 32, 3, act=nn.ReLU)
        # DBNet's probability head: conv, two transposed convolutions, sigmoid
        self.h = conv_bn(32, 16, 3, act=nn.ReLU)
        self.h1 = nn.Sequential(nn.ConvTranspose2d(16, 16, 2, 2), nn.BatchNorm2d(16), nn.ReLU())
        self.h2 = nn.ConvTranspose2d(16, 1, 1, 1)

    def forward(self, x):
        x1 = self.e1(x)
        x2 = self.e2(x1)
        x3 = self.e3(x2)
        x4 = self.e4(x3)
        y = self.d3(torch.cat([self.u3(x4), x3], 1))
        y = self.d2(torch.cat([self.u2(y), x2], 1))
        y = self.d1(torch.cat([self.u1(y), x1], 1))
        return torch.sigmoid(self.h2(self.h1(self.h(y))))


class AudioConv1d(nn.Module):
    def __init__(self, n_fft=400, hop=160, classes=35):
        super().__init__()
        bins = n_fft // 2 + 1
        self.stft = nn.Conv1d(1, 2 * bins, n_fft, hop, bias=False)
        t = torch.arange(n_fft, dtype=torch.float32)
        window = 0.5 - 0.5 * torch.cos(2 * math.pi * t / n_fft)
        f = torch.arange(bins, dtype=torch.float32)[:, None]
        with torch.no_grad():
            self.stft.weight[:bins, 0] = window * torch.cos(2 * math.pi * f * t / n_fft)
            self.stft.weight[bins:, 0] = -window * torch.sin(2 * math.pi * f * t / n_fft)
        self.bins = bins
        self.body = nn.Sequential(
            nn.Conv1d(bins, 128, 3, padding=1, bias=False), nn.BatchNorm1d(128), nn.ReLU(),
            nn.Conv1d(128, 128, 3, padding=1, bias=False), nn.BatchNorm1d(128), nn.ReLU(),
            nn.Conv1d(128, 128, 3, 2, padding=1, bias=False), nn.BatchNorm1d(128), nn.ReLU())
        self.fc = nn.Linear(128, classes)

    def forward(self, wave):
        s = self.stft(wave)
        power = s[:, :self.bins] ** 2 + s[:, self.bins:] ** 2
        return self.fc(self.body(torch.log(power + 1e-6)).mean(2))


MODELS = {
    "resnet18": (lambda: torchvision_or("resnet18", resnet18), (1, 3, 224, 224)),
    "mobilenet_v3s": (lambda: torchvision_or("mobilenet_v3_small", mobilenet_v3_small), (1, 3, 224, 224)),
    "efficientnet_b0": (lambda: torchvision_or("efficientnet_b0", efficientnet_b0), (1, 3, 224, 224)),
    "shufflenet_v2": (lambda: torchvision_or("shufflenet_v2_x1_0", shufflenet_v2_x1_0), (1, 3, 224, 224)),
    "squeezenet": (lambda: torchvision_or("squeezenet1_1", squeezenet1_1), (1, 3, 224, 224)),
    "seg_aspp": (SegASPP, (1, 3, 256, 256)),
    "bert": (lambda: TextEncoder(causal=False), ("ids", 1, 128)),
    "gpt": (lambda: TextEncoder(causal=True), ("ids", 1, 128)),
    "unet_convt": (UNetConvT, (1, 3, 256, 256)),
    "audio_conv1d": (AudioConv1d, (1, 1, 16000)),
}


def export(name, path):
    make, shape = MODELS[name]
    model = randomize_bn(make()).eval()
    if shape[0] == "ids":
        example = torch.randint(0, 8000, shape[1:], dtype=torch.int64)
    else:
        example = torch.rand(shape) * 2 - 1
    with torch.no_grad():
        torch.onnx.export(model, (example,), path, input_names=["input"], output_names=["output"],
                          opset_version=14, do_constant_folding=True)


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    names = sys.argv[2:] or list(MODELS)
    for name in names:
        if name not in MODELS:
            sys.exit(f"ort_models.py: no model '{name}' (have {', '.join(MODELS)})")
        path = os.path.join(out, name + ".onnx")
        export(name, path)
        print(name, path, flush=True)


if __name__ == "__main__":
    main()
