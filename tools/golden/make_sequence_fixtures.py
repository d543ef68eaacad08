#!/usr/bin/env python3
"""make_sequence_fixtures.py - golden fixtures for the sequence layers (issue 17).

Runs tf.keras 2.15 on fixed weights and inputs for Conv1D (valid, same,
causal, dilated, grouped), MaxPooling1D, AveragePooling1D,
GlobalMaxPooling1D, GlobalAveragePooling1D, SimpleRNN, RepeatVector,
Permute, SpatialDropout1D and SpatialDropout2D (inference), Bidirectional
(around LSTM, GRU and SimpleRNN; concat, sum, mul, ave) and
TimeDistributed (around Dense and Conv2D), and writes
tests/golden/layer_<case>.npz in the layer conventions of
tests/golden/README.md (x, w_<weight>, y, r, dx, dw_<weight>), through
make_conv_fixtures.py's run_case.

It also writes tests/golden/model_sequence.npz: a Sequential model of
these layers with its weights (w_<layer>_<weight>, a recurrent cell's scope left out), y, r, dx and dw_*, and
as uint8 arrays its model.to_json() ("json") and its model.summary()
("summary"), plus tests/golden/model_sequence.h5, the model's
save_weights() file, for test_sequence.c; and the same for
model_wrappers, whose weights are keyed by their whole names
(w_bidirectional_forward_lstm_1_lstm_cell_kernel), as are the wrapper
cases'.

Determinism is make_fixtures.py's: TF with oneDNN off, one thread, op
determinism; each case draws from a numpy Generator seeded with the CRC-32
of its file name; weights uniform [-0.5, 0.5].

Usage (from the repository root):
    .gl/bin/python tools/golden/make_sequence_fixtures.py [--out DIR]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402  (sets TF's determinism before importing it)
import make_conv_fixtures as mc  # noqa: E402

import argparse  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

L = tf.keras.layers

CASES = [
    ("conv1d", lambda: L.Conv1D(4, 3), (2, 9, 3)),
    ("conv1d_same_s2_relu", lambda: L.Conv1D(5, 3, strides=2, padding="same", activation="relu"), (2, 9, 3)),
    ("conv1d_causal_dilated", lambda: L.Conv1D(3, 3, padding="causal", dilation_rate=2), (2, 10, 2)),
    ("conv1d_groups_nobias_tanh", lambda: L.Conv1D(4, 2, groups=2, use_bias=False, activation="tanh"), (2, 7, 4)),
    ("max_pooling1d", lambda: L.MaxPooling1D(), (2, 9, 3)),
    ("max_pooling1d_same_s2", lambda: L.MaxPooling1D(3, strides=2, padding="same"), (2, 8, 3)),
    ("average_pooling1d", lambda: L.AveragePooling1D(3), (2, 9, 3)),
    ("average_pooling1d_same_s2", lambda: L.AveragePooling1D(3, strides=2, padding="same"), (2, 8, 3)),
    ("global_max_pooling1d", lambda: L.GlobalMaxPooling1D(), (2, 6, 3)),
    ("global_average_pooling1d_keepdims", lambda: L.GlobalAveragePooling1D(keepdims=True), (2, 6, 3)),
    ("simple_rnn", lambda: L.SimpleRNN(4), (2, 5, 3)),
    ("simple_rnn_seq_relu", lambda: L.SimpleRNN(4, activation="relu", return_sequences=True), (2, 5, 3)),
    (
        "simple_rnn_backwards_nobias",
        lambda: L.SimpleRNN(3, go_backwards=True, use_bias=False, return_sequences=True),
        (2, 6, 2),
    ),
    ("repeat_vector", lambda: L.RepeatVector(3), (2, 4)),
    ("permute", lambda: L.Permute((2, 1)), (2, 3, 4)),
    ("permute_3d", lambda: L.Permute((3, 1, 2)), (2, 3, 4, 2)),
    ("spatial_dropout1d_inference", lambda: L.SpatialDropout1D(0.5), (2, 4, 3)),
    ("spatial_dropout2d_inference", lambda: L.SpatialDropout2D(0.5), (2, 3, 4, 3)),
]


# Wrapper cases, each a one-layer Sequential model after clear_session() (so
# the names are "bidirectional" and "lstm"): their weights are keyed by the
# whole variable name (w_bidirectional_forward_lstm_lstm_cell_kernel), since
# the forward and backward layers' leaves collide.
WRAPPER_CASES = [
    ("bidirectional_lstm_seq", lambda: L.Bidirectional(L.LSTM(3, return_sequences=True)), (2, 5, 4)),
    ("bidirectional_gru_sum", lambda: L.Bidirectional(L.GRU(3), merge_mode="sum"), (2, 5, 4)),
    (
        "bidirectional_simple_rnn_mul_seq",
        lambda: L.Bidirectional(L.SimpleRNN(3, return_sequences=True), merge_mode="mul"),
        (2, 5, 4),
    ),
    ("bidirectional_lstm_ave_backwards", lambda: L.Bidirectional(L.LSTM(2, go_backwards=True), merge_mode="ave"), (2, 4, 3)),
    ("time_distributed_dense", lambda: L.TimeDistributed(L.Dense(4, activation="tanh")), (2, 3, 5)),
    ("time_distributed_conv2d", lambda: L.TimeDistributed(L.Conv2D(3, 2)), (2, 3, 5, 4, 2)),
]


def run_wrapper_case(case, make, xshape):
    tf.keras.backend.clear_session()
    rng = mf.rng_for("layer_" + case)
    x = mf.uniform(rng, -1, 1, xshape)
    model = tf.keras.Sequential([make()])
    model.build((None,) + xshape[1:])
    return numbers(model, rng, x, mf.layer_weight_name)


def numbers(model, rng, x, weight_name, value_of=None):
    """x, weights w_* drawn uniform [-0.5, 0.5] (passed through value_of(var, value) when given) and assigned,
    y, r, dx and dw_* of sum(y r)."""
    arrays = {"x": x}
    for var in model.weights:
        value = mf.uniform(rng, -0.5, 0.5, tuple(var.shape))
        if value_of:
            value = value_of(var, value)
        var.assign(value)
        arrays["w_" + weight_name(var)] = value
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
    if grads[0] is not None:  # word ids (make_mask_fixtures.py) have none
        arrays["dx"] = grads[0].numpy()
    for var, g in zip(weights, grads[1:]):
        arrays["dw_" + weight_name(var)] = tf.convert_to_tensor(g).numpy()  # an Embedding's is IndexedSlices
    return arrays


def model_weight_name(var):
    """'simple_rnn/simple_rnn_cell/kernel:0' -> 'simple_rnn_kernel': the layer, then the weight (README)."""
    return var.name.split("/")[0] + "_" + mf.short_weight_name(var)


def text_bytes(s):
    return np.frombuffer(s.encode("utf-8"), dtype=np.uint8).copy()


def model_fixture(out_dir):
    """One Sequential model of the family: its numbers, JSON, summary and .h5 weights."""
    tf.keras.backend.clear_session()
    rng = mf.rng_for("model_sequence")
    x = mf.uniform(rng, -1, 1, (2, 12, 3))
    model = tf.keras.Sequential(
        [
            L.Conv1D(6, 3, padding="causal", dilation_rate=2, activation="relu", input_shape=(12, 3)),
            L.MaxPooling1D(2),
            L.SpatialDropout1D(0.25),
            L.Conv1D(5, 2, padding="same"),
            L.AveragePooling1D(2, strides=1),
            L.SimpleRNN(4, return_sequences=True),
            L.Permute((2, 1)),
            L.GlobalMaxPooling1D(),
            L.RepeatVector(3),
            L.SimpleRNN(3, go_backwards=True),
            L.Dense(2),
        ]
    )
    fixture_of(model, rng, x, out_dir, "model_sequence")


def wrappers_model_fixture(out_dir):
    """The wrappers in one model, their inner layers named among the others'."""
    tf.keras.backend.clear_session()
    rng = mf.rng_for("model_wrappers")
    x = mf.uniform(rng, -1, 1, (2, 6, 3))
    model = tf.keras.Sequential(
        [
            L.TimeDistributed(L.Dense(4, activation="relu"), input_shape=(6, 3)),
            L.LSTM(4, return_sequences=True),
            L.Bidirectional(L.LSTM(3, return_sequences=True)),
            L.Bidirectional(L.SimpleRNN(2, return_sequences=True), merge_mode="sum"),
            L.Bidirectional(L.GRU(2), merge_mode="ave"),
            L.Dense(1),
        ]
    )
    fixture_of(model, rng, x, out_dir, "model_wrappers", mf.layer_weight_name)


def fixture_of(model, rng, x, out_dir, name, weight_name=None):
    """model's numbers, JSON, summary and .h5 weights as <name>.npz and <name>.h5."""
    arrays = numbers(model, rng, x, weight_name or model_weight_name)
    lines = []
    model.summary(print_fn=lines.append)
    arrays["json"] = text_bytes(model.to_json())
    arrays["summary"] = text_bytes("\n".join(lines) + "\n")
    mf.save(out_dir, name + ".npz", arrays)
    model.save_weights(os.path.join(out_dir, name + ".h5"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(mf.REPO, "tests", "golden"), help="output directory (tests/golden)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    print(f"tensorflow {tf.__version__}, numpy {np.__version__}; writing {args.out}")
    for case, make, xshape in CASES:
        arrays = mc.run_case(case, make, xshape, (-1, 1))
        mf.save(args.out, f"layer_{case}.npz", arrays)
    model_fixture(args.out)
    for case, make, xshape in WRAPPER_CASES:
        mf.save(args.out, f"layer_{case}.npz", run_wrapper_case(case, make, xshape))
    wrappers_model_fixture(args.out)


if __name__ == "__main__":
    main()
