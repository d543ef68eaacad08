#!/usr/bin/env python3
"""make_fixtures.py - the golden fixtures that pin systolic to tf.keras 2.15.

Runs tf.keras (TensorFlow 2.15, Keras 2.15) on fixed weights and inputs and
writes what it computes into tests/golden/*.npz, which test_golden.c reads:
layer outputs and gradients, a stacked model, losses (with the softmax and
sigmoid logits shortcut), metrics, optimizer trajectories, five training
steps of the Fashion-MNIST tutorial model, the recurrent layers (Embedding,
LSTM, GRU, each checked against a float64 numpy reference), two stacked
recurrent models, and three training steps of the IMDB tutorial model.
tests/golden/README.md documents every array; keep it in step with this file.

How it stays deterministic:
- every case draws from its own numpy Generator, seeded with the CRC-32 of
  the case's name, so adding or reordering cases changes no other fixture;
- weights are set from those draws (uniform [-0.5, 0.5], or [-0.3, 0.3] for
  the long recurrent cases), never from Keras's initializers, except the
  Fashion-MNIST model, whose Keras initializers run right after
  tf.keras.utils.set_random_seed(FASHION_SEED);
- TensorFlow runs one thread per op and per graph, with op determinism on
  and oneDNN off (TF_ENABLE_ONEDNN_OPTS=0, set before the import), so the
  numbers come from TF's own Eigen CPU kernels (one code path on every x86
  CPU, where oneDNN picks kernels by instruction set) and not from thread
  timing; the README gives the size of the oneDNN differences;
- np.savez_compressed stamps every zip member 1980-01-01 00:00 (zipfile's
  default for ZipFile.open(name, "w")), and arrays are written in a fixed
  order, so the same numbers give the same bytes (given the same zlib);
- the recurrent fixtures run last, so the earlier ones run exactly as they
  did before those were added.

Usage (from the repository root):
    SYSTOLIC_DATASETS=../shared/datasets .gl/bin/python tools/golden/make_fixtures.py [--out DIR]

$SYSTOLIC_DATASETS is the parent directory of fashion-mnist/ (or
fashion_mnist/), which holds the IDX files train-images-idx3-ubyte.gz and
train-labels-idx1-ubyte.gz.
"""

import os

# Must precede the TensorFlow import.
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse
import gzip
import struct
import sys
import zlib

import numpy as np
import tensorflow as tf

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
tf.config.experimental.enable_op_determinism()
tf.get_logger().setLevel("ERROR")

L = tf.keras.layers
F32 = np.float32
ALLOWED_DTYPES = {np.dtype("<f4"), np.dtype("<f8"), np.dtype("<i4"), np.dtype("|u1")}
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FASHION_SEED = 20240615
FASHION_N = 160
FASHION_BATCH = 32
FASHION_STEPS = 5


# ---- utilities ----------------------------------------------------------------------


def rng_for(case):
    """The numpy Generator of one case: seeded by the CRC-32 of its name."""
    return np.random.default_rng(zlib.crc32(case.encode("ascii")))


def uniform(rng, lo, hi, shape):
    return rng.uniform(lo, hi, shape).astype(F32)


def save(out_dir, fname, arrays):
    """np.savez_compressed `arrays` (name -> array, in that order) after checking dtypes."""
    path = os.path.join(out_dir, fname)
    checked = {}
    for name, value in arrays.items():
        a = np.asarray(value, order="C")  # (np.ascontiguousarray would make 0-d arrays 1-d)
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        if a.dtype not in ALLOWED_DTYPES:
            raise TypeError(f"{fname}: array {name} has dtype {a.dtype}; the C reader takes f4, f8, i4, u1")
        checked[name] = a
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        np.savez_compressed(f, **checked)
    os.replace(tmp, path)
    print(f"  {fname}: {len(arrays)} arrays, {os.path.getsize(path)} bytes")


def short_weight_name(var):
    """'conv2d/kernel:0' -> 'kernel'."""
    return var.name.split("/")[-1].split(":")[0]


def layer_weight_name(var):
    """'conv2d/kernel:0' -> 'conv2d_kernel'."""
    return var.name.split(":")[0].replace("/", "_")


def f32_scalar(v):
    return np.asarray(v, dtype=F32).reshape(())


# ---- 1. single layers -----------------------------------------------------------------

# (case, layer factory, x shape, x distribution). A distribution is (lo, hi)
# for uniform, or "ties" for tied_windows().
LAYER_CASES = [
    ("dense_linear", lambda: L.Dense(5), (4, 7), (-1, 1)),
    ("dense_relu", lambda: L.Dense(6, activation="relu"), (3, 8), (-1, 1)),
    ("dense_nobias_sigmoid", lambda: L.Dense(4, use_bias=False, activation="sigmoid"), (5, 3), (-1, 1)),
    ("dense_softmax", lambda: L.Dense(5, activation="softmax"), (4, 6), (-1, 1)),
    ("dense_tanh_rank3", lambda: L.Dense(3, activation="tanh"), (2, 4, 5), (-1, 1)),
    ("conv2d_valid", lambda: L.Conv2D(4, 3), (2, 7, 6, 3), (-1, 1)),
    ("conv2d_same_s2", lambda: L.Conv2D(5, (3, 2), strides=2, padding="same"), (2, 7, 8, 2), (-1, 1)),
    ("conv2d_relu_1ch", lambda: L.Conv2D(8, 3, activation="relu"), (3, 9, 9, 1), (0, 255)),
    ("conv2d_nobias", lambda: L.Conv2D(3, 2, use_bias=False), (2, 5, 5, 4), (-1, 1)),
    (
        "conv2d_s12_tanh",
        lambda: L.Conv2D(4, 3, strides=(1, 2), padding="same", activation="tanh"),
        (2, 6, 7, 3),
        (-1, 1),
    ),
    ("max_pooling2d", lambda: L.MaxPooling2D(2), (2, 6, 7, 3), (-1, 1)),
    ("max_pooling2d_same", lambda: L.MaxPooling2D(3, strides=2, padding="same"), (2, 7, 6, 2), (-1, 1)),
    ("max_pooling2d_ties", lambda: L.MaxPooling2D(2), (2, 4, 4, 2), "ties"),
    ("average_pooling2d", lambda: L.AveragePooling2D(2), (2, 6, 7, 3), (-1, 1)),
    ("average_pooling2d_same", lambda: L.AveragePooling2D(3, strides=2, padding="same"), (2, 7, 5, 2), (-1, 1)),
    ("activation_relu", lambda: L.Activation("relu"), (4, 5), (-3, 3)),
    ("activation_sigmoid", lambda: L.Activation("sigmoid"), (4, 5), (-3, 3)),
    ("activation_tanh", lambda: L.Activation("tanh"), (4, 5), (-3, 3)),
    ("activation_linear", lambda: L.Activation("linear"), (4, 5), (-3, 3)),
    ("activation_softmax", lambda: L.Activation("softmax"), (2, 3, 4), (-3, 3)),
    ("flatten", lambda: L.Flatten(), (2, 3, 4, 2), (-1, 1)),
    ("reshape", lambda: L.Reshape((6, 4)), (2, 3, 8), (-1, 1)),
    ("dropout_inference", lambda: L.Dropout(0.5), (3, 4), (-1, 1)),
]


def tied_windows(rng, shape):
    """relu(uniform[-1, 1]) of `shape` (N, H, W, C), H and W even, with the
    2x2 windows (taken in (n, i, j, c) order, k = 0, 1, ...) made to tie, since
    a plain draw rarely does (a 2x2 window of relu(uniform) ties only when all
    four entries are <= 0, probability 1/16):
      k % 4 == 0: all four entries 0 (negative before the relu): a 4-way tie at 0;
      k % 4 == 1: top-right and bottom-left both 0.9, the others <= 0.5;
      k % 4 == 2: bottom-left and bottom-right both 0.8, the others <= 0.5;
      k % 4 == 3: left as drawn."""
    u = uniform(rng, -1, 1, shape)
    n, h, w, c = shape
    k = 0
    for b in range(n):
        for i in range(0, h, 2):
            for j in range(0, w, 2):
                for ch in range(c):
                    win = u[b, i : i + 2, j : j + 2, ch]  # a view
                    if k % 4 == 0:
                        win[...] = -np.abs(win) - F32(0.01)
                    elif k % 4 == 1:
                        np.minimum(win, F32(0.5), out=win)
                        win[0, 1] = win[1, 0] = F32(0.9)
                    elif k % 4 == 2:
                        np.minimum(win, F32(0.5), out=win)
                        win[1, 0] = win[1, 1] = F32(0.8)
                    k += 1
    return np.maximum(u, F32(0))


