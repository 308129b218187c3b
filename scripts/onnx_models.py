#!/usr/bin/python3
"""Exports the models Tempura's ONNX tests and example run, with PyTorch (Debian's python3-torch
and python3-torchvision; nothing is downloaded: weights are random, from fixed seeds).

    scripts/onnx_models.py <out_dir> [resnet18] [mobilenet_v2] [bert] [tiny_cnn]

Each model is exported with torch.onnx.export at opset 17 with a dynamic batch axis ("batch").
Beside each <name>.onnx it writes PyTorch's own outputs for batch 1 and batch 8 as ONNX
TensorProto files: <name>.b<N>.in<k>.pb and <name>.b<N>.out0.pb, which the tests compare with
Tempura's outputs.

resnet18 and mobilenet_v2 are torchvision's, in eval mode, with non-trivial BatchNorm statistics
(random running means and variances, weights and biases). bert is a BERT-style encoder written
here: token and position embeddings, two post-norm encoder layers of 4-head self-attention with a
padding mask (attention_mask, 1 = token, 0 = padding: an additive -10000 on padded keys), GELU
feed-forward, and a pooled [CLS] output. tiny_cnn is the small classifier that
examples/onnx_classify.cpp runs (examples/data/tiny_cnn.onnx), trained here for a few seconds to
tell ten synthetic patterns apart (five shapes in red or blue).
"""
import inspect
import os
import struct
import sys

import torch
import torch.nn as nn

OPSET = 17


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field(num, wire, payload):
    return varint((num << 3) | wire) + payload


def tensor_proto(t, name=""):
    """A TensorProto (dims = 1, data_type = 2, name = 8, raw_data = 9), written by hand: Debian
    has no python3-onnx."""
    t = t.detach().contiguous().cpu()
    types = {torch.float32: 1, torch.int64: 7, torch.int32: 6, torch.bool: 9, torch.float64: 11}
    msg = b"".join(field(1, 0, varint(d)) for d in t.shape)
    msg += field(2, 0, varint(types[t.dtype]))
    if name:
        nb = name.encode()
        msg += field(8, 2, varint(len(nb)) + nb)
    raw = t.numpy().tobytes()
    msg += field(9, 2, varint(len(raw)) + raw)
    return msg


def randomize_batchnorm(model, gen):
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.randn(c, generator=gen) * 0.2)
            m.running_var.copy_(torch.rand(c, generator=gen) * 1.5 + 0.25)
            m.weight.data.copy_(1 + 0.2 * torch.randn(c, generator=gen))
            m.bias.data.copy_(0.2 * torch.randn(c, generator=gen))


