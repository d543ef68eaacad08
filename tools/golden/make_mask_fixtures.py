#!/usr/bin/env python3
"""make_mask_fixtures.py - golden fixtures for Keras's masks (issue 17).

Runs tf.keras 2.15 on fixed weights and padded sequences of mixed lengths
and writes tests/golden/mask_<case>.npz for tests/test_masking.c, in the
layer conventions of tests/golden/README.md (x, w_<weight>, y, r, dx,
dw_<weight>; and "json", model.to_json() as uint8), the weights keyed by
their whole variable names
(w_bidirectional_forward_lstm_lstm_cell_kernel), each model built after
clear_session() so that its layers have Keras's first automatic names.

The float cases start with Masking() (mask_value 0): the batch's rows are
a full row, a row of one step at the end, a row of three steps at the
start (post-padded), a fully padded row, and a row with a padded step in
the middle -- then LSTM, GRU and SimpleRNN (last output, return_sequences,
go_backwards), Bidirectional (concat and sum, sequences and last), and
GlobalAveragePooling1D behind a Dense (the mask passes the Dense; the
fully padded row is left out there: Keras divides by its zero count and
gives NaN). The word cases start with Embedding(mask_zero=True) over ids
with 0 as padding (no dx).

The loss case, mask_loss.npz: Masking -> LSTM(return_sequences) ->
Dense(1) compiled with mse and SGD(0.1): x, t (the targets), the weights
before ("w_*"), evaluate()'s loss (Keras's sum(l mask) / sum(mask)), and
the weights after one train_on_batch ("after_*").

Determinism is make_fixtures.py's (oneDNN off, one thread, op
determinism; each case's numpy Generator seeded with the CRC-32 of its
file name; weights uniform [-0.5, 0.5]).

Usage (from the repository root):
    .venv/bin/python tools/golden/make_mask_fixtures.py [--out DIR]
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402  (sets TF's determinism before importing it)
import make_sequence_fixtures as ms  # noqa: E402

import argparse  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

L = tf.keras.layers

# steps kept per row: a full row, one step at the end, three at the start, none, a gap in the middle
KEEP = [
    [1, 1, 1, 1, 1, 1],
    [0, 0, 0, 0, 0, 1],
    [1, 1, 1, 0, 0, 0],
    [0, 0, 0, 0, 0, 0],
    [1, 1, 0, 1, 1, 1],
]

FLOAT_CASES = [
    ("lstm", lambda: L.LSTM(3)),
    ("lstm_seq", lambda: L.LSTM(3, return_sequences=True)),
    ("lstm_back_seq", lambda: L.LSTM(3, go_backwards=True, return_sequences=True)),
    ("gru", lambda: L.GRU(3)),
    ("gru_seq_back", lambda: L.GRU(3, go_backwards=True, return_sequences=True)),
    ("simple_rnn", lambda: L.SimpleRNN(3)),
    ("simple_rnn_seq", lambda: L.SimpleRNN(3, return_sequences=True)),
    ("bidi_lstm_seq", lambda: L.Bidirectional(L.LSTM(3, return_sequences=True))),
    ("bidi_gru_sum", lambda: L.Bidirectional(L.GRU(3), merge_mode="sum")),
    ("bidi_simple_rnn_seq_sum", lambda: L.Bidirectional(L.SimpleRNN(2, return_sequences=True), merge_mode="sum")),
    ("bidi_lstm", lambda: L.Bidirectional(L.LSTM(2))),
]


def padded(rng, keep, features):
    """x (B, T, F) uniform in [-1, 1], the steps not kept all zeros (Masking's mask_value)."""
    keep = np.array(keep, dtype=np.float32)
    x = mf.uniform(rng, -1, 1, keep.shape + (features,))
    return x * keep[:, :, None]


def run(name, layers, x):
    """make_sequence_fixtures.numbers() of the model, x as float (word ids are cast back, without dx)."""
    tf.keras.backend.clear_session()
    model = tf.keras.Sequential(layers)
    model.build((None,) + x.shape[1:])
    words = x.dtype == np.int32
    arrays = ms.numbers(model, mf.rng_for("mask_" + name + "_w"), x.astype(np.float32) if words else x,
                        mf.layer_weight_name)
    if words:
        arrays["x"] = x
    arrays["json"] = ms.text_bytes(model.to_json())  # Masking's and Embedding(mask_zero)'s arguments
    return arrays


def float_case(name, make):
    x = padded(mf.rng_for("mask_" + name), KEEP, 4)
    return run(name, [L.Masking(), make()], x)


def gap_case():
    x = padded(mf.rng_for("mask_gap"), [k for k in KEEP if any(k)], 3)
    return run("gap", [L.Masking(), L.Dense(4), L.GlobalAveragePooling1D()], x)


def words_case():
    """Embedding(mask_zero) -> Bidirectional(LSTM, sequences) -> LSTM -> Dense: ids with 0 as padding."""
    rng = mf.rng_for("mask_words")
    ids = rng.integers(1, 12, (len(KEEP), 6)).astype(np.int32) * np.array(KEEP, dtype=np.int32)
    layers = [L.Embedding(12, 4, mask_zero=True, input_shape=(6,)), L.Bidirectional(L.LSTM(3, return_sequences=True)),
              L.LSTM(2), L.Dense(1)]
    return run("words", layers, ids)


def loss_case():
    tf.keras.backend.clear_session()
    rng = mf.rng_for("mask_loss")
    x = padded(rng, KEEP[:3] + KEEP[4:], 3)
    t = mf.uniform(rng, -1, 1, (4, 6, 1))
    model = tf.keras.Sequential([L.Masking(), L.LSTM(3, return_sequences=True), L.Dense(1)])
    model.build((None,) + x.shape[1:])
    arrays = {"x": x, "t": t}
    for var in model.weights:
        value = mf.uniform(rng, -0.5, 0.5, tuple(var.shape))
        var.assign(value)
        arrays["w_" + mf.layer_weight_name(var)] = value
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="mse")
    arrays["loss"] = mf.f32_scalar(model.evaluate(x, t, batch_size=4, verbose=0))
    keep = np.array(KEEP[:3] + KEEP[4:], dtype=np.float32)
    per_step = np.mean((model.predict(x, verbose=0) - t) ** 2, axis=-1)
    assert abs(float(np.sum(per_step * keep) / np.sum(keep)) - float(arrays["loss"])) < 1e-6, "loss is sum(l m)/sum(m)"
    model.train_on_batch(x, t)
    for var in model.weights:
        arrays["after_" + mf.layer_weight_name(var)] = var.numpy()
    return arrays


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(mf.REPO, "tests", "golden"), help="output directory (tests/golden)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    print(f"tensorflow {tf.__version__}, numpy {np.__version__}; writing {args.out}")
    for name, make in FLOAT_CASES:
        mf.save(args.out, f"mask_{name}.npz", float_case(name, make))
    mf.save(args.out, "mask_gap.npz", gap_case())
    mf.save(args.out, "mask_words.npz", words_case())
    mf.save(args.out, "mask_loss.npz", loss_case())


if __name__ == "__main__":
    main()