def max_pool_grad_first_max(x, r, k):
    """numpy reference: VALID k x k / stride k max-pool gradient that sends each
    window's gradient to its first maximum in row-major order."""
    n, h, w, c = x.shape
    dx = np.zeros_like(x)
    for b in range(n):
        for i in range(h // k):
            for j in range(w // k):
                for ch in range(c):
                    win = x[b, i * k : i * k + k, j * k : j * k + k, ch]
                    a = np.argmax(win)  # numpy: first occurrence, row-major
                    dx[b, i * k + a // k, j * k + a % k, ch] += r[b, i, j, ch]
    return dx


def avg_pool_same_ref(x, k, s):
    """numpy reference: SAME average pooling dividing by the count of valid inputs."""
    n, h, w, c = x.shape
    oh, ow = -(-h // s), -(-w // s)
    ph = max(0, (oh - 1) * s + k - h) // 2
    pw = max(0, (ow - 1) * s + k - w) // 2
    y = np.zeros((n, oh, ow, c), np.float64)
    for i in range(oh):
        for j in range(ow):
            r0, c0 = max(0, i * s - ph), max(0, j * s - pw)
            r1, c1 = min(h, i * s - ph + k), min(w, j * s - pw + k)
            y[:, i, j, :] = x[:, r0:r1, c0:c1, :].astype(np.float64).mean(axis=(1, 2))
    return y


def layer_fixtures(out_dir):
    notes = []
    for case, make, xshape, dist in LAYER_CASES:
        rng = rng_for("layer_" + case)
        if dist == "ties":
            x = tied_windows(rng, xshape)
        else:
            x = uniform(rng, dist[0], dist[1], xshape)
        layer = make()
        xt = tf.constant(x)
        layer(xt, training=False)  # build; Keras's initial values are overwritten below
        arrays = {"x": x}
        for var in layer.weights:
            value = uniform(rng, -0.5, 0.5, tuple(var.shape))
            var.assign(value)
            arrays["w_" + short_weight_name(var)] = value
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
            arrays["dw_" + short_weight_name(var)] = g.numpy()

        # Checks of the behaviours the README states.
        if case == "max_pooling2d_ties":
            wins = x.reshape(2, 2, 2, 2, 2, 2).transpose(0, 1, 3, 5, 2, 4).reshape(-1, 4)
            assert np.sum((wins == wins.max(axis=1, keepdims=True)).sum(axis=1) > 1) >= 12
            ref = max_pool_grad_first_max(x, r, 2)
            assert np.array_equal(arrays["dx"], ref), "max-pool ties: not first-max-in-row-major"
            notes.append("max-pool gradient with ties: the first maximum in row-major order takes it all")
        if case == "average_pooling2d_same":
            ref = avg_pool_same_ref(x, 3, 2)
            assert np.allclose(arrays["y"], ref, rtol=1e-6, atol=1e-7), "avg-pool SAME: divisor is not the valid count"
        if case == "dropout_inference":
            assert np.array_equal(arrays["y"], x) and np.array_equal(arrays["dx"], r)
        save(out_dir, f"layer_{case}.npz", arrays)
    return notes


# ---- 2. a stacked model -----------------------------------------------------------------


def model_fixture(out_dir):
    rng = rng_for("model_small_cnn")
    x = uniform(rng, 0, 1, (2, 8, 8, 1))
    model = tf.keras.Sequential(
        [
            L.Conv2D(4, 3, activation="relu", name="conv2d"),
            L.MaxPooling2D(2, name="max_pooling2d"),
            L.Flatten(name="flatten"),
            L.Dense(3, activation="softmax", name="dense"),
        ]
    )
    model.build((None, 8, 8, 1))
    arrays = {"x": x}
    for var in model.weights:
        value = uniform(rng, -0.5, 0.5, tuple(var.shape))
        var.assign(value)
        arrays["w_" + layer_weight_name(var)] = value
    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        y = model(xt, training=False)
        r = uniform(rng, -1, 1, tuple(y.shape))
        s = tf.reduce_sum(y * r)
    weights = list(model.trainable_weights)
    grads = tape.gradient(s, [xt] + weights)
    arrays["y"] = y.numpy()
    arrays["r"] = r
    arrays["dx"] = grads[0].numpy()
    for var, g in zip(weights, grads[1:]):
        arrays["dw_" + layer_weight_name(var)] = g.numpy()
    expect = ["w_conv2d_kernel", "w_conv2d_bias", "w_dense_kernel", "w_dense_bias"]
    assert [k for k in arrays if k.startswith("w_")] == expect, list(arrays)
    save(out_dir, "model_small_cnn.npz", arrays)


# ---- 3. losses ------------------------------------------------------------------------------

EPS = F32(1e-7)
ONE_MINUS_EPS = F32(1) - EPS  # 0x3F7FFFFE, the upper clip bound as Keras computes it


def probability_rows(rng, labels, c):
    """(len(labels), c) float32 probability rows: row 1 has 0.0 at its label,
    row 2 is exactly one-hot at its label, row 3 has 0.0 off its label, row 4
    is exactly one-hot off its label; the others are random. The random rows
    are normalised in float64 and rounded, so they sum to 1 only within
    float32 round-off."""
    n = len(labels)
    u = rng.uniform(0.05, 1.0, (n, c))
    p = u / u.sum(axis=1, keepdims=True)
    p[1, labels[1]] = 0.0
    p[1] /= p[1].sum()
    p[2] = 0.0
    p[2, labels[2]] = 1.0
    off3 = (labels[3] + 1) % c
    p[3, off3] = 0.0
    p[3] /= p[3].sum()
    p[4] = 0.0
    p[4, (labels[4] + 2) % c] = 1.0
    return p.astype(F32)


def loss_case(arrays, case, make_loss, y_true, y_pred):
    yt = tf.constant(y_true)
    yp = tf.constant(y_pred)
    with tf.GradientTape() as tape:
        tape.watch(yp)
        loss = make_loss(tf.keras.losses.Reduction.SUM_OVER_BATCH_SIZE)(yt, yp)
    grad = tape.gradient(loss, yp)
    per_example = make_loss(tf.keras.losses.Reduction.NONE)(yt, yp)
    arrays[f"{case}_y_true"] = y_true
    arrays[f"{case}_y_pred"] = y_pred
    arrays[f"{case}_loss"] = f32_scalar(loss.numpy())
    arrays[f"{case}_per_example"] = per_example.numpy().astype(F32)
    arrays[f"{case}_grad"] = grad.numpy()
    assert np.all(np.isfinite(arrays[f"{case}_grad"])), case


def loss_fixtures(out_dir):
    K = tf.keras.losses
    arrays = {}
    notes = []

    def scce(**kw):
        return lambda red: K.SparseCategoricalCrossentropy(reduction=red, **kw)

    def cce(**kw):
        return lambda red: K.CategoricalCrossentropy(reduction=red, **kw)

    def bce(**kw):
        return lambda red: K.BinaryCrossentropy(reduction=red, **kw)

    def mse():
        return lambda red: K.MeanSquaredError(reduction=red)

    def onehot(labels, c):
        return np.eye(c, dtype=F32)[labels]

    # sparse categorical crossentropy
    rng = rng_for("scce_probs")
    labels = rng.integers(0, 5, 6).astype(np.int32)
    probs = probability_rows(rng, labels, 5)
    loss_case(arrays, "scce_probs", scce(), labels, probs)
    loss_case(arrays, "scce_probs_labels_2d", scce(), labels.reshape(6, 1), probs.copy())
    rng = rng_for("scce_logits")
    labels = rng.integers(0, 5, 6).astype(np.int32)
    loss_case(arrays, "scce_logits", scce(from_logits=True), labels, uniform(rng, -4, 4, (6, 5)))

    # categorical crossentropy
    rng = rng_for("cce_probs")
    labels = rng.integers(0, 5, 6).astype(np.int32)
    loss_case(arrays, "cce_probs", cce(), onehot(labels, 5), probability_rows(rng, labels, 5))
    rng = rng_for("cce_probs_unnormalized")
    labels = rng.integers(0, 5, 6).astype(np.int32)
    loss_case(arrays, "cce_probs_unnormalized", cce(), onehot(labels, 5), uniform(rng, 0.05, 1.5, (6, 5)))
    rng = rng_for("cce_soft_targets")
    t = np.exp(rng.normal(0, 1.5, (6, 5)))
    soft = (t / t.sum(axis=1, keepdims=True)).astype(F32)
    u = rng.uniform(0.05, 1.0, (6, 5))
    loss_case(arrays, "cce_soft_targets", cce(), soft, (u / u.sum(axis=1, keepdims=True)).astype(F32))
    rng = rng_for("cce_logits")
    labels = rng.integers(0, 5, 6).astype(np.int32)
    loss_case(arrays, "cce_logits", cce(from_logits=True), onehot(labels, 5), uniform(rng, -4, 4, (6, 5)))

    # binary crossentropy
    rng = rng_for("bce_probs")
    loss_case(
        arrays, "bce_probs", bce(), rng.integers(0, 2, (6, 3)).astype(F32), uniform(rng, 0.02, 0.98, (6, 3))
    )
    rng = rng_for("bce_soft_targets")
    loss_case(arrays, "bce_soft_targets", bce(), uniform(rng, 0, 1, (6, 3)), uniform(rng, 0.02, 0.98, (6, 3)))
    rng = rng_for("bce_saturated")
    y_true = rng.integers(0, 2, (6, 3)).astype(F32)
    y_pred = uniform(rng, 0.02, 0.98, (6, 3))
    # exact 0 and 1 against both labels, and the clip bounds themselves
    y_true[0] = [0, 1, 0]
    y_pred[0] = [0.0, 0.0, 1.0]
    y_true[1] = [1, 1, 0]
    y_pred[1] = [1.0, 0.0, 1.0]
    y_true[2] = [0, 1, 1]
    y_pred[2] = [EPS, EPS, ONE_MINUS_EPS]
    y_true[3] = [0, 1, 0]
    y_pred[3] = [ONE_MINUS_EPS, 1.0, 0.0]
    loss_case(arrays, "bce_saturated", bce(), y_true, y_pred)
    g = arrays["bce_saturated_grad"]
    assert np.all(g[y_pred == 0.0] == 0) and np.all(g[y_pred == 1.0] == 0)
    assert np.all(g[(y_pred == EPS) | (y_pred == ONE_MINUS_EPS)] != 0)
    notes.append(
        "BCE probabilities: gradient is 0 for y_pred exactly 0 or 1 (outside the clip) "
        "but flows at exactly eps and 1-eps (clip bounds inclusive)"
    )
    rng = rng_for("bce_logits")
    loss_case(
        arrays, "bce_logits", bce(from_logits=True), rng.integers(0, 2, (6, 3)).astype(F32), uniform(rng, -4, 4, (6, 3))
    )

    # mean squared error
    rng = rng_for("mse")
    loss_case(arrays, "mse", mse(), uniform(rng, -1, 1, (6, 4)), uniform(rng, -1, 1, (6, 4)))
    rng = rng_for("mse_rank1")
    loss_case(arrays, "mse_rank1", mse(), uniform(rng, -1, 1, (6,)), uniform(rng, -1, 1, (6,)))
    assert arrays["mse_rank1_per_example"].shape == (), "MSE on rank-1 inputs: expected one scalar"
    notes.append("MSE on rank-1 (N,) inputs averages over the last (only) axis: per-example 'NONE' loss is a scalar")

    # SCCE with probabilities is implicitly renormalised (log-probabilities fed to the logits kernel)
    q = np.clip(probs.astype(np.float64), float(EPS), float(ONE_MINUS_EPS))
    lab = arrays["scce_probs_y_true"]
    ref = np.log(q.sum(axis=1)) - np.log(q[np.arange(6), lab])
    assert np.allclose(arrays["scce_probs_per_example"], ref, rtol=1e-5, atol=1e-6)
    assert np.array_equal(arrays["scce_probs_labels_2d_per_example"], arrays["scce_probs_per_example"])

    # CCE with unnormalised rows: Keras divides by the row sum before clipping
    p = arrays["cce_probs_unnormalized_y_pred"].astype(np.float64)
    p = np.clip(p / p.sum(axis=1, keepdims=True), float(EPS), float(ONE_MINUS_EPS))
    ref = -(arrays["cce_probs_unnormalized_y_true"] * np.log(p)).sum(axis=1)
    assert np.allclose(arrays["cce_probs_unnormalized_per_example"], ref, rtol=1e-5)

    # BCE: eps applied twice (clip, then log(q + eps) and log(1 - q + eps))
    q = np.clip(arrays["bce_saturated_y_pred"].astype(np.float64), float(EPS), float(ONE_MINUS_EPS))
    y = arrays["bce_saturated_y_true"]
    ref = -(y * np.log(q + float(EPS)) + (1 - y) * np.log(1 - q + float(EPS))).mean(axis=1)
    assert np.allclose(arrays["bce_saturated_per_example"], ref, rtol=1e-5)

    notes += shortcut_fixtures(arrays)
    save(out_dir, "losses.npz", arrays)
    return notes


def shortcut_fixtures(arrays):
    """The logits shortcut: a loss on the output of a Keras softmax/sigmoid uses
    the pre-activation logits, never the clipped probabilities."""
    K = tf.keras.losses
    notes = []

    # softmax + sparse categorical crossentropy
    rng = rng_for("softmax_shortcut")
    z = uniform(rng, -60, 60, (4, 5))
    y_true = rng.integers(0, 5, 4).astype(np.int32)
    zt = tf.constant(z)
    with tf.GradientTape() as tape:
        tape.watch(zt)
        probs = tf.keras.activations.softmax(zt)
        assert hasattr(probs, "_keras_logits")
        loss = K.SparseCategoricalCrossentropy()(y_true, probs)
    grad = tape.gradient(loss, zt).numpy()
    with tf.GradientTape() as tape:
        tape.watch(zt)
        ref = K.SparseCategoricalCrossentropy(from_logits=True)(y_true, zt)
    ref_grad = tape.gradient(ref, zt).numpy()
    assert loss.numpy() == ref.numpy() and np.array_equal(grad, ref_grad), "softmax shortcut != from_logits"
    clipped = K.SparseCategoricalCrossentropy()(y_true, probs.numpy()).numpy()  # numpy: no shortcut
    assert abs(float(loss) - float(clipped)) > 1.0, (float(loss), float(clipped))
    m = tf.keras.Sequential([L.Activation("softmax", input_shape=(5,))])
    m.compile(loss="sparse_categorical_crossentropy")
    in_model = m.evaluate(z, y_true, batch_size=4, verbose=0)
    assert np.isclose(in_model, float(loss), rtol=1e-6), (in_model, float(loss))
    arrays["softmax_shortcut_z"] = z
    arrays["softmax_shortcut_y_true"] = y_true
    arrays["softmax_shortcut_loss"] = f32_scalar(loss.numpy())
    arrays["softmax_shortcut_grad"] = grad
    notes.append(
        f"softmax shortcut: SCCE on softmax(z) = {float(loss):.6g} (= from_logits on z, = model.evaluate {in_model:.6g}); "
        f"the clipped-probability formula gives {float(clipped):.6g}"
    )

    # sigmoid + binary crossentropy
    rng = rng_for("sigmoid_shortcut")
    z = uniform(rng, -40, 40, (6, 1))
    y_true = rng.integers(0, 2, (6, 1)).astype(F32)
    zt = tf.constant(z)
    with tf.GradientTape() as tape:
        tape.watch(zt)
        probs = tf.keras.activations.sigmoid(zt)
        assert hasattr(probs, "_keras_logits")
        loss = K.BinaryCrossentropy()(y_true, probs)
    grad = tape.gradient(loss, zt).numpy()
    with tf.GradientTape() as tape:
        tape.watch(zt)
        ref = K.BinaryCrossentropy(from_logits=True)(y_true, zt)
    ref_grad = tape.gradient(ref, zt).numpy()
    assert loss.numpy() == ref.numpy() and np.array_equal(grad, ref_grad), "sigmoid shortcut != from_logits"
    clipped = K.BinaryCrossentropy()(y_true, probs.numpy()).numpy()
    assert abs(float(loss) - float(clipped)) > 1.0, (float(loss), float(clipped))
    m = tf.keras.Sequential([L.Activation("sigmoid", input_shape=(1,))])
    m.compile(loss="binary_crossentropy")
    in_model = m.evaluate(z, y_true, batch_size=6, verbose=0)
    assert np.isclose(in_model, float(loss), rtol=1e-6), (in_model, float(loss))
    arrays["sigmoid_shortcut_z"] = z
    arrays["sigmoid_shortcut_y_true"] = y_true
    arrays["sigmoid_shortcut_loss"] = f32_scalar(loss.numpy())
    arrays["sigmoid_shortcut_grad"] = grad
    notes.append(
        f"sigmoid shortcut: BCE on sigmoid(z) = {float(loss):.6g} (= from_logits on z, = model.evaluate {in_model:.6g}); "
        f"the clipped-probability formula gives {float(clipped):.6g}"
    )
    return notes


# ---- 4. metrics -----------------------------------------------------------------------------


def tied_scores(rng, labels, c):
    """(len(labels), c) float32 scores in [0, 1), c >= 4, that set labels[0:5]:
    rows 0-1 tie at their maximum with the label on the first tied index (a hit
    under first-index argmax), rows 2-3 with the label on the second tied index
    (a miss), row 4 has all entries equal and label 0 (a hit); rows 5.. are
    random scores in [0, 0.6) with random labels."""
    n = len(labels)
    p = rng.uniform(0.0, 0.6, (n, c)).astype(F32)
    # row 0: label 1 ties with index 3 (label first)
    labels[0] = 1
    p[0, 1] = p[0, 3] = F32(0.9)
    # row 1: label 0 ties with index 2 (label first)
    labels[1] = 0
    p[1, 0] = p[1, 2] = F32(0.75)
    # row 2: label 3 ties with index 1 (label second: argmax picks 1, a miss)
    labels[2] = 3
    p[2, 1] = p[2, 3] = F32(0.8)
    # row 3: label 2 ties with index 0 (label second: a miss)
    labels[3] = 2
    p[3, 0] = p[3, 2] = F32(0.7)
    # row 4: all equal, label 0 (argmax picks index 0: a hit)
    labels[4] = 0
    p[4, :] = F32(0.25)
    return p


def metric_fixtures(out_dir):
    M = tf.keras.metrics
    arrays = {}
    notes = []

    def record(case, metric, y_true, y_pred):
        metric.update_state(y_true, y_pred)
        arrays[f"{case}_y_true"] = y_true
        arrays[f"{case}_y_pred"] = y_pred
        arrays[f"{case}_value"] = f32_scalar(metric.result().numpy())

    rng = rng_for("sparse_categorical_accuracy")
    labels = rng.integers(0, 4, 8).astype(np.int32)
    scores = tied_scores(rng, labels, 4)
    record("sparse_categorical_accuracy", M.SparseCategoricalAccuracy(), labels, scores)
    record("sparse_categorical_accuracy_labels_2d", M.SparseCategoricalAccuracy(), labels.reshape(8, 1), scores.copy())
    # argmax ties go to the first index: rows 0, 1, 4 hit; rows 2, 3 miss
    hits = (np.argmax(scores, axis=1) == labels).astype(np.float64)
    assert hits[:5].tolist() == [1, 1, 0, 0, 1]
    assert np.isclose(arrays["sparse_categorical_accuracy_value"], hits.mean())
    notes.append("argmax ties: the first maximal index wins (rows with the label second in a tie count as misses)")

    rng = rng_for("categorical_accuracy")
    labels = rng.integers(0, 4, 8).astype(np.int32)
    scores = tied_scores(rng, labels, 4)
    record("categorical_accuracy", M.CategoricalAccuracy(), np.eye(4, dtype=F32)[labels], scores)

    rng = rng_for("binary_accuracy")
    y_true = rng.integers(0, 2, (8, 3)).astype(F32)
    y_pred = uniform(rng, 0, 1, (8, 3))
    y_pred[0, :] = 0.5
    y_true[0, :] = [0, 1, 0]
    y_pred[3, 1] = 0.5
    y_pred[5, 2] = 0.5
    record("binary_accuracy", M.BinaryAccuracy(), y_true, y_pred)
    ref = (y_true == (y_pred > 0.5)).mean()
    assert np.isclose(arrays["binary_accuracy_value"], ref)
    notes.append("binary_accuracy: y_pred exactly 0.5 counts as class 0 (threshold is strictly greater)")

    # 'accuracy' as model.compile resolves it
    def compiled_accuracy(case, loss, y_true, y_pred, expect_fn):
        m = tf.keras.Sequential([L.Activation("linear", input_shape=y_pred.shape[1:])])
        m.compile(loss=loss, metrics=["accuracy"])
        logs = m.evaluate(y_pred, y_true, batch_size=len(y_pred), verbose=0, return_dict=True)
        acc = [x for x in m.metrics if x.name == "accuracy"]
        assert len(acc) == 1 and "accuracy" in logs, (list(logs), [x.name for x in m.metrics])
        fn = acc[0]._fn.__name__
        assert fn == expect_fn, (case, fn)
        arrays[f"{case}_y_true"] = y_true
        arrays[f"{case}_y_pred"] = y_pred
        arrays[f"{case}_value"] = f32_scalar(logs["accuracy"])
        notes.append(f"{case}: 'accuracy' resolved to {fn}, reported as 'accuracy' = {logs['accuracy']:.6g}")

    rng = rng_for("accuracy_with_scce")
    labels = rng.integers(0, 4, 8).astype(np.int32)
    scores = tied_scores(rng, labels, 4)
    compiled_accuracy(
        "accuracy_with_scce", "sparse_categorical_crossentropy", labels, scores, "sparse_categorical_accuracy"
    )
    rng = rng_for("accuracy_with_cce")
    labels = rng.integers(0, 4, 8).astype(np.int32)
    scores = tied_scores(rng, labels, 4)
    compiled_accuracy(
        "accuracy_with_cce", "categorical_crossentropy", np.eye(4, dtype=F32)[labels], scores, "categorical_accuracy"
    )
    rng = rng_for("accuracy_with_bce")
    y_true = rng.integers(0, 2, (8, 1)).astype(F32)
    y_pred = uniform(rng, 0.02, 0.98, (8, 1))
    y_pred[1, 0] = y_pred[6, 0] = 0.5
    y_true[1, 0], y_true[6, 0] = 0, 1
    compiled_accuracy("accuracy_with_bce", "binary_crossentropy", y_true, y_pred, "binary_accuracy")
    # The choice depends on shapes only: BCE on a (N, 3) multi-label output
    # resolves 'accuracy' to categorical_accuracy, not binary_accuracy.
    rng = rng_for("accuracy_with_bce_multilabel")
    y_true = rng.integers(0, 2, (8, 3)).astype(F32)
    y_pred = uniform(rng, 0.02, 0.98, (8, 3))
    compiled_accuracy("accuracy_with_bce_multilabel", "binary_crossentropy", y_true, y_pred, "categorical_accuracy")
    save(out_dir, "metrics.npz", arrays)
    return notes


# ---- 5. optimizers ------------------------------------------------------------------------


OPTIMIZER_CASES = [
    ("sgd", lambda: tf.keras.optimizers.SGD(learning_rate=0.1)),
    ("sgd_momentum", lambda: tf.keras.optimizers.SGD(0.05, momentum=0.9)),
    ("sgd_nesterov", lambda: tf.keras.optimizers.SGD(0.05, momentum=0.9, nesterov=True)),
    ("adam", lambda: tf.keras.optimizers.Adam(learning_rate=0.01)),
    ("adam_default", lambda: tf.keras.optimizers.Adam()),
    ("adam_amsgrad", lambda: tf.keras.optimizers.Adam(learning_rate=0.01, amsgrad=True)),
    ("rmsprop", lambda: tf.keras.optimizers.RMSprop(learning_rate=0.01)),
    (
        "rmsprop_momentum_centered",
        lambda: tf.keras.optimizers.RMSprop(learning_rate=0.01, momentum=0.5, centered=True),
    ),
]


def optimizer_fixtures(out_dir):
    from keras.src.optimizers.optimizer import Optimizer as NewOptimizer

    arrays = {}
    for case, make in OPTIMIZER_CASES:
        rng = rng_for("optimizer_" + case)
        w0 = uniform(rng, -1, 1, (7,))
        grads = uniform(rng, -1, 1, (5, 7))
        # zero entries: step 0 (before any slot is non-zero), step 2, and the
        # same element again at step 4
        grads[0, 2] = 0.0
        grads[2, 5] = 0.0
        grads[4, 2] = 0.0
        opt = make()
        assert isinstance(opt, NewOptimizer), type(opt)
        var = tf.Variable(w0)
        ws = []
        for g in grads:
            opt.apply_gradients([(tf.constant(g), var)])
            ws.append(var.numpy().copy())
        arrays[f"{case}_w0"] = w0
        arrays[f"{case}_grads"] = grads
        arrays[f"{case}_w"] = np.stack(ws).astype(F32)
    save(out_dir, "optimizers.npz", arrays)


# ---- 6. the Fashion-MNIST tutorial model ------------------------------------------------


def read_idx(path, count):
    """The first `count` items of an IDX (gzip) file as a uint8 array."""
    with gzip.open(path, "rb") as f:
        magic = struct.unpack(">I", f.read(4))[0]
        if magic >> 8 != 0x08:
            raise ValueError(f"{path}: not an unsigned-byte IDX file (magic {magic:#x})")
        dims = struct.unpack(">" + "I" * (magic & 0xFF), f.read(4 * (magic & 0xFF)))
        if dims[0] < count:
            raise ValueError(f"{path}: {dims[0]} items, need {count}")
        item = int(np.prod(dims[1:], dtype=np.int64))
        data = f.read(count * item)
    return np.frombuffer(data, np.uint8).reshape((count,) + tuple(dims[1:])).copy()


def fashion_dir():
    root = os.environ.get("SYSTOLIC_DATASETS")
    if not root:
        sys.exit("make_fixtures.py: set SYSTOLIC_DATASETS to the directory that holds fashion-mnist/")
    for name in ("fashion-mnist", "fashion_mnist"):
        d = os.path.join(root, name)
        if os.path.isfile(os.path.join(d, "train-images-idx3-ubyte.gz")):
            return d
    sys.exit(f"make_fixtures.py: no fashion-mnist/train-images-idx3-ubyte.gz (or fashion_mnist/) under {root}")


def fashion_fixture(out_dir, data_dir):
    x = read_idx(os.path.join(data_dir, "train-images-idx3-ubyte.gz"), FASHION_N).reshape(FASHION_N, 28, 28, 1)
    y = read_idx(os.path.join(data_dir, "train-labels-idx1-ubyte.gz"), FASHION_N)
    xf = x.astype(F32)  # raw 0..255 pixels, as the TPU tutorial feeds them
    yf = y.astype(F32)  # the tutorial also casts the labels to float32

    tf.keras.utils.set_random_seed(FASHION_SEED)
    model = tf.keras.Sequential(
        [
            L.Conv2D(64, (3, 3), input_shape=(28, 28, 1), name="conv2d"),
            L.MaxPooling2D(pool_size=(2, 2), strides=(2, 2), name="max_pooling2d"),
            L.Activation("relu", name="activation"),
            L.Flatten(name="flatten"),
            L.Dense(10, name="dense"),
            L.Activation("softmax", name="activation_1"),
        ]
    )
    model.compile(
        optimizer=tf.keras.optimizers.Adam(learning_rate=1e-3),
        loss="sparse_categorical_crossentropy",
        metrics=["sparse_categorical_accuracy"],
    )
    arrays = {"x": x, "y": y}
    for var in model.weights:
        arrays["w0_" + layer_weight_name(var)] = var.numpy()
    expect = ["w0_conv2d_kernel", "w0_conv2d_bias", "w0_dense_kernel", "w0_dense_bias"]
    assert [k for k in arrays if k.startswith("w0_")] == expect, list(arrays)

    ev0 = model.evaluate(xf, yf, batch_size=FASHION_N, verbose=0, return_dict=True)
    model.reset_metrics()  # evaluate leaves its totals in the metric objects

    losses, accs = [], []
    for i in range(FASHION_STEPS):
        sl = slice(FASHION_BATCH * i, FASHION_BATCH * (i + 1))
        loss, acc = model.train_on_batch(xf[sl], yf[sl], reset_metrics=True)
        losses.append(loss)
        accs.append(acc)
    for var in model.weights:
        arrays["w5_" + layer_weight_name(var)] = var.numpy()
    arrays["loss"] = np.asarray(losses, F32)
    arrays["acc"] = np.asarray(accs, F32)
    arrays["pred"] = model.predict(xf[:FASHION_BATCH], verbose=0).astype(F32)
    ev = model.evaluate(xf, yf, batch_size=FASHION_N, verbose=0, return_dict=True)
    arrays["eval_loss"] = f32_scalar(ev["loss"])
    arrays["eval_acc"] = f32_scalar(ev["sparse_categorical_accuracy"])
    arrays["eval0_loss"] = f32_scalar(ev0["loss"])
    arrays["eval0_acc"] = f32_scalar(ev0["sparse_categorical_accuracy"])

    # Training must have done something. With raw 0..255 pixels the logits are
    # in the tens to hundreds: the loss starts far above the clipped-probability
    # cap -log(eps) = 16.12 (so the logits shortcut is in use) and five Adam
    # steps raise the accuracy but need not lower the loss; the fixture records
    # whatever Keras does.
    assert ev0["loss"] > 16.2, ev0
    assert ev["loss"] != ev0["loss"] and ev["sparse_categorical_accuracy"] > ev0["sparse_categorical_accuracy"], (ev0, ev)
    assert not np.array_equal(arrays["w0_dense_kernel"], arrays["w5_dense_kernel"])
    save(out_dir, "fashion_mnist_cnn.npz", arrays)
    return [
        "fashion: per-step train_on_batch loss "
        + ", ".join(f"{v:.6g}" for v in losses)
        + "; acc "
        + ", ".join(f"{v:.4g}" for v in accs),
        f"fashion: evaluate on all {FASHION_N}: before {ev0['loss']:.6g} (acc {ev0['sparse_categorical_accuracy']:.4g}), "
        f"after {FASHION_STEPS} steps {ev['loss']:.6g} (acc {ev['sparse_categorical_accuracy']:.4g}): "
        f"the loss {'fell' if ev['loss'] < ev0['loss'] else 'ROSE'}",
    ]


# ---- 7. recurrent layers: Embedding, LSTM, GRU ---------------------------------------------


def _sigmoid(v):
    return 1.0 / (1.0 + np.exp(-v))


NP_ACTIVATIONS = {"tanh": np.tanh, "sigmoid": _sigmoid, "relu": lambda v: np.maximum(v, 0.0)}


def lstm_reference(
    x, kernel, recurrent_kernel, bias, activation="tanh", recurrent_activation="sigmoid", go_backwards=False
):
    """float64 numpy LSTM, written from keras/src/layers/rnn/lstm.py (LSTMCell.call,
    implementation=2). Returns (sequence in the order Keras returns it, h, c)."""
    act, ract = NP_ACTIVATIONS[activation], NP_ACTIVATIONS[recurrent_activation]
    x = x.astype(np.float64)
    k, rk = kernel.astype(np.float64), recurrent_kernel.astype(np.float64)
    b = 0.0 if bias is None else bias.astype(np.float64)
    n, steps, _ = x.shape
    u = rk.shape[0]
    h, c = np.zeros((n, u)), np.zeros((n, u))
    seq = []
    for t in range(steps - 1, -1, -1) if go_backwards else range(steps):
        z = x[:, t] @ k + h @ rk + b  # gate blocks along the last axis: i, f, c, o
        i, f, g, o = ract(z[:, :u]), ract(z[:, u : 2 * u]), act(z[:, 2 * u : 3 * u]), ract(z[:, 3 * u :])
        c = f * c + i * g
        h = o * act(c)
        seq.append(h)  # written at the index of the processing step
    return np.stack(seq, axis=1), h, c


def gru_reference(
    x, kernel, recurrent_kernel, bias, activation="tanh", recurrent_activation="sigmoid", go_backwards=False
):
    """float64 numpy GRU with reset_after=True, written from keras/src/layers/rnn/gru.py
    (GRUCell.call, implementation=2). Returns (sequence in Keras's order, h)."""
    act, ract = NP_ACTIVATIONS[activation], NP_ACTIVATIONS[recurrent_activation]
    x = x.astype(np.float64)
    k, rk = kernel.astype(np.float64), recurrent_kernel.astype(np.float64)
    b_in, b_rec = (0.0, 0.0) if bias is None else (bias[0].astype(np.float64), bias[1].astype(np.float64))
    n, steps, _ = x.shape
    u = rk.shape[0]
    h = np.zeros((n, u))
    seq = []
    for t in range(steps - 1, -1, -1) if go_backwards else range(steps):
        mx = x[:, t] @ k + b_in  # blocks z, r, h
        mi = h @ rk + b_rec
        z = ract(mx[:, :u] + mi[:, :u])
        r = ract(mx[:, u : 2 * u] + mi[:, u : 2 * u])
        hh = act(mx[:, 2 * u :] + r * mi[:, 2 * u :])  # the reset gate multiplies (h W_h + b_rec_h)
        h = z * h + (1.0 - z) * hh
        seq.append(h)
    return np.stack(seq, axis=1), h


def assert_close(what, got, ref, tol=1e-5):
    """max |got - ref| <= tol * max(1, max |ref|)."""
    err = float(np.max(np.abs(got.astype(np.float64) - ref)))
    scale = max(1.0, float(np.max(np.abs(ref))))
    assert err <= tol * scale, f"{what}: max error {err:.3g} against the numpy reference (scale {scale:.3g})"
    return err


def embedding_indices(rng, shape, vocab):
    """int32 indices: a uniform draw in [0, vocab), then index 0 forced at [0,0]
    and [2,4], index 7 at [0,1], [0,5] and [1,2] (repeated within row 0 and
    across rows), and [1,6] set equal to [2,0] (another across-row repeat)."""
    x = rng.integers(0, vocab, shape).astype(np.int32)
    x[0, 0] = x[2, 4] = 0
    x[0, 1] = x[0, 5] = x[1, 2] = 7
    x[1, 6] = x[2, 0]
    return x


# (case, layer factory, x shape, x distribution, weight range). A distribution is
# (lo, hi) for uniform float input, or ("int", vocab) for Embedding indices.
RECURRENT_CASES = [
    ("embedding", lambda: L.Embedding(20, 4), (3, 7), ("int", 20), 0.5),
    ("embedding_input_length", lambda: L.Embedding(50, 8, input_length=5), (2, 5), ("int", 50), 0.5),
    ("lstm", lambda: L.LSTM(5), (3, 6, 4), (-1, 1), 0.5),
    ("lstm_return_sequences", lambda: L.LSTM(5, return_sequences=True), (3, 6, 4), (-1, 1), 0.5),
    ("lstm_go_backwards", lambda: L.LSTM(4, go_backwards=True, return_sequences=True), (2, 5, 3), (-1, 1), 0.5),
    ("lstm_go_backwards_last", lambda: L.LSTM(4, go_backwards=True), (2, 5, 3), (-1, 1), 0.5),
    ("lstm_no_bias", lambda: L.LSTM(3, use_bias=False), (2, 4, 3), (-1, 1), 0.5),
    ("lstm_relu_tanh", lambda: L.LSTM(4, activation="relu", recurrent_activation="tanh"), (2, 5, 3), (-1, 1), 0.5),
    ("lstm_return_state", lambda: L.LSTM(4, return_state=True, return_sequences=True), (2, 5, 3), (-1, 1), 0.5),
    ("lstm_long", lambda: L.LSTM(8), (2, 60, 5), (-1, 1), 0.3),
    ("gru", lambda: L.GRU(5), (3, 6, 4), (-1, 1), 0.5),
    ("gru_return_sequences", lambda: L.GRU(5, return_sequences=True), (3, 6, 4), (-1, 1), 0.5),
    ("gru_go_backwards", lambda: L.GRU(4, go_backwards=True, return_sequences=True), (2, 5, 3), (-1, 1), 0.5),
    ("gru_no_bias", lambda: L.GRU(3, use_bias=False), (2, 4, 3), (-1, 1), 0.5),
    ("gru_relu_tanh", lambda: L.GRU(4, activation="relu", recurrent_activation="tanh"), (2, 5, 3), (-1, 1), 0.5),
    ("gru_return_state", lambda: L.GRU(4, return_state=True, return_sequences=True), (2, 5, 3), (-1, 1), 0.5),
    ("gru_long", lambda: L.GRU(8), (2, 60, 5), (-1, 1), 0.3),
]


def dense_grad(g):
    """A gradient as a dense numpy array; an IndexedSlices (Embedding) is summed
    over repeated indices by the conversion (unsorted_segment_sum)."""
    return tf.convert_to_tensor(g).numpy()


def recurrent_reference(layer, x, w):
    """The numpy reference output(s) of an LSTM/GRU layer, as Keras returns them."""
    cfg = dict(
        activation=tf.keras.activations.serialize(layer.activation),
        recurrent_activation=tf.keras.activations.serialize(layer.recurrent_activation),
        go_backwards=layer.go_backwards,
    )
    if isinstance(layer, L.LSTM):
        seq, h, c = lstm_reference(x, w["w_kernel"], w["w_recurrent_kernel"], w.get("w_bias"), **cfg)
        states = [h, c]
    else:
        assert layer.reset_after
        seq, h = gru_reference(x, w["w_kernel"], w["w_recurrent_kernel"], w.get("w_bias"), **cfg)
        states = [h]
    out = seq if layer.return_sequences else h
    return [out] + states if layer.return_state else [out]


def recurrent_layer_fixtures(out_dir):
    notes = []
    for case, make, xshape, dist, wr in RECURRENT_CASES:
        rng = rng_for("layer_" + case)
        integer_input = dist[0] == "int"
        if integer_input:
            if case == "embedding":
                x = embedding_indices(rng, xshape, dist[1])
            else:
                x = rng.integers(0, dist[1], xshape).astype(np.int32)
        else:
            x = uniform(rng, dist[0], dist[1], xshape)
        layer = make()
        xt = tf.constant(x)
        layer(xt, training=False)  # build; Keras's initial values are overwritten below
        arrays = {"x": x}
        for var in layer.weights:
            value = uniform(rng, -wr, wr, tuple(var.shape))
            var.assign(value)
            arrays["w_" + short_weight_name(var)] = value
        out_names = ["y"]
        if getattr(layer, "return_state", False):
            out_names += ["y_h", "y_c"] if isinstance(layer, L.LSTM) else ["y_h"]
        cot_names = ["r" + n[1:] for n in out_names]  # r, r_h, r_c
        with tf.GradientTape() as tape:
            if not integer_input:
                tape.watch(xt)
            outs = layer(xt, training=False)
            outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
            assert len(outs) == len(out_names), (case, len(outs))
            rs = [uniform(rng, -1, 1, tuple(o.shape)) for o in outs]
            s = tf.add_n([tf.reduce_sum(o * r) for o, r in zip(outs, rs)])
        weights = list(layer.trainable_weights)
        sources = weights if integer_input else [xt] + weights
        grads = tape.gradient(s, sources)
        for name, o in zip(out_names, outs):
            arrays[name] = o.numpy()
        for name, r in zip(cot_names, rs):
            arrays[name] = r
        if not integer_input:
            arrays["dx"] = grads[0].numpy()
            grads = grads[1:]
        for var, g in zip(weights, grads):
            if isinstance(layer, L.Embedding):
                assert isinstance(g, tf.IndexedSlices), type(g)  # the gradient of a gather
            arrays["dw_" + short_weight_name(var)] = dense_grad(g)

        # Checks of the behaviours the README states.
        if isinstance(layer, L.Embedding):
            w = arrays["w_embeddings"]
            assert np.array_equal(arrays["y"], w[x]), "Embedding forward is not a plain row gather"
            # float32 sums over the occurrences in row-major order of x: bit-exact
            ref = np.zeros(w.shape, F32)
            np.add.at(ref, x.reshape(-1), arrays["r"].reshape(-1, w.shape[1]))
            assert np.array_equal(arrays["dw_embeddings"], ref), f"{case}: dw_embeddings is not the scatter-add of r"
            unused = np.setdiff1d(np.arange(w.shape[0]), x)
            assert np.all(arrays["dw_embeddings"][unused] == 0)
            if case == "embedding":
                counts = np.bincount(x.reshape(-1), minlength=w.shape[0])
                assert counts[7] >= 3 and counts[0] >= 2 and len(set(x[0])) < x.shape[1]
                assert len(set(x[0]) & set(x[1])) and len(set(x[1]) & set(x[2]))
                notes.append(
                    f"embedding: dw_embeddings sums r over every occurrence of an index "
                    f"(index 7 occurs {counts[7]} times, index 0 {counts[0]} times); unused rows get exactly 0"
                )
        else:
            w = {k: v for k, v in arrays.items() if k.startswith("w_")}
            refs = recurrent_reference(layer, x, w)
            err = max(assert_close(f"{case} {n}", arrays[n], ref) for n, ref in zip(out_names, refs))
            notes.append(f"{case}: y matches the numpy reference to {err:.2g}")
            if layer.go_backwards and layer.return_sequences:
                # The sequence comes back in processing order: y[:, t] is the state
                # after consuming x[:, T-1-t]; it is not flipped back. It equals the
                # forward layer run on the time-reversed input.
                fwd = type(layer).from_config({**layer.get_config(), "go_backwards": False, "name": None})
                fwd(xt)
                fwd.set_weights(layer.get_weights())
                y_rev = fwd(tf.constant(x[:, ::-1].copy())).numpy()
                assert np.array_equal(arrays["y"], y_rev), f"{case}: not the forward pass on x[:, ::-1]"
                notes.append(
                    f"{case}: y[:, t] = forward layer on x[:, ::-1] at t (bit-identical); y[:, -1] is the final state"
                )
            if getattr(layer, "return_state", False):
                assert np.array_equal(arrays["y_h"], arrays["y"][:, -1]), f"{case}: h != last output"
        save(out_dir, f"layer_{case}.npz", arrays)
    return notes


def model_weight_name(layer, var):
    """layer 'lstm_1', variable 'lstm_1/lstm_cell/kernel:0' -> 'lstm_1_kernel'."""
    return layer.name + "_" + short_weight_name(var)


def stacked_recurrent_fixture(out_dir, case, layers, xshape):
    rng = rng_for(case)
    x = uniform(rng, -1, 1, xshape)
    model = tf.keras.Sequential(layers)
    model.build((None,) + xshape[1:])
    arrays = {"x": x}
    for layer in model.layers:
        for var in layer.weights:
            value = uniform(rng, -0.5, 0.5, tuple(var.shape))
            var.assign(value)
            arrays["w_" + model_weight_name(layer, var)] = value
    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        y = model(xt, training=False)
        r = uniform(rng, -1, 1, tuple(y.shape))
        s = tf.reduce_sum(y * r)
    weights = [(layer, var) for layer in model.layers for var in layer.trainable_weights]
    grads = tape.gradient(s, [xt] + [v for _, v in weights])
    arrays["y"] = y.numpy()
    arrays["r"] = r
    arrays["dx"] = grads[0].numpy()
    for (layer, var), g in zip(weights, grads[1:]):
        arrays["dw_" + model_weight_name(layer, var)] = g.numpy()
    names = [layer.name for layer in model.layers]
    expect = ["w_" + n + "_" + w for n in names for w in ("kernel", "recurrent_kernel", "bias")]
    assert [k for k in arrays if k.startswith("w_")] == expect, list(arrays)
    # numpy reference: the first layer's whole sequence feeds the second
    ref = x
    for n in names:
        wts = {k: arrays[f"w_{n}_{k[2:]}"] for k in ("w_kernel", "w_recurrent_kernel", "w_bias")}
        lay = model.get_layer(n)
        ref = recurrent_reference(lay, ref, wts)[0]
    err = assert_close(case, arrays["y"], ref)
    save(out_dir, f"{case}.npz", arrays)
    return [f"{case}: y matches the chained numpy reference to {err:.2g}"]


IMDB_N = 16
IMDB_LEN = 10
IMDB_VOCAB = 30
IMDB_BATCHES = [slice(0, 8), slice(8, 16), slice(0, 8)]


def imdb_fixture(out_dir):
    """The IMDB tutorial model on 16 made-up reviews: initial weights, the loss
    and gradient at w0, three train_on_batch steps and an evaluate."""
    rng = rng_for("imdb_lstm")
    lengths = rng.integers(3, IMDB_LEN + 1, IMDB_N)
    lengths[0] = IMDB_LEN  # one row without padding
    lengths[5] = 1  # one row that is almost all padding
    x = np.zeros((IMDB_N, IMDB_LEN), np.int32)
    for i, n in enumerate(lengths):
        x[i, IMDB_LEN - n :] = rng.integers(1, IMDB_VOCAB, n)  # pad_sequences 'pre': zeros first
    y = rng.integers(0, 2, IMDB_N).astype(F32)
    assert 0 < y.sum() < IMDB_N and np.any(x[:, 0] == 0) and np.all(x[0] != 0)

    model = tf.keras.Sequential(
        [
            L.Embedding(IMDB_VOCAB, 8, input_length=IMDB_LEN, name="embedding"),
            L.LSTM(6, name="lstm"),
            L.Dense(1, activation="sigmoid", name="dense"),
        ]
    )
    model.compile(
        optimizer=tf.keras.optimizers.Adam(learning_rate=0.01),
        loss="binary_crossentropy",
        metrics=["accuracy"],
    )
    arrays = {"x": x, "y": y}
    pairs = [(layer, var) for layer in model.layers for var in layer.weights]
    for layer, var in pairs:
        value = uniform(rng, -0.5, 0.5, tuple(var.shape))
        var.assign(value)
        arrays["w0_" + model_weight_name(layer, var)] = value
    wnames = [model_weight_name(layer, var) for layer, var in pairs]
    assert wnames == [
        "embedding_embeddings",
        "lstm_kernel",
        "lstm_recurrent_kernel",
        "lstm_bias",
        "dense_kernel",
        "dense_bias",
    ], wnames
    assert [v.ref() for _, v in pairs] == [v.ref() for v in model.trainable_variables]

    arrays["pred0"] = model.predict(x, verbose=0).astype(F32)

    # loss0 / grad0: the training step's loss, computed as train_step does it.
    xt, yt = tf.constant(x), tf.constant(y)
    with tf.GradientTape() as tape:
        y_pred = model(xt, training=True)
        loss = model.compute_loss(x=xt, y=yt, y_pred=y_pred)
    grads = tape.gradient(loss, model.trainable_variables)
    model.reset_metrics()  # compute_loss fed the loss tracker; start step 0 clean
    assert isinstance(grads[0], tf.IndexedSlices), type(grads[0])  # Adam takes its sparse branch here
    arrays["loss0"] = f32_scalar(loss.numpy())
    for name, g in zip(wnames, grads):
        arrays["grad0_" + name] = dense_grad(g)

    # numpy check of the forward pass and of the loss (BCE from the logits: the
    # sigmoid output carries _keras_logits)
    w0 = {n: arrays["w0_" + n] for n in wnames}
    emb = w0["embedding_embeddings"][x]
    _, h, _ = lstm_reference(emb, w0["lstm_kernel"], w0["lstm_recurrent_kernel"], w0["lstm_bias"])
    z = (h @ w0["dense_kernel"].astype(np.float64) + w0["dense_bias"]).reshape(-1)
    assert_close("imdb pred0", arrays["pred0"].reshape(-1), _sigmoid(z))
    assert_close("imdb y_pred(training=True)", y_pred.numpy().reshape(-1), _sigmoid(z))
    bce = np.maximum(z, 0) - z * y + np.log1p(np.exp(-np.abs(z)))
    assert_close("imdb loss0", arrays["loss0"], bce.mean())
    assert hasattr(y_pred, "_keras_logits")

    losses, accs = [], []
    for sl in IMDB_BATCHES:
        step_loss, step_acc = model.train_on_batch(x[sl], y[sl], reset_metrics=True)
        losses.append(step_loss)
        accs.append(step_acc)
    acc_metric = [m for m in model.metrics if m.name == "accuracy"]
    assert len(acc_metric) == 1 and acc_metric[0]._fn.__name__ == "binary_accuracy", model.metrics
    arrays["loss"] = np.asarray(losses, F32)
    arrays["acc"] = np.asarray(accs, F32)
    for layer, var in pairs:
        arrays["w3_" + model_weight_name(layer, var)] = var.numpy()
    ev = model.evaluate(x, y, batch_size=IMDB_N, verbose=0, return_dict=True)
    arrays["eval_loss"] = f32_scalar(ev["loss"])
    arrays["eval_acc"] = f32_scalar(ev["accuracy"])
    for n in wnames:
        assert not np.array_equal(arrays["w0_" + n], arrays["w3_" + n]), n
    save(out_dir, "imdb_lstm.npz", arrays)

    notes = [
        "imdb: loss0 "
        + f"{float(arrays['loss0']):.6g}; per-step train_on_batch loss "
        + ", ".join(f"{v:.6g}" for v in losses)
        + "; acc "
        + ", ".join(f"{v:.4g}" for v in accs)
        + f"; evaluate after 3 steps: loss {ev['loss']:.6g}, acc {ev['accuracy']:.4g}",
    ]
    notes += imdb_adam_check(arrays, wnames)
    return notes


def imdb_adam_check(arrays, wnames):
    """Replays the three Adam steps in float32 numpy from eager GradientTape
    gradients, once with Keras's sparse (IndexedSlices) update for the embedding
    and once with the dense update, and reports how far each lands from w3."""
    x, y = arrays["x"], arrays["y"]
    lr, b1, b2, eps = F32(0.01), F32(0.9), F32(0.999), F32(1e-7)
    c1, c2 = F32(1 - 0.9), F32(1 - 0.999)  # (1 - beta) as Python doubles rounded to float32
    model = tf.keras.Sequential(
        [
            L.Embedding(IMDB_VOCAB, 8, input_length=IMDB_LEN, name="embedding"),
            L.LSTM(6, name="lstm"),
            L.Dense(1, activation="sigmoid", name="dense"),
        ]
    )
    bce = tf.keras.losses.BinaryCrossentropy()
    out, final = {}, {}
    for mode in ("sparse", "dense"):
        w = {n: arrays["w0_" + n].copy() for n in wnames}
        m = {n: np.zeros_like(w[n]) for n in wnames}
        v = {n: np.zeros_like(w[n]) for n in wnames}
        for t, sl in enumerate(IMDB_BATCHES, start=1):
            model.set_weights([w[n] for n in wnames])
            with tf.GradientTape() as tape:
                yp = model(tf.constant(x[sl]), training=True)
                loss = bce(tf.constant(y[sl].reshape(-1, 1)), yp)
            gs = [dense_grad(g) for g in tape.gradient(loss, model.trainable_variables)]
            alpha = lr * np.sqrt(F32(1) - b2 ** F32(t)) / (F32(1) - b1 ** F32(t))
            for n, g in zip(wnames, gs):
                if mode == "sparse" and n == "embedding_embeddings":
                    rows = np.unique(x[sl])
                    m[n] = m[n] + (-m[n] * c1)
                    v[n] = v[n] + (-v[n] * c2)
                    m[n][rows] += g[rows] * c1
                    v[n][rows] += np.square(g[rows]) * c2
                else:
                    m[n] = m[n] + (g - m[n]) * c1
                    v[n] = v[n] + (np.square(g) - v[n]) * c2
                w[n] = w[n] - (m[n] * alpha) / (np.sqrt(v[n]) + eps)
        final[mode] = w
        out[mode] = max(float(np.max(np.abs(w[n] - arrays["w3_" + n]))) for n in wnames)
        out[mode + "_emb"] = float(np.max(np.abs(w["embedding_embeddings"] - arrays["w3_embedding_embeddings"])))
    assert out["sparse"] < 1e-5 and out["dense"] < 1e-5, out
    emb = "embedding_embeddings"
    sparse_vs_dense = float(np.max(np.abs(final["sparse"][emb] - final["dense"][emb])))
    return [
        f"imdb: sparse vs dense Adam formula on the embedding after 3 steps: max |diff| {sparse_vs_dense:.2g}",
        "imdb: numpy Adam replay from eager gradients vs w3: max |diff| "
        f"{out['sparse']:.2g} with the sparse embedding update (embedding {out['sparse_emb']:.2g}), "
        f"{out['dense']:.2g} with the dense one (embedding {out['dense_emb']:.2g})"
    ]


def recurrent_facts():
    """Asserts the initializer facts the README states for LSTM, GRU and Embedding."""
    notes = []
    # LSTM: unit_forget_bias=True -> bias init zeros except the forget quarter (i, f, c, o order)
    lstm = L.LSTM(3)
    lstm.build((None, 2, 2))
    b = lstm.cell.bias.numpy()
    assert np.array_equal(b, np.array([0] * 3 + [1] * 3 + [0] * 6, F32)), b
    assert isinstance(lstm.cell.kernel_initializer, tf.keras.initializers.GlorotUniform)
    assert isinstance(lstm.cell.recurrent_initializer, tf.keras.initializers.Orthogonal)
    lstm_nf = L.LSTM(3, unit_forget_bias=False)
    lstm_nf.build((None, 2, 2))
    assert np.all(lstm_nf.cell.bias.numpy() == 0)
    notes.append("LSTM bias init with unit_forget_bias=True (default): " + str(b.astype(int).tolist()))
    # GRU: bias (2, 3*units) zeros; same kernel initializers
    gru = L.GRU(3)
    gru.build((None, 2, 2))
    assert gru.cell.bias.shape == (2, 9) and np.all(gru.cell.bias.numpy() == 0)
    assert isinstance(gru.cell.recurrent_initializer, tf.keras.initializers.Orthogonal)
    # Orthogonal: QR of a normal (max(rows, cols), min(rows, cols)) matrix, sign fix
    # by diag(r), transposed when rows < cols. Reproduced from the initializer's own
    # normal draw (a seeded stateless generator gives the same draw again).
    for shape in [(5, 20), (4, 12), (20, 5), (6, 6)]:
        init = tf.keras.initializers.Orthogonal(seed=11)
        q = init(shape).numpy()
        rows, cols = shape
        a = init._random_generator.random_normal((max(rows, cols), min(rows, cols)), dtype=tf.float32).numpy()
        qq, rr = np.linalg.qr(a.astype(np.float64))
        qq = qq * np.sign(np.diag(rr))
        ref = qq.T if rows < cols else qq
        assert_close(f"orthogonal {shape}", q, ref, 1e-6)
        gram = q @ q.T if rows < cols else q.T @ q
        assert_close(f"orthogonal {shape} gram", gram, np.eye(min(rows, cols)), 1e-6)
    notes.append(
        "Orthogonal: numpy QR of the initializer's own normal draw reproduces it (rows < cols: orthonormal rows)"
    )
    # Embedding: embeddings_initializer 'uniform' = RandomUniform(-0.05, 0.05); mask_zero=False
    emb = L.Embedding(20, 4)
    cfg = emb.embeddings_initializer.get_config()
    assert isinstance(emb.embeddings_initializer, tf.keras.initializers.RandomUniform)
    assert cfg["minval"] == -0.05 and cfg["maxval"] == 0.05, cfg
    assert emb.mask_zero is False
    notes.append("Embedding default initializer: RandomUniform(-0.05, 0.05); mask_zero=False")
    return notes


def recurrent_fixtures(out_dir):
    notes = recurrent_facts()
    notes += recurrent_layer_fixtures(out_dir)
    notes += stacked_recurrent_fixture(
        out_dir,
        "model_lstm_stacked",
        [L.LSTM(6, return_sequences=True, name="lstm"), L.LSTM(4, name="lstm_1")],
        (2, 5, 3),
    )
    notes += stacked_recurrent_fixture(
        out_dir,
        "model_gru_stacked",
        [L.GRU(6, return_sequences=True, name="gru"), L.GRU(4, name="gru_1")],
        (2, 5, 3),
    )
    notes += imdb_fixture(out_dir)
    return notes


# ---- main -----------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "golden"), help="output directory (tests/golden)")
    args = ap.parse_args()
    data_dir = fashion_dir()  # fail before writing anything
    os.makedirs(args.out, exist_ok=True)
    print(f"tensorflow {tf.__version__}, numpy {np.__version__}; writing {args.out}")
    notes = []
    notes += layer_fixtures(args.out)
    model_fixture(args.out)
    notes += loss_fixtures(args.out)
    notes += metric_fixtures(args.out)
    optimizer_fixtures(args.out)
    notes += fashion_fixture(args.out, data_dir)
    notes += recurrent_fixtures(args.out)  # last, so the fixtures above run exactly as before
    print("observed:")
    for n in notes:
        print("  - " + n)


if __name__ == "__main__":
    main()