class Encoder(nn.Module):
    """A BERT-style encoder: embeddings, post-norm layers, masked self-attention."""

    def __init__(self, vocab=128, dim=64, heads=4, layers=2, ffn=128, max_len=16):
        super().__init__()
        self.heads = heads
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_len, dim)
        self.norm0 = nn.LayerNorm(dim)
        self.layers = nn.ModuleList()
        for _ in range(layers):
            self.layers.append(nn.ModuleDict({
                "qkv": nn.Linear(dim, 3 * dim), "out": nn.Linear(dim, dim),
                "norm1": nn.LayerNorm(dim), "ff1": nn.Linear(dim, ffn),
                "ff2": nn.Linear(ffn, dim), "norm2": nn.LayerNorm(dim)}))
        self.pool = nn.Linear(dim, dim)

    def forward(self, input_ids, attention_mask):
        b, n = input_ids.shape
        d = self.tok.embedding_dim
        h = self.heads
        pos = torch.arange(n, device=input_ids.device)
        x = self.norm0(self.tok(input_ids) + self.pos(pos))
        # [b, n] of 1/0 -> an additive mask over the keys, [b, 1, 1, n]
        bias = (1.0 - attention_mask.to(x.dtype))[:, None, None, :] * -10000.0
        for layer in self.layers:
            q, k, v = layer["qkv"](x).split(d, dim=-1)
            q = q.reshape(b, n, h, d // h).transpose(1, 2)
            k = k.reshape(b, n, h, d // h).transpose(1, 2)
            v = v.reshape(b, n, h, d // h).transpose(1, 2)
            scores = q @ k.transpose(-1, -2) / (d // h) ** 0.5 + bias
            a = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, n, d)
            x = layer["norm1"](x + layer["out"](a))
            x = layer["norm2"](x + layer["ff2"](torch.nn.functional.gelu(layer["ff1"](x))))
        return torch.tanh(self.pool(x[:, 0]))


PATTERNS = ["horizontal stripes", "vertical stripes", "checkerboard", "diagonal stripes",
            "square"]
COLORS = ["red", "blue"]


def pattern_images(labels, gen, noise):
    """3 x 32 x 32 images of class c: pattern c % 5 drawn in color c // 5 (red: channel 0, blue:
    channel 2), shifted by a random phase, plus Gaussian noise. examples/onnx_classify.cpp draws
    the same patterns (phase 0, no noise)."""
    n = labels.shape[0]
    r = torch.arange(32).view(1, 32, 1)
    c = torch.arange(32).view(1, 1, 32)
    dr = torch.randint(0, 8, (n, 1, 1), generator=gen) if noise else torch.zeros(n, 1, 1, dtype=torch.int64)
    dc = torch.randint(0, 8, (n, 1, 1), generator=gen) if noise else torch.zeros(n, 1, 1, dtype=torch.int64)
    rr, cc = r + dr, c + dc
    full = lambda t: t.expand(n, 32, 32)
    shapes = torch.stack([full((rr // 4) % 2), full((cc // 4) % 2), full((rr // 4 + cc // 4) % 2),
                          full(((rr + cc) // 4) % 2),
                          full(((r - 16).abs() < 8) & ((c - 16).abs() < 8))], 1).float()
    pat = shapes[torch.arange(n), labels % 5]
    img = torch.zeros(n, 3, 32, 32)
    img[torch.arange(n), (labels // 5) * 2] = pat
    if noise:
        img += noise * torch.randn(n, 3, 32, 32, generator=gen)
    return img


def train_tiny(model, gen):
    """A few hundred Adam steps on the synthetic patterns (seconds on a CPU)."""
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    model.train()
    for _ in range(300):
        labels = torch.randint(0, 10, (64,), generator=gen)
        loss = nn.functional.cross_entropy(model(pattern_images(labels, gen, 0.3)), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    labels = torch.arange(10).repeat(20)
    with torch.no_grad():
        acc = (model(pattern_images(labels, gen, 0.3)).argmax(1) == labels).float().mean().item()
    print("tiny_cnn: accuracy %.3f on 200 noisy test images" % acc)


class TinyCNN(nn.Module):
    """A small classifier of 3 x 32 x 32 images into 10 classes (about 25k parameters)."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU6(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))

    def forward(self, x):
        return self.body(x)


def build(name, gen):
    torch.manual_seed(1234)
    if name in ("resnet18", "mobilenet_v2"):
        import torchvision
        model = getattr(torchvision.models, name)()
        randomize_batchnorm(model, gen)
        make = lambda b: (torch.randn(b, 3, 224, 224, generator=gen),)
        return model.eval(), make, ["input"], ["logits"]
    if name == "bert":
        model = Encoder()
        def make(b):
            ids = torch.randint(0, 128, (b, 16), generator=gen)
            lengths = torch.randint(4, 17, (b,), generator=gen)
            mask = (torch.arange(16)[None, :] < lengths[:, None]).to(torch.int64)
            return ids, mask
        return model.eval(), make, ["input_ids", "attention_mask"], ["pooled"]
    if name == "tiny_cnn":
        model = TinyCNN()
        train_tiny(model, gen)
        make = lambda b: (pattern_images(torch.randint(0, 10, (b,), generator=gen), gen, 0.3),)
        return model.eval(), make, ["image"], ["logits"]
    raise SystemExit("unknown model " + name)


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    out = sys.argv[1]
    names = sys.argv[2:] or ["resnet18", "mobilenet_v2", "bert"]
    os.makedirs(out, exist_ok=True)
    for name in names:
        gen = torch.Generator().manual_seed(42)
        model, make, inputs, outputs = build(name, gen)
        example = make(2)
        axes = {n: {0: "batch"} for n in inputs + outputs}
        path = os.path.join(out, name + ".onnx")
        # A PyTorch that has the dynamo exporter (2.5 and later, the default from 2.9) is asked
        # for the TorchScript one, which Debian's 1.13 has alone: the same graphs on both.
        legacy = {"dynamo": False} if "dynamo" in inspect.signature(
            torch.onnx.export).parameters else {}
        with torch.no_grad():
            torch.onnx.export(model, example, path, opset_version=OPSET, input_names=inputs,
                              output_names=outputs, dynamic_axes=axes, do_constant_folding=True,
                              **legacy)
            for b in (1, 8):
                args = make(b)
                y = model(*args)
                for k, a in enumerate(args):
                    with open(os.path.join(out, "%s.b%d.in%d.pb" % (name, b, k)), "wb") as f:
                        f.write(tensor_proto(a, inputs[k]))
                with open(os.path.join(out, "%s.b%d.out0.pb" % (name, b)), "wb") as f:
                    f.write(tensor_proto(y, outputs[0]))
        print("wrote", path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
