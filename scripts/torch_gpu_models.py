#!/usr/bin/python3
"""PyTorch's side of bench_onnx on a GPU: the models scripts/onnx_models.py exports (torchvision's
resnet18 and mobilenet_v2, the BERT-style encoder), with the same random weights, in eval mode,
forward at batch 8 on CUDA in float32 with TF32 off (Tempura computes float32 exactly), one row
each: the median of 30 passes, each waited for (torch.cuda.synchronize), after 5 warm-ups.

    python3 scripts/torch_gpu_models.py [resnet18] [mobilenet_v2] [bert]

Needs a PyTorch with CUDA (the GPU machines have one; Debian's has not).
"""
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnx_models  # noqa: E402


def main():
    names = sys.argv[1:] or ["resnet18", "mobilenet_v2", "bert"]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    print("torch", torch.__version__, torch.cuda.get_device_name(0))
    for name in names:
        gen = torch.Generator().manual_seed(42)
        model, make, _, _ = onnx_models.build(name, gen)
        model = model.to(dev)
        args = tuple(a.to(dev) for a in make(8))
        with torch.no_grad():
            for _ in range(5):
                model(*args)
            torch.cuda.synchronize()
            ms = []
            for _ in range(30):
                t0 = time.perf_counter()
                model(*args)
                torch.cuda.synchronize()
                ms.append((time.perf_counter() - t0) * 1e3)
        print("torch cuda %-13s batch 8: median %.3f ms (min %.3f)" %
              (name, statistics.median(ms), min(ms)))


if __name__ == "__main__":
    main()
