#!/usr/bin/env python3
"""The tutorial models trained in TensorFlow (tf.keras) or PyTorch, timed the
way bench_models.c times systolic: the same data (the real Fashion-MNIST
training images, read from $SYSTOLIC_DATASETS), the same model and
optimizer, `steps` steps after two warm-up steps, best of 3 runs.

    python3 bench/train_peers.py --framework torch --batch 1000 --steps 20 --threads 2
    .gl/bin/python bench/train_peers.py --framework tensorflow ...

Prints one line: "<framework> <version> fashion_mnist_cnn: batch B, T threads: X samples/s".
"""
import argparse
import gzip
import os
import time

import numpy as np


def load_fashion_mnist():
    root = os.environ.get("SYSTOLIC_DATASETS")
    if not root:
        raise SystemExit("train_peers.py: set SYSTOLIC_DATASETS (e.g. ../shared/datasets)")
    for name in ("fashion-mnist", "fashion_mnist"):
        d = os.path.join(root, name)
        if os.path.isdir(d):
            break
    with gzip.open(os.path.join(d, "train-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28, 1)
    with gzip.open(os.path.join(d, "train-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)
    return x, y


def bench_tensorflow(x, y, batch, steps, threads):
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    n = batch * (steps + 2)
    xs, ys = x[:n].astype(np.float32), y[:n].astype(np.float32)
    best = 0.0
    for _ in range(3):
        model = tf.keras.Sequential([
            tf.keras.layers.Conv2D(64, (3, 3), input_shape=(28, 28, 1)),
            tf.keras.layers.MaxPooling2D(pool_size=(2, 2), strides=(2, 2)),
            tf.keras.layers.Activation("relu"),
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(10),
            tf.keras.layers.Activation("softmax")])
        model.compile(optimizer=tf.keras.optimizers.Adam(learning_rate=1e-3),
                      loss="sparse_categorical_crossentropy", metrics=["sparse_categorical_accuracy"])
        times = {}

        class Timer(tf.keras.callbacks.Callback):
            def on_train_batch_end(self, b, logs=None):
                times[b] = time.perf_counter()

        model.fit(xs, ys, batch_size=batch, epochs=1, steps_per_epoch=steps + 2, shuffle=False, verbose=0,
                  callbacks=[Timer()])
        best = max(best, steps * batch / (times[steps + 1] - times[1]))
    return f"tensorflow {tf.__version__}", best


def bench_torch(x, y, batch, steps, threads):
    import torch
    torch.set_num_threads(threads)
    n = batch * (steps + 2)
    xs = torch.from_numpy(x[:n].astype(np.float32)).permute(0, 3, 1, 2).contiguous()
    ys = torch.from_numpy(y[:n].astype(np.int64))
    best = 0.0
    for _ in range(3):
        model = torch.nn.Sequential(
            torch.nn.Conv2d(1, 64, 3), torch.nn.MaxPool2d(2, 2), torch.nn.ReLU(), torch.nn.Flatten(),
            torch.nn.Linear(10816, 10))
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
        loss_fn = torch.nn.CrossEntropyLoss()
        t1 = None
        for s in range(steps + 2):
            xb, yb = xs[s * batch:(s + 1) * batch], ys[s * batch:(s + 1) * batch]
            opt.zero_grad()
            out = model(xb)
            loss = loss_fn(out, yb)
            loss.backward()
            opt.step()
            (out.argmax(1) == yb).float().mean().item()  # the accuracy metric, as fit computes it
            if s == 1:
                t1 = time.perf_counter()
        best = max(best, steps * batch / (time.perf_counter() - t1))
    return f"torch {torch.__version__}", best


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--framework", choices=["tensorflow", "torch"], required=True)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    a = p.parse_args()
    x, y = load_fashion_mnist()
    fn = bench_tensorflow if a.framework == "tensorflow" else bench_torch
    name, rate = fn(x, y, a.batch, a.steps, a.threads)
    print(f"{name} fashion_mnist_cnn: batch {a.batch}, {a.threads} threads: {rate:.0f} samples/s "
          f"({1e3 * a.batch / rate:.1f} ms/step)")


if __name__ == "__main__":
    main()
