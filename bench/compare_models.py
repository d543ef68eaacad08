#!/usr/bin/env python3
"""Train the Fashion-MNIST tutorial model in systolic, TensorFlow and
PyTorch on the same data in one run and print samples/s side by side, with
systolic's ratio to each.

    python3 bench/compare_models.py [--build build] [--batch 1000] [--steps 20] [--threads N]

TensorFlow runs under --tf-python (default: .gl/bin/python, the venv that
`make bench-deps` makes), PyTorch under /usr/bin/python3 (Debian's
python3-torch); a framework that is not installed is skipped with a note.
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        return None, (r.stderr.strip().splitlines() or ["failed"])[-1]
    return r.stdout.strip().splitlines()[-1], None


def rate(line):
    m = re.search(r"([\d.]+) samples/s", line or "")
    return float(m.group(1)) if m else None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--tf-python", default=os.path.join(ROOT, ".gl", "bin", "python"))
    p.add_argument("--torch-python", default="/usr/bin/python3")
    a = p.parse_args()
    common = ["--batch", str(a.batch), "--steps", str(a.steps), "--threads", str(a.threads)]
    ours, err = run([os.path.join(a.build, "bench", "bench_models")] + common)
    if not ours:
        sys.exit(f"bench_models failed: {err}")
    print(ours)
    mine = rate(ours)
    for framework, python in (("tensorflow", a.tf_python), ("torch", a.torch_python)):
        if not os.path.exists(python):
            print(f"{framework}: skipped ({python} not found; make bench-deps)")
            continue
        line, err = run([python, os.path.join(HERE, "train_peers.py"), "--framework", framework] + common)
        if not line:
            print(f"{framework}: skipped ({err})")
            continue
        print(f"{line}  -> systolic is {mine / rate(line):.2f}x")


if __name__ == "__main__":
    main()
