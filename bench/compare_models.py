#!/usr/bin/env python3
"""Train and run the built-in models in systolic, TensorFlow and PyTorch on
the same data in one run and print samples/s side by side, with systolic's
ratio to each and its fraction of this machine's GEMM peak.

    python3 bench/compare_models.py [--build build] [--models fashion_mnist_cnn,imdb_lstm,vgg16,resnet50]
                                    [--threads N] [--steps N] [--no-epoch] [--tf-python PATH]

Configurations: the Fashion-MNIST CNN trained at batch 1,000 on all cores;
the IMDB LSTM trained at batch 64 and 256 and predicting at batch 1,000, on
1 thread and on all cores; keras.applications' VGG16 at 32x32 trained at
batch 64, and ResNet50 at 224x224 trained at batch 32 and predicting at
batch 64, on all cores, on synthetic data (bench_models.c), each the best
of fewer runs (a ResNet-50 run takes minutes). systolic runs build/bench/bench_models on one
core with --threads 1, on more as the systolic command does, one replica
per core (--tpu cpu:N); the peers run bench/train_peers.py with that many
threads. Every framework trains on the data in order, unshuffled
(bench_models sets fit's shuffle off, train_peers.py passes shuffle=False to
Keras and slices PyTorch's batches in order), so all three do the same
work. --steps N replaces every configuration's step count (--steps 1:
a quick check that everything runs). The GFLOP/s count each model's
products as direct convolutions and GEMMs (bench_models.c), so where
systolic multiplies less (Winograd F(4x4,3x3) for 3x3 convs:
docs/design/winograd.md) the fraction of the GEMM peak can pass 100%.
Then, unless --no-epoch, one whole
epoch of `systolic train imdb_lstm --batch-size 256 --epochs 1`, as is and
without its validation pass.

The data is systolic's own, written once to <build>/bench/data by
`bench_models --dump-data` and read by the peers (for the synthetic-data
models, once per configuration, as many samples as it takes). VGG16 and
ResNet50 are the models tf.keras writes: train_peers.py --write-json puts
their JSON in the data directory once, for systolic to read; the default
models list leaves them out (they need TensorFlow and take minutes). TensorFlow runs under
--tf-python (default: .gl/bin/python, the venv that `make bench-deps`
makes), PyTorch under /usr/bin/python3 (Debian's python3-torch); a
framework that is not installed is skipped with a note. PyTorch's speed
depends on the BLAS Debian's alternatives give it: its sgemm rate is
printed first (a few GFLOP/s means the reference BLAS; make bench-deps
installs OpenBLAS).
"""
import argparse
import os
import re
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# (mode, batch, steps) per model, whether it runs on 1 thread too, and the best of how many runs.
CONFIGS = {
    "fashion_mnist_cnn": ([("train", 1000, 20)], False, 3),
    "imdb_lstm": ([("train", 64, 20), ("train", 256, 10), ("predict", 1000, 5)], True, 3),
    "vgg16": ([("train", 64, 10)], False, 2),
    "resnet50": ([("train", 32, 3), ("predict", 64, 3)], False, 1),
}
SYNTHETIC = ("vgg16", "resnet50")


def run(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        return None, (r.stderr.strip().splitlines() or ["failed"])[-1]
    return r.stdout.strip().splitlines()[-1], None


def number(pattern, line):
    m = re.search(pattern, line or "")
    return float(m.group(1)) if m else float("nan")


def peer_env(threads):
    """Threads for the peers' BLAS and OpenMP pools as well as their own setting."""
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads))
    return env


