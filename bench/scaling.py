#!/usr/bin/env python3
"""Training throughput of the Fashion-MNIST tutorial model against the
replica count, and the gain from steps_per_execution, through
build/bench/bench_models (best of 3 runs of `--steps` steps each).

    python3 bench/scaling.py [--build build] [--batch 1000] [--steps 20] [--replicas 1,2,4,8]

Scaling efficiency = samples/s with R replicas / (cores used x samples/s of
one replica on one core), where cores used = min(R, cores).
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def bench(build, args):
    cmd = [os.path.join(build, "bench", "bench_models")] + args
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: {r.stderr.strip()}")
    m = re.search(r"([\d.]+) samples/s", r.stdout)
    return float(m.group(1)), r.stdout.strip()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(HERE, "..", "build"))
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--replicas", default="1,2,4,8")
    a = p.parse_args()
    cores = os.cpu_count()
    common = ["--batch", str(a.batch), "--steps", str(a.steps)]
    base, _ = bench(a.build, common + ["--threads", "1"])
    print(f"fashion_mnist_cnn, global batch {a.batch}, {cores} cores")
    print(f"{'configuration':44} {'samples/s':>10} {'speedup':>8} {'efficiency':>10}")
    print(f"{'1 replica on 1 core (--threads 1)':44} {base:10.0f} {1.0:8.2f} {100.0:9.0f}%")
    for r in [int(x) for x in a.replicas.split(",")]:
        rate, _ = bench(a.build, common + ["--tpu", f"cpu:{r}"])
        used = min(r, cores) if r > 1 else cores
        label = f"--tpu cpu:{r}" + (" (kernels on every core)" if r == 1 else "")
        print(f"{label:44} {rate:10.0f} {rate / base:8.2f} {100 * rate / base / used:9.0f}%")
    for spe in (1, 10):
        rate, _ = bench(a.build, common + ["--tpu", f"cpu:{cores}", "--steps-per-execution", str(spe)])
        label = f"--tpu cpu:{cores} --steps-per-execution {spe}"
        print(f"{label:44} {rate:10.0f} {rate / base:8.2f} {100 * rate / base / cores:9.0f}%")


if __name__ == "__main__":
    main()
