#!/usr/bin/env python3
"""make_activation_fixtures.py - golden fixtures for issue 15's activation
family and regularizers, from tf.keras 2.15.

Writes into tests/golden/ (test_golden.c's test_activation_family reads them):

  layer_<case>.npz         one layer on fixed x and weights, as make_fixtures.py's
                           layer files: x, w_*, y, r, dx, dw_* (d sum(y*r))
  model_regularizers.npz   a small model whose layers carry kernel, bias,
                           activity, embeddings and alpha regularizers: its
                           weights w0_*, the loss of one training step (the
                           mean squared error plus every penalty, as Keras
                           reports it), the gradient of that loss (grad_*),
                           the weights after one SGD(0.5) step of fit (w1_*),
                           and evaluate's loss afterwards at batch 8 and 3

tests/golden/README.md documents them. Determinism is make_fixtures.py's:
oneDNN off, one thread, op determinism, each case's numpy Generator seeded
with the CRC-32 of its name ("layer_<case>", "model_regularizers"), weights
drawn uniform and assigned.

Usage (from the repository root):
    .venv/bin/python tools/golden/make_activation_fixtures.py [--out DIR]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402  (sets TF's determinism before importing it)

import argparse  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

L = tf.keras.layers
rng_for, uniform, save = mf.rng_for, mf.uniform, mf.save
R = tf.keras.regularizers
F32 = np.float32


# (case, layer factory, x shape, x range)
LAYER_CASES = [
    ("activation_elu", lambda: L.Activation("elu"), (4, 5), (-3, 3)),
    ("activation_selu", lambda: L.Activation("selu"), (4, 5), (-3, 3)),
    ("activation_gelu", lambda: L.Activation("gelu"), (4, 5), (-3, 3)),
    ("activation_swish", lambda: L.Activation("swish"), (4, 5), (-6, 6)),
    ("activation_silu", lambda: L.Activation("silu"), (4, 5), (-6, 6)),
    ("activation_softplus", lambda: L.Activation("softplus"), (4, 5), (-20, 20)),
    ("activation_softsign", lambda: L.Activation("softsign"), (4, 5), (-4, 4)),
    ("activation_hard_sigmoid", lambda: L.Activation("hard_sigmoid"), (4, 5), (-4, 4)),
    ("activation_exponential", lambda: L.Activation("exponential"), (4, 5), (-3, 3)),
    ("activation_relu6", lambda: L.Activation("relu6"), (4, 5), (-8, 8)),
    ("dense_gelu", lambda: L.Dense(4, activation="gelu"), (3, 5), (-1, 1)),
    ("dense_selu_rank3", lambda: L.Dense(3, activation="selu"), (2, 3, 4), (-1, 1)),
    ("conv2d_swish", lambda: L.Conv2D(3, 2, activation="swish"), (2, 4, 5, 2), (-1, 1)),
    ("conv2d_elu_same", lambda: L.Conv2D(2, 3, padding="same", activation="elu"), (2, 4, 4, 3), (-1, 1)),
    ("relu_default", lambda: L.ReLU(), (4, 5), (-3, 3)),
    ("relu_options", lambda: L.ReLU(max_value=1.5, negative_slope=0.2, threshold=0.3), (4, 6), (-3, 3)),
    ("relu_max6", lambda: L.ReLU(max_value=6), (4, 5), (-9, 9)),
    ("relu_slope", lambda: L.ReLU(negative_slope=0.1), (4, 5), (-3, 3)),
    ("leaky_relu", lambda: L.LeakyReLU(), (4, 5), (-3, 3)),
    ("leaky_relu_alpha", lambda: L.LeakyReLU(alpha=0.05), (2, 3, 4), (-3, 3)),
    ("prelu", lambda: L.PReLU(), (2, 3, 4), (-2, 2)),
    ("prelu_shared_axes", lambda: L.PReLU(shared_axes=[1, 2]), (2, 3, 4, 5), (-2, 2)),
    ("elu", lambda: L.ELU(), (4, 5), (-3, 3)),
    ("elu_alpha", lambda: L.ELU(alpha=0.5), (4, 5), (-3, 3)),
    ("softmax", lambda: L.Softmax(), (2, 3, 4), (-3, 3)),
    ("softmax_axis1", lambda: L.Softmax(axis=1), (2, 3, 4), (-3, 3)),
    # issue 15: axis as a list, exp(x - reduce_logsumexp(x, axis)) over several axes
    ("softmax_axes_1_2", lambda: L.Softmax(axis=[1, 2]), (2, 3, 4, 2), (-3, 3)),
    ("softmax_axes_neg1_1", lambda: L.Softmax(axis=[-1, 1]), (2, 3, 4), (-3, 3)),
    ("softmax_axes_list_of_one", lambda: L.Softmax(axis=[1]), (2, 3, 4), (-3, 3)),
    ("rescaling", lambda: L.Rescaling(1.0 / 255), (3, 4, 4, 1), (0, 255)),
    ("rescaling_lists", lambda: L.Rescaling([0.5, 2.0, -1.0], offset=[0.1, 0.2, 0.3]), (2, 4, 3), (-1, 1)),
]


def layer_fixtures(out_dir):
    for case, make, xshape, (lo, hi) in LAYER_CASES:
        rng = rng_for("layer_" + case)
        x = uniform(rng, lo, hi, xshape)
        layer = make()
        xt = tf.constant(x)
        layer(xt, training=False)
        arrays = {"x": x}
        for var in layer.weights:
            value = uniform(rng, -0.5, 0.5, tuple(var.shape))
            var.assign(value)
            arrays["w_" + var.name.split("/")[-1].split(":")[0]] = value
        with tf.GradientTape() as tape:
            tape.watch(xt)
            y = layer(xt, training=False)
            r = uniform(rng, -1, 1, tuple(y.shape))
            s = tf.reduce_sum(y * r)
        weights = list(layer.trainable_weights)
        grads = tape.gradient(s, [xt] + weights)
        arrays["y"] = y.numpy()
        arrays["r"] = r
        arrays["dx"] = grads[0].numpy()
        for var, g in zip(weights, grads[1:]):
            arrays["dw_" + var.name.split("/")[-1].split(":")[0]] = tf.convert_to_tensor(g).numpy()
        save(out_dir, f"layer_{case}.npz", arrays)


def regularized_model():
    return tf.keras.Sequential([
        L.Embedding(10, 3, input_length=4, embeddings_regularizer=R.L1(0.002), activity_regularizer="l2",
                    name="embedding"),
        L.Reshape((4, 3, 1), name="reshape"),
        L.Conv2D(2, 2, activation="elu", kernel_regularizer=R.L2(0.05), bias_regularizer=R.L1(0.02),
                 activity_regularizer=R.L1L2(0.01, 0.02), name="conv2d"),
        L.Flatten(name="flatten"),
        L.Dense(3, activation="selu", kernel_regularizer="l1_l2", bias_regularizer="l2",
                activity_regularizer=R.L1(0.01), name="dense"),
        L.PReLU(alpha_regularizer=R.L1L2(l1=0.003), name="p_re_lu"),
    ], name="regularizers")


def model_regularizers(out_dir):
    tf.keras.backend.clear_session()
    rng = rng_for("model_regularizers")
    x = rng.integers(0, 10, (8, 4)).astype(np.int32)
    y = uniform(rng, -1, 1, (8, 3))
    m = regularized_model()
    m.build((None, 4))
    arrays = {"x": x, "y": y}
    for var in m.weights:
        value = uniform(rng, -0.5, 0.5, tuple(var.shape))
        var.assign(value)
        arrays["w0_" + var.name.split(":")[0].replace("/", "_")] = value
    with tf.GradientTape() as tape:
        pred = m(x, training=True)
        mse = tf.reduce_mean(tf.keras.losses.mean_squared_error(y, pred))
        total = mse + tf.add_n(m.losses)
    grads = tape.gradient(total, m.trainable_weights)
    arrays["loss0"] = np.asarray(total.numpy(), F32).reshape(())
    arrays["mse0"] = np.asarray(mse.numpy(), F32).reshape(())
    for var, g in zip(m.trainable_weights, grads):
        arrays["grad_" + var.name.split(":")[0].replace("/", "_")] = tf.convert_to_tensor(g).numpy()
    m.compile(tf.keras.optimizers.SGD(0.5), "mse")
    h = m.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
    arrays["step_loss"] = np.asarray(h.history["loss"][0], F32).reshape(())
    assert abs(h.history["loss"][0] - float(total)) < 1e-5 * abs(float(total)), "fit reports the loss with penalties"
    for var in m.weights:
        arrays["w1_" + var.name.split(":")[0].replace("/", "_")] = var.numpy()
    arrays["eval_loss"] = np.asarray(m.evaluate(x, y, batch_size=8, verbose=0), F32).reshape(())
    arrays["eval_loss_batch3"] = np.asarray(m.evaluate(x, y, batch_size=3, verbose=0), F32).reshape(())
    save(out_dir, "model_regularizers.npz", arrays)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.join("tests", "golden"))
    args = p.parse_args()
    layer_fixtures(args.out)
    model_regularizers(args.out)
    print("tensorflow", tf.__version__)


if __name__ == "__main__":
    main()