def torch_sgemm(python):
    code = ("import time, torch\ntorch.set_num_threads(1)\na = torch.randn(1024, 1024)\na @ a\n"
            "t = time.perf_counter()\nfor _ in range(3): a @ a\n"
            "print(3 * 2 * 1024 ** 3 / (time.perf_counter() - t) * 1e-9)")
    line, _ = run([python, "-c", code], peer_env(1))
    return float(line) if line else None


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--build", default=os.path.join(ROOT, "build"))
    p.add_argument("--models", default="fashion_mnist_cnn,imdb_lstm")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--steps", type=int, default=0)
    p.add_argument("--no-epoch", action="store_true")
    p.add_argument("--tf-python", default=os.path.join(ROOT, ".gl", "bin", "python"))
    p.add_argument("--torch-python", default="/usr/bin/python3")
    a = p.parse_args()
    bench = os.path.join(a.build, "bench", "bench_models")
    data = os.path.join(a.build, "bench", "data")
    os.makedirs(data, exist_ok=True)
    peers = []
    for framework, python in (("tensorflow", a.tf_python), ("torch", a.torch_python)):
        if not os.path.exists(python):
            print(f"{framework}: skipped ({python} not found; make bench-deps)")
        else:
            peers.append((framework, python))
    if any(f == "torch" for f, _ in peers):
        g = torch_sgemm(a.torch_python)
        note = "" if g is None or g > 10 else " -- a reference BLAS: make bench-deps installs OpenBLAS"
        print(f"PyTorch's sgemm (1024^3, 1 thread): {g:.1f} GFLOP/s{note}" if g else "PyTorch: not importable")

    models = a.models.split(",")
    if any(m in SYNTHETIC for m in models) and not all(os.path.exists(os.path.join(data, f"{m}.json"))
                                                        for m in SYNTHETIC):
        line, err = run([a.tf_python, os.path.join(HERE, "train_peers.py"), "--write-json", data])
        if not line:
            sys.exit(f"train_peers.py --write-json (tf.keras writes the models' JSON) failed: {err}")
    for model in models:
        configs, one_thread, runs = CONFIGS[model]
        synthetic = ["--data", data, "--runs", str(runs)] if model in SYNTHETIC else []
        if not synthetic:
            line, err = run([bench, "--model", model, "--dump-data", data])
            if not line:
                sys.exit(f"bench_models --dump-data failed: {err}")
        names = {}
        rows = []
        for mode, batch, steps in configs:
            steps = a.steps or steps
            for threads in ([1] if one_thread and a.threads > 1 else []) + [a.threads]:
                where = ["--threads", "1"] if threads == 1 else ["--tpu", f"cpu:{threads}"]
                common = ["--model", model, "--batch", str(batch), "--steps", str(steps)]
                common += ["--predict"] if mode == "predict" else []
                if synthetic:
                    line, err = run([bench, "--dump-data", data] + common)
                    if not line:
                        sys.exit(f"bench_models --dump-data failed: {err}")
                    common += ["--runs", str(runs)]
                ours, err = run([bench] + common + where + synthetic[:2])
                if not ours:
                    sys.exit(f"bench_models failed: {err}")
                row = [mode, batch, threads, number(r"([\d.]+) samples/s", ours), number(r"([\d.]+) GFLOP/s =", ours),
                       number(r"(\d+)% of the", ours), number(r"of the ([\d.]+) GFLOP/s", ours)]
                for framework, python in peers:
                    line, err = run([python, os.path.join(HERE, "train_peers.py"), "--framework", framework,
                                     "--data", data, "--threads", str(threads)] + common, peer_env(threads))
                    if line:
                        names[framework] = line.split(f" {model}")[0]
                    else:
                        print(f"{framework} {model} {mode} batch {batch}, {threads} threads: failed ({err})")
                    row.append(number(r"([\d.]+) samples/s", line))
                rows.append(row)
        print(f"\n{model}: samples/s; ratio = systolic / peer; peak = systolic's GFLOP/s over the GEMM peak measured "
              f"on as many threads\n")
        head = f"{'mode':8} {'batch':>5} {'threads':>7} | {'systolic':>8} {'GFLOP/s':>7} {'peak':>14}"
        for framework, _ in peers:
            head += f" | {names.get(framework, framework):>18} {'ratio':>6}"
        print(head)
        for mode, batch, threads, rate, gflops, pct, peak, *theirs in rows:
            digits = 1 if rate < 100 else 0  # ResNet-50 trains at a few samples/s on 2 cores
            line = f"{mode:8} {batch:5d} {threads:7d} | {rate:8.{digits}f} {gflops:7.1f} {pct:4.0f}% of {peak:5.1f}"
            for t in theirs:
                line += f" | {t:18.{digits}f} {rate / t:5.2f}x"
            print(line)

    if "imdb_lstm" in a.models.split(",") and not a.no_epoch:
        print("\nOne epoch, as the systolic command runs it (one replica per core):")
        systolic = os.path.join(a.build, "systolic")
        for extra, what in (([], "with its validation pass over the 25,000 test reviews"),
                            (["--validation-freq", "2"], "training alone")):
            cmd = [systolic, "train", "imdb_lstm", "--batch-size", "256", "--epochs", "1", "--verbose", "0"] + extra
            line, err = run(cmd)
            print(f"  {' '.join(cmd[1:])}  ({what})\n    {line or 'failed: ' + err}")


if __name__ == "__main__":
    main()
