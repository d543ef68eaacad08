#!/usr/bin/env python3
"""vgg16_tutorial_tf.py - the Cloud TPU guides' VGG16 tutorial in tf.keras
2.15 on Fashion-MNIST padded to 32x32x3, the reference for the learning
record of `systolic train fashion_mnist_vgg16` (docs/design/vgg16-tutorial.md).

The tutorial's pipeline as systolic's built-in runs it (src/cli/builtin.c):
from_tensor_slices(images as float32).map(pro) -- x / 225.0, minus the
mean (0.4914, 0.4822, 0.4465), over the std (0.2023, 0.1994, 0.2010),
tf.image.random_flip_up_down -- zipped with the int64 labels, batch(200);
VGG16(weights=None, input_shape=(32, 32, 3)) with its softmax top;
SparseCategoricalCrossentropy(from_logits=True); validation on the test
images through pro without the flip.

Usage (from the repository root):
    SYSTOLIC_DATASETS=../shared/datasets .venv/bin/python tools/vgg16_tutorial_tf.py \\
        [--optimizer sgd|adam] [--learning-rate 0.001] [--epochs 1] [--steps-per-epoch N] [--validation-steps N]
"""
import argparse
import gzip
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

MEAN = np.array([0.4914, 0.4822, 0.4465], np.float32)
STD = np.array([0.2023, 0.1994, 0.2010], np.float32)


def fashion_mnist(split):
    root = os.environ.get("SYSTOLIC_DATASETS", os.path.join("..", "shared", "datasets"))
    d = next(os.path.join(root, s) for s in ("fashion-mnist", "fashion_mnist") if os.path.isdir(os.path.join(root, s)))
    prefix = "train" if split == "train" else "t10k"
    with gzip.open(os.path.join(d, prefix + "-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
    with gzip.open(os.path.join(d, prefix + "-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64).reshape(-1, 1)
    return np.pad(x, ((0, 0), (2, 2), (2, 2))).astype(np.float32)[..., None].repeat(3, -1), y


def pro(image):
    return tf.image.random_flip_up_down((image / 225.0 - MEAN) / STD)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--optimizer", default="sgd")
    p.add_argument("--learning-rate", type=float, default=0.001)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--steps-per-epoch", type=int, default=None)
    p.add_argument("--validation-steps", type=int, default=None)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    tf.keras.utils.set_random_seed(a.seed)
    (xt, yt), (xv, yv) = fashion_mnist("train"), fashion_mnist("test")
    train = tf.data.Dataset.zip((tf.data.Dataset.from_tensor_slices(xt).map(pro),
                                 tf.data.Dataset.from_tensor_slices(yt))).batch(200)
    val = tf.data.Dataset.from_tensor_slices(((xv / 225.0 - MEAN) / STD, yv)).batch(200)
    model = tf.keras.applications.vgg16.VGG16(weights=None, input_shape=(32, 32, 3))
    opt = {"sgd": tf.keras.optimizers.SGD, "adam": tf.keras.optimizers.Adam}[a.optimizer](a.learning_rate)
    model.compile(optimizer=opt, loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["sparse_categorical_accuracy"])
    model.fit(train.repeat() if a.steps_per_epoch else train, epochs=a.epochs, steps_per_epoch=a.steps_per_epoch,
              validation_data=val, validation_steps=a.validation_steps, verbose=2)


if __name__ == "__main__":
    main()
