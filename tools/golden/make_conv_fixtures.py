#!/usr/bin/env python3
"""make_conv_fixtures.py - golden fixtures for the convolution family of layers.

Runs tf.keras 2.15 on fixed weights and inputs for Conv2D with dilation_rate
and groups, DepthwiseConv2D, SeparableConv2D, Conv2DTranspose, ZeroPadding2D,
Cropping2D, UpSampling2D (nearest and bilinear), GlobalAveragePooling2D and
GlobalMaxPooling2D, plus a small MobileNet-like stack of them, and writes
tests/golden/layer_<case>.npz and tests/golden/model_conv_family.npz for
test_golden.c (test_conv_family). The arrays follow tests/golden/README.md's
layer conventions: x, w_<weight>, y, r, dx, dw_<weight>.

Determinism is make_fixtures.py's, whose helpers this script uses: TF runs
with oneDNN off, one thread and op determinism; each case draws from its
own numpy Generator seeded with the CRC-32 of "layer_<case>" (x, then each
weight in Keras's order, then r); weights are uniform [-0.5, 0.5];
np.savez_compressed in a fixed order. The script also asserts the
behaviours test_golden.c relies on (bilinear upsampling with half-pixel
centers, tf.reduce_max's gradient shared by tied maxima, the depthwise
kernel's output channel order c * M + m) against numpy references.

Usage (from the repository root):
    .gl/bin/python tools/golden/make_conv_fixtures.py [--out DIR]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402  (sets TF's determinism before importing it)

import argparse  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

L = tf.keras.layers

# (case, layer factory, x shape, x distribution): "ties" is relu(uniform - 0.6)
# with some positive maxima duplicated, so that whole windows tie.
CASES = [
    ("conv2d_dilated", lambda: L.Conv2D(4, 3, dilation_rate=2), (2, 9, 8, 3), (-1, 1)),
    (
        "conv2d_dilated_same_relu",
        lambda: L.Conv2D(3, (3, 2), dilation_rate=(2, 3), padding="same", activation="relu"),
        (2, 7, 8, 2),
        (-1, 1),
    ),
    ("conv2d_groups", lambda: L.Conv2D(6, 3, groups=3, strides=2, padding="same"), (2, 7, 6, 6), (-1, 1)),
    ("conv2d_groups_dilated", lambda: L.Conv2D(4, 2, groups=2, dilation_rate=2, use_bias=False), (2, 6, 6, 4), (-1, 1)),
    ("depthwise_conv2d", lambda: L.DepthwiseConv2D(3), (2, 7, 6, 3), (-1, 1)),
    (
        "depthwise_conv2d_same_s2_m2_relu",
        lambda: L.DepthwiseConv2D(3, strides=2, padding="same", depth_multiplier=2, activation="relu"),
        (2, 7, 8, 3),
        (-1, 1),
    ),
    (
        "depthwise_conv2d_dilated_m3_nobias",
        lambda: L.DepthwiseConv2D((2, 3), dilation_rate=2, depth_multiplier=3, use_bias=False),
        (2, 7, 8, 2),
        (-1, 1),
    ),
    ("separable_conv2d", lambda: L.SeparableConv2D(4, 3), (2, 7, 6, 3), (-1, 1)),
    (
        "separable_conv2d_same_s2_m2_tanh",
        lambda: L.SeparableConv2D(5, 3, strides=2, padding="same", depth_multiplier=2, activation="tanh"),
        (2, 8, 7, 3),
        (-1, 1),
    ),
    (
        "separable_conv2d_dilated_nobias",
        lambda: L.SeparableConv2D(3, 2, dilation_rate=2, use_bias=False),
        (2, 6, 7, 4),
        (-1, 1),
    ),
    ("conv2d_transpose", lambda: L.Conv2DTranspose(4, 3), (2, 4, 5, 3), (-1, 1)),
    ("conv2d_transpose_same_s2", lambda: L.Conv2DTranspose(3, 3, strides=2, padding="same"), (2, 4, 3, 2), (-1, 1)),
    (
        "conv2d_transpose_valid_s2_op1_relu",
        lambda: L.Conv2DTranspose(2, (3, 2), strides=2, output_padding=1, activation="relu"),
        (2, 3, 4, 3),
        (-1, 1),
    ),
    (
        "conv2d_transpose_same_s3_op21_nobias",
        lambda: L.Conv2DTranspose(3, 4, strides=3, padding="same", output_padding=(2, 1), use_bias=False),
        (2, 3, 3, 2),
        (-1, 1),
    ),
    ("zero_padding2d", lambda: L.ZeroPadding2D(), (2, 3, 4, 2), (-1, 1)),
    ("zero_padding2d_asymmetric", lambda: L.ZeroPadding2D(((1, 2), (0, 3))), (2, 3, 4, 2), (-1, 1)),
    ("cropping2d", lambda: L.Cropping2D(((1, 0), (2, 1))), (2, 5, 6, 2), (-1, 1)),
    ("cropping2d_pair", lambda: L.Cropping2D((1, 2)), (2, 5, 6, 2), (-1, 1)),
    ("up_sampling2d", lambda: L.UpSampling2D(), (2, 3, 4, 2), (-1, 1)),
    ("up_sampling2d_23", lambda: L.UpSampling2D((2, 3)), (2, 3, 2, 2), (-1, 1)),
    ("up_sampling2d_bilinear", lambda: L.UpSampling2D((2, 3), interpolation="bilinear"), (2, 3, 4, 2), (-1, 1)),
    ("up_sampling2d_bilinear_3", lambda: L.UpSampling2D(3, interpolation="bilinear"), (1, 4, 3, 2), (-1, 1)),
    ("global_average_pooling2d", lambda: L.GlobalAveragePooling2D(), (2, 5, 4, 3), (-1, 1)),
    ("global_average_pooling2d_keepdims", lambda: L.GlobalAveragePooling2D(keepdims=True), (2, 3, 4, 3), (-1, 1)),
    ("global_max_pooling2d", lambda: L.GlobalMaxPooling2D(), (2, 5, 4, 3), (-1, 1)),
    ("global_max_pooling2d_ties_keepdims", lambda: L.GlobalMaxPooling2D(keepdims=True), (2, 3, 3, 4), "ties"),
]


def tied(rng, shape):
    """relu(uniform - 0.6): most entries 0, so channels tie at 0; channel 1 of
    image 0 has its maximum copied to a second pixel (a tie between positives)."""
    x = np.maximum(mf.uniform(rng, -1, 1, shape) - np.float32(0.6), np.float32(0))
    x[0, :, :, 0] = 0  # a channel that is zero everywhere: 9 tied maxima
    x[0, 0, 0, 1] = x[0, 2, 2, 1] = np.float32(0.875)  # two tied positive maxima
    return x


def bilinear_ref(x, sh, sw):
    """tf.image.resize bilinear, half-pixel centers, in float32 as TF orders it."""
    n, h, w, c = x.shape

    def src(i, size, s):
        v = (np.float32(i) + np.float32(0.5)) * (np.float32(size) / np.float32(size * s)) - np.float32(0.5)
        f = np.floor(v)
        return max(int(f), 0), min(int(np.ceil(v)), size - 1), np.float32(v - f)

    y = np.zeros((n, h * sh, w * sw, c), np.float32)
    for i in range(h * sh):
        t, b, yl = src(i, h, sh)
        for j in range(w * sw):
            l_, r_, xl = src(j, w, sw)
            top = x[:, t, l_] + (x[:, t, r_] - x[:, t, l_]) * xl
            bottom = x[:, b, l_] + (x[:, b, r_] - x[:, b, l_]) * xl
            y[:, i, j] = top + (bottom - top) * yl
    return y


def run_case(case, make, xshape, dist):
    rng = mf.rng_for("layer_" + case)
    x = tied(rng, xshape) if dist == "ties" else mf.uniform(rng, dist[0], dist[1], xshape)
    layer = make()
    xt = tf.constant(x)
    layer(xt, training=False)
    arrays = {"x": x}
    for var in layer.weights:
        value = mf.uniform(rng, -0.5, 0.5, tuple(var.shape))
        var.assign(value)
        arrays["w_" + mf.short_weight_name(var)] = value
    with tf.GradientTape() as tape:
        tape.watch(xt)
        y = layer(xt, training=False)
        r = mf.uniform(rng, -1, 1, tuple(y.shape))
        s = tf.reduce_sum(y * r)
    weights = list(layer.trainable_weights)
    grads = tape.gradient(s, [xt] + weights)
    arrays["y"] = y.numpy()
    arrays["r"] = r
    arrays["dx"] = grads[0].numpy()
    for var, g in zip(weights, grads[1:]):
        arrays["dw_" + mf.short_weight_name(var)] = g.numpy()
    return arrays


def checks(case, arrays):
    """The behaviours the C side copies, asserted against numpy."""
    x, y, r, dx = arrays["x"], arrays["y"], arrays["r"], arrays["dx"]
    if case.startswith("up_sampling2d_bilinear"):
        sh, sw = y.shape[1] // x.shape[1], y.shape[2] // x.shape[2]
        ref = bilinear_ref(x, sh, sw)
        assert np.allclose(y, ref, rtol=0, atol=1e-6), "UpSampling2D bilinear is not half-pixel tf.image.resize"
    if case == "global_max_pooling2d_ties_keepdims":
        xr = x.reshape(x.shape[0], -1, x.shape[3])
        ind = (xr == xr.max(axis=1, keepdims=True)).astype(np.float32)
        ref = (ind / ind.sum(axis=1, keepdims=True) * r.reshape(r.shape[0], 1, -1)).reshape(x.shape)
        assert np.allclose(dx, ref, rtol=1e-6, atol=1e-7), "reduce_max gradient is not shared among ties"
        assert np.count_nonzero(dx[0, :, :, 0]) == 9 and np.count_nonzero(dx[0, :, :, 1]) == 2
    if case == "depthwise_conv2d_dilated_m3_nobias":
        # output channel c * M + m is input channel c through depthwise_kernel[..., c, m]
        k = arrays["w_depthwise_kernel"]
        for c in range(k.shape[2]):
            for m in range(k.shape[3]):
                one = tf.nn.conv2d(x[..., c : c + 1], k[:, :, c : c + 1, m : m + 1], 1, "VALID", dilations=2)
                assert np.allclose(y[..., c * k.shape[3] + m], one.numpy()[..., 0], atol=1e-5)


def model_fixture(out_dir):
    """A MobileNet-like stack of the family, as one Sequential model."""
    rng = mf.rng_for("model_conv_family")
    x = mf.uniform(rng, -1, 1, (2, 9, 9, 3))
    model = tf.keras.Sequential(
        [
            L.ZeroPadding2D(((0, 1), (0, 1)), name="pad"),
            L.Conv2D(8, 3, strides=2, activation="relu", name="stem"),
            L.DepthwiseConv2D(3, padding="same", activation="relu", name="dw"),
            L.Conv2D(6, 1, name="pw"),
            L.SeparableConv2D(5, 3, padding="same", depth_multiplier=2, activation="relu", name="sep"),
            L.Conv2DTranspose(4, 2, strides=2, name="up"),
            L.Cropping2D(1, name="crop"),
            L.UpSampling2D(interpolation="bilinear", name="bilinear"),
            L.GlobalMaxPooling2D(keepdims=True, name="gmp"),
            L.GlobalAveragePooling2D(name="gap"),
            L.Dense(3, activation="softmax", name="dense"),
        ]
    )
    model.build((None,) + x.shape[1:])
    arrays = {"x": x}
    for var in model.weights:
        value = mf.uniform(rng, -0.5, 0.5, tuple(var.shape))
        var.assign(value)
        arrays["w_" + mf.layer_weight_name(var)] = value
    xt = tf.constant(x)
    with tf.GradientTape() as tape:
        tape.watch(xt)
        y = model(xt, training=False)
        r = mf.uniform(rng, -1, 1, tuple(y.shape))
        s = tf.reduce_sum(y * r)
    weights = list(model.trainable_weights)
    grads = tape.gradient(s, [xt] + weights)
    arrays["y"] = y.numpy()
    arrays["r"] = r
    arrays["dx"] = grads[0].numpy()
    for var, g in zip(weights, grads[1:]):
        arrays["dw_" + mf.layer_weight_name(var)] = g.numpy()
    mf.save(out_dir, "model_conv_family.npz", arrays)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(mf.REPO, "tests", "golden"), help="output directory (tests/golden)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    print(f"tensorflow {tf.__version__}, numpy {np.__version__}; writing {args.out}")
    for case, make, xshape, dist in CASES:
        arrays = run_case(case, make, xshape, dist)
        checks(case, arrays)
        mf.save(args.out, f"layer_{case}.npz", arrays)
    model_fixture(args.out)


if __name__ == "__main__":
    main()
