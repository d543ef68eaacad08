#!/usr/bin/env python3
"""make_loss_config_h5.py - Keras-written .h5 files whose training_config
holds a Loss object with arguments (issue 15), for test_loss_config.c and
the cli_loss_from_logits test. Into tests/data/keras/:

  logits_linear.h5   Dense(4) on 8 inputs (a linear output, logits),
                     compiled with SparseCategoricalCrossentropy(
                     from_logits=True) and SGD(learning_rate=0.1)
  logits_softmax.h5  the same weights with a softmax output, compiled the
                     same: Keras warns that the output "does not represent
                     logits" and computes the loss from the softmax's
                     logits all the same (backend._get_logits)
  logits.npz         x (16, 8) float32, y (16,) int32; per model (prefix
                     linear_ or softmax_): loss, model.evaluate(x, y); and
                     after one fit step on the 16 samples (batch 16, no
                     shuffle): fit_loss (the step's loss), kernel and bias
                     (the weights after the step, from which the gradients
                     follow: (before - after) / 0.1), with kernel0 and
                     bias0 the weights before
  ignore_class.h5    Dense(4) with SparseCategoricalCrossentropy(
                     ignore_class=0) (issue 17: honoured); logits.npz
                     holds its numbers as ignore_class_ (loss, fit_loss,
                     kernel, bias), as the others' (the labels of class 0
                     count in neither the loss nor its mean)
  logits_fmnist.h5   AveragePooling2D(7) -> Flatten -> Dense(10) on
                     Fashion-MNIST's 28x28x1 images, a linear output
                     compiled with SparseCategoricalCrossentropy(
                     from_logits=True), its kernel scaled by 0.01 (logits
                     of a few units from raw pixels): the bug report's case
  logits_fmnist.txt  its model.evaluate loss on the first 200 test images
                     (raw 0-255 pixels, as --dataset fashion_mnist gives
                     them), to the digits the command prints
  ignore_class_fmnist.h5, .txt  the same with ignore_class=0 (issue 17:
                     the T-shirts count in neither the loss nor its mean)
  reduction_sum.h5   Dense(4) with SparseCategoricalCrossentropy(
                     reduction="sum"): an argument systolic refuses

Fashion-MNIST's test split is read from $SYSTOLIC_DATASETS/fashion-mnist
(the IDX files), else keras.datasets.fashion_mnist downloads it.
Deterministic (seeded, one thread, oneDNN off).

Usage (from the repository root):
    .venv/bin/python tools/golden/make_loss_config_h5.py [--out tests/data/keras]
"""

import argparse
import gzip
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow import keras  # noqa: E402

tf.config.threading.set_inter_op_parallelism_threads(1)
tf.config.threading.set_intra_op_parallelism_threads(1)
L = keras.layers


def dense(activation, loss, kernel_bias):
    keras.backend.clear_session()
    m = keras.Sequential([L.Dense(4, activation=activation, input_shape=(8,))])
    m.set_weights(kernel_bias)
    m.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1), loss=loss)
    return m


def fashion_mnist_test():
    d = os.environ.get("SYSTOLIC_DATASETS", "")
    images = os.path.join(d, "fashion-mnist", "t10k-images-idx3-ubyte.gz")
    labels = os.path.join(d, "fashion-mnist", "t10k-labels-idx1-ubyte.gz")
    if d and os.path.exists(images):
        with gzip.open(images) as f:
            x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)
        with gzip.open(labels) as f:
            y = np.frombuffer(f.read(), np.uint8, offset=8)
        return x, y
    (_, _), (x, y) = keras.datasets.fashion_mnist.load_data()
    return x, y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/data/keras")
    out = ap.parse_args().out
    tf.keras.utils.set_random_seed(15)
    rng = np.random.RandomState(15)
    x = (rng.randn(16, 8) * 2).astype(np.float32)
    y = rng.randint(0, 4, 16).astype(np.int32)
    w0 = [(rng.randn(8, 4) * 0.5).astype(np.float32), (rng.randn(4) * 0.1).astype(np.float32)]
    arrays = {"x": x, "y": y, "kernel0": w0[0], "bias0": w0[1]}
    for name, act in (("linear", None), ("softmax", "softmax")):
        m = dense(act, keras.losses.SparseCategoricalCrossentropy(from_logits=True), w0)
        m.save(os.path.join(out, "logits_%s.h5" % name))
        arrays[name + "_loss"] = np.float64(m.evaluate(x, y, batch_size=16, verbose=0))
        h = m.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0)
        arrays[name + "_fit_loss"] = np.float64(h.history["loss"][0])
        arrays[name + "_kernel"], arrays[name + "_bias"] = m.get_weights()
    m = dense(None, keras.losses.SparseCategoricalCrossentropy(ignore_class=0), w0)
    m.save(os.path.join(out, "ignore_class.h5"))
    arrays["ignore_class_loss"] = np.float64(m.evaluate(x, y, batch_size=16, verbose=0))
    h = m.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0)
    arrays["ignore_class_fit_loss"] = np.float64(h.history["loss"][0])
    arrays["ignore_class_kernel"], arrays["ignore_class_bias"] = m.get_weights()
    np.savez(os.path.join(out, "logits.npz"), **arrays)

    xt, yt = fashion_mnist_test()
    for name, loss in (("logits_fmnist", keras.losses.SparseCategoricalCrossentropy(from_logits=True)),
                       ("ignore_class_fmnist",
                        keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0))):
        keras.backend.clear_session()
        if name != "logits_fmnist":  # (logits_fmnist.h5 keeps the weights the generator drew for it first)
            tf.keras.utils.set_random_seed(15)
        m = keras.Sequential([L.AveragePooling2D(7, input_shape=(28, 28, 1)), L.Flatten(), L.Dense(10)])
        m.compile(optimizer="rmsprop", loss=loss)
        k, b = m.get_weights()
        m.set_weights([k * 0.01, b])  # logits of a few units from 0-255 pixels, as a trained model's
        m.save(os.path.join(out, name + ".h5"))
        loss = m.evaluate(xt[:200, :, :, None].astype(np.float32), yt[:200].astype(np.int32), batch_size=100,
                          verbose=0)
        with open(os.path.join(out, name + ".txt"), "w") as f:
            f.write("loss: %.4f\n" % loss)
    dense(None, keras.losses.SparseCategoricalCrossentropy(reduction="sum"), w0).save(
        os.path.join(out, "reduction_sum.h5"))
    for k in ("linear", "softmax"):
        print(k, arrays[k + "_loss"], arrays[k + "_fit_loss"])
    print("fmnist loss: %.6f" % loss)


if __name__ == "__main__":
    main()
