#!/usr/bin/env python3
"""PyTorch's matmul and conv2d at the shapes bench_kernels.c measures, for a
side-by-side comparison on the same machine (`make bench` runs both).

PyTorch is Debian's python3-torch (CPU, oneDNN/MKL-DNN inside). Convolutions
run in PyTorch's native NCHW layout; the FLOP counts are the same dense counts
bench_kernels.c uses. Backward passes use torch.nn.grad, which computes just
the requested gradient, like systolic's backprop ops.

    python3 bench/bench_kernels_torch.py [--threads N] [--quick]
"""
import argparse
import os
import time

import torch
import torch.nn.functional as F
from torch.nn import grad as nngrad


def best_time(fn, min_seconds):
    fn()
    best = float("inf")
    for _ in range(3):
        reps = 1
        while True:
            t0 = time.perf_counter()
            for _ in range(reps):
                fn()
            t = time.perf_counter() - t0
            if t >= min_seconds / 3 or reps > (1 << 20):
                best = min(best, t / reps)
                break
            reps *= 2
    return best


def mm_case(m, n, k, ta, tb):
    a = torch.rand(k, m) if ta else torch.rand(m, k)
    b = torch.rand(n, k) if tb else torch.rand(k, n)
    aa = a.t() if ta else a
    bb = b.t() if tb else b
    return (lambda: torch.mm(aa, bb)), 2.0 * m * n * k


def conv_case(kind, b, hw, c, o, k, same):
    pad = k // 2 if same else 0
    x = torch.rand(b, c, hw, hw)
    w = torch.rand(o, c, k, k)
    oh = hw if same else hw - k + 1
    dy = torch.rand(b, o, oh, oh)
    flops = 2.0 * b * oh * oh * o * k * k * c
    if kind == "fwd":
        return (lambda: F.conv2d(x, w, padding=pad)), flops
    if kind == "bwd input":
        return (lambda: nngrad.conv2d_input(x.shape, w, dy, padding=pad)), flops
    return (lambda: nngrad.conv2d_weight(x, w.shape, dy, padding=pad)), flops


def cases():
    for b in (128, 1000):
        yield f"fashion_mnist b{b}", "conv2d fwd 28x28x1->64", conv_case("fwd", b, 28, 1, 64, 3, False)
        yield f"fashion_mnist b{b}", "conv2d bwd filter", conv_case("bwd filter", b, 28, 1, 64, 3, False)
        yield f"fashion_mnist b{b}", "dense fwd", mm_case(b, 10, 10816, False, False)
        yield f"fashion_mnist b{b}", "dense bwd kernel", mm_case(10816, 10, b, True, False)
        yield f"fashion_mnist b{b}", "dense bwd input", mm_case(b, 10816, 10, False, True)
    for b in (64, 256):
        yield f"imdb_lstm b{b}", "gates fwd (B,132)x(132,400)", mm_case(b, 400, 132, False, False)
        yield f"imdb_lstm b{b}", "gates bwd kernel", mm_case(132, 400, b, True, False)
        yield f"imdb_lstm b{b}", "gates bwd input", mm_case(b, 132, 400, False, True)
    for hw, c, o in ((32, 3, 64), (32, 64, 64), (16, 64, 128), (16, 128, 128), (8, 128, 256),
                     (8, 256, 256), (4, 256, 512), (4, 512, 512), (2, 512, 512)):
        yield "vgg16 32x32 b32", f"conv2d fwd {hw}x{hw}x{c}->{o}", conv_case("fwd", 32, hw, c, o, 3, True)
        yield "vgg16 32x32 b32", f"conv bwd input {hw}x{hw}x{c}->{o}", conv_case("bwd input", 32, hw, c, o, 3, True)
        yield "vgg16 32x32 b32", f"conv bwd filter {hw}x{hw}x{c}->{o}", conv_case("bwd filter", 32, hw, c, o, 3, True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    min_seconds = 0.05 if args.quick else 0.25
    torch.manual_seed(0)
    print(f"PyTorch {torch.__version__} kernel benchmark, {os.cpu_count()} cores")
    print(f"{'model':20} {'kernel':30} {'1T ms':>10} {'GFLOP/s':>9} {'NT ms':>10} {'GFLOP/s':>9}")
    with torch.no_grad():
        for model, what, (fn, flops) in cases():
            torch.set_num_threads(1)
            t1 = best_time(fn, min_seconds)
            torch.set_num_threads(args.threads)
            tn = best_time(fn, min_seconds)
            print(f"{model:20} {what:30} {t1 * 1e3:10.3f} {flops / t1 * 1e-9:9.1f} {tn * 1e3:10.3f} {flops / tn * 1e-9:9.1f}",
                  flush=True)


if __name__ == "__main__":
    main()
