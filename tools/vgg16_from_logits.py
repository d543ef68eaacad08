#!/usr/bin/env python3
"""vgg16_from_logits.py - what SparseCategoricalCrossentropy(from_logits=True)
on VGG16's softmax output does in tf.keras 2.15, measured on the VGG16
tutorial's first batch (docs/design/vgg16-tutorial.md).

Builds VGG16(weights=None, input_shape=(32, 32, 3)) with its 1,000-way
softmax top, takes 200 Fashion-MNIST training images padded to 32x32x3 and
normalised as the tutorial's `pro` does (x / 225.0, minus the mean, over
the std), and prints the loss and the norm of the weights' gradient two
ways: as tf.keras computes the loss (it warns, then uses the logits the
softmax was computed from) and with the probabilities really taken as
logits (what the warning's wording suggests). Seeded; one run takes
seconds.

Usage (from the repository root):
    SYSTOLIC_DATASETS=../shared/datasets .venv/bin/python tools/vgg16_from_logits.py
"""
import gzip
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402


def fashion_mnist_batch(n):
    root = os.environ.get("SYSTOLIC_DATASETS", os.path.join("..", "shared", "datasets"))
    d = next(os.path.join(root, s) for s in ("fashion-mnist", "fashion_mnist") if os.path.isdir(os.path.join(root, s)))
    with gzip.open(os.path.join(d, "train-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)[:n]
    with gzip.open(os.path.join(d, "train-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8)[:n].astype(np.int64)
    x = np.pad(x, ((0, 0), (2, 2), (2, 2))).astype(np.float32)[..., None].repeat(3, -1)
    mean = np.array([0.4914, 0.4822, 0.4465], np.float32)
    std = np.array([0.2023, 0.1994, 0.2010], np.float32)
    return (x / 225.0 - mean) / std, y


def main():
    tf.keras.utils.set_random_seed(0)
    x, y = fashion_mnist_batch(200)
    model = tf.keras.applications.vgg16.VGG16(weights=None, input_shape=(32, 32, 3))
    ways = [
        ("tf.keras's loss (the softmax's own logits)",
         lambda p: tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)(y, p)),
        ("the probabilities taken as logits",
         lambda p: tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(y, tf.identity(p)))),
    ]
    for name, loss_fn in ways:
        with tf.GradientTape() as tape:
            loss = loss_fn(model(x, training=True))
        grads = tape.gradient(loss, model.trainable_weights)
        print(f"{name}: loss {float(loss):.4f}, gradient norm {float(tf.linalg.global_norm(grads)):.3e}")


if __name__ == "__main__":
    main()
