#!/usr/bin/env python3
"""Run bench_kernels (systolic) and the same shapes in PyTorch in one go and
print them side by side: GFLOP/s, systolic's fraction of this machine's GEMM
peak, and the speed ratio systolic / PyTorch, on 1 thread and on all cores.

    python3 bench/compare_kernels.py [--build build] [--threads N] [--quick]

Without PyTorch (python3-torch) it prints systolic's numbers alone.
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    cmd = [os.path.join(args.build, "bench", "bench_kernels"), "--threads", str(args.threads)]
    if args.quick:
        cmd.append("--quick")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    header, rows = [], []
    for line in out.splitlines():
        m = re.match(r"^(\S.{19}) (.{30}) +([\d.]+) +([\d.]+) +(\d+)% +([\d.]+) +([\d.]+) +(\d+)%$", line)
        if m:
            rows.append([m.group(1).strip(), m.group(2).strip()] + [float(m.group(i)) for i in range(3, 9)])
        elif line and not line.startswith("model"):
            header.append(line)
    print("\n".join(header))
    try:
        sys.path.insert(0, HERE)
        import torch  # noqa: F401
        import bench_kernels_torch as bt
    except ImportError as e:
        print(f"(PyTorch not available: {e}; systolic only)\n")
        print(out)
        return
    import torch
    torch.manual_seed(0)
    min_seconds = 0.05 if args.quick else 0.25
    theirs = {}
    with torch.no_grad():
        for model, what, (fn, flops) in bt.cases():
            torch.set_num_threads(1)
            t1 = bt.best_time(fn, min_seconds)
            torch.set_num_threads(args.threads)
            tn = bt.best_time(fn, min_seconds)
            theirs[(model, what)] = (flops / t1 * 1e-9, flops / tn * 1e-9)
    print(f"PyTorch {torch.__version__} on the same shapes (NCHW for its convolutions)\n")
    n = args.threads
    print(f"{'model':20} {'kernel':30} | {'1 thread GFLOP/s':>16} {'peak':>5} {'torch':>7} {'ratio':>6} | "
          f"{f'{n} threads GFLOP/s':>17} {'peak':>5} {'torch':>7} {'ratio':>6}")
    for model, what, _, g1, p1, _, gn, pn in rows:
        t1, tn = theirs.get((model, what), (float("nan"), float("nan")))
        print(f"{model:20} {what:30} | {g1:16.1f} {p1:4.0f}% {t1:7.1f} {g1 / t1:5.1f}x | "
              f"{gn:17.1f} {pn:4.0f}% {tn:7.1f} {gn / tn:5.1f}x")


if __name__ == "__main__":
    main()
