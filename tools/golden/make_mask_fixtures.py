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
                        mf.layer_weight_name, positive_variance)
    if words:
        arrays["x"] = x
    arrays["json"] = ms.text_bytes(model.to_json())  # Masking's and Embedding(mask_zero)'s arguments
    return arrays


def positive_variance(var, value):
    """BatchNormalization's moving variance drawn in [0.5, 1.5] (a negative one gives NaN, in Keras too)."""
    return value + np.float32(1.0) if "moving_variance" in var.name else value


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


# issue 17: the layers Keras lets a mask through, each chain ending in a layer that uses it (so a mask
# dropped on the way shows in its output), and Bidirectional's other merge modes
PASS_CASES = [
    # Masking with a non-zero mask_value: the padded steps hold 0.5
    ("pass_dropout_dense", 0.5, lambda: [L.Masking(0.5), L.Dropout(0.3), L.Activation("tanh"), L.Dense(4),
                                         L.LSTM(3, return_sequences=True)]),
    ("pass_norm_td", 0.0, lambda: [L.Masking(), L.LayerNormalization(), L.TimeDistributed(L.Dense(3)),
                                   L.BatchNormalization(), L.GRU(3, return_sequences=True)]),
    ("pass_activations", 0.0, lambda: [L.Masking(), L.ReLU(), L.LeakyReLU(), L.ELU(), L.PReLU(),
                                       L.SpatialDropout1D(0.2), L.SimpleRNN(3, return_sequences=True)]),
    ("bidi_lstm_seq_mul", 0.0, lambda: [L.Masking(), L.Bidirectional(L.LSTM(3, return_sequences=True),
                                                                      merge_mode="mul")]),
    ("bidi_gru_ave", 0.0, lambda: [L.Masking(), L.Bidirectional(L.GRU(2), merge_mode="ave")]),
    ("bidi_simple_rnn_seq_ave", 0.0, lambda: [L.Masking(), L.Bidirectional(L.SimpleRNN(2, return_sequences=True),
                                                                            merge_mode="ave")]),
]


def padded_with(rng, keep, features, value):
    """padded(), the steps not kept holding `value` (Masking's mask_value) in every feature."""
    keep = np.array(keep, dtype=np.float32)[:, :, None]
    return mf.uniform(rng, -1, 1, keep.shape[:2] + (features,)) * keep + np.float32(value) * (1 - keep)


def pass_case(name, value, make):
    x = padded_with(mf.rng_for("mask_" + name), KEEP, 4, value)
    return run(name, make(), x)


# a second padding pattern, marked by steps of 0.5 (Masking(0.5)); with KEEP's zeros, two masks of one input
KEEP2 = [
    [1, 0, 1, 1, 1, 1],
    [1, 1, 1, 1, 1, 1],
    [0, 0, 1, 1, 1, 1],
    [1, 1, 1, 1, 0, 0],
    [1, 1, 1, 0, 1, 1],
]


def run_functional(name, inp, out, x):
    """make_sequence_fixtures.numbers() of a Functional model (its JSON holds the graph)."""
    model = tf.keras.Model(inp, out)
    words = x.dtype == np.int32
    arrays = ms.numbers(model, mf.rng_for("mask_" + name + "_w"), x.astype(np.float32) if words else x,
                        mf.layer_weight_name)
    if words:
        arrays["x"] = x
    arrays["json"] = ms.text_bytes(model.to_json())
    return arrays


def two_masks_x(name):
    """KEEP's padded steps 0, KEEP2's 0.5 (where KEEP keeps them)."""
    rng = mf.rng_for("mask_" + name)
    keep, keep2 = np.array(KEEP, np.float32)[:, :, None], np.array(KEEP2, np.float32)[:, :, None]
    x = mf.uniform(rng, -1, 1, keep.shape[:2] + (3,)) * keep
    return np.where((keep > 0) & (keep2 == 0), np.float32(0.5), x).astype(np.float32)


def merge_cases():
    """The merge layers' masks (Keras's _Merge.compute_mask and Concatenate.compute_mask), each then used by a
    recurrent layer: an unmasked input beside a masked one; two inputs with different masks (Masking(0) and
    Masking(0.5) of one input) merged elementwise (their logical and) and concatenated along the features (the
    same) and along the steps (the masks concatenated)."""
    cases = {}

    def build(name, merge_of, rnn):
        tf.keras.backend.clear_session()
        x = two_masks_x(name)
        inp = L.Input(x.shape[1:])
        out = rnn(merge_of(inp))
        cases[name] = run_functional(name, inp, out, x)

    def masked_and_plain(layer):
        return lambda inp: layer([L.Dense(3)(L.Masking()(inp)), L.Dense(3)(inp)])

    def two_masks(layer):
        return lambda inp: layer([L.Dense(3)(L.Masking()(inp)), L.Dense(3)(L.Masking(0.5)(inp))])

    build("merge_add_plain", masked_and_plain(L.Add()), lambda t: L.LSTM(3, return_sequences=True)(t))
    build("merge_concat_plain", masked_and_plain(L.Concatenate()), lambda t: L.GRU(3, return_sequences=True)(t))
    build("merge_multiply", two_masks(L.Multiply()), lambda t: L.LSTM(3)(t))
    build("merge_average", two_masks(L.Average()), lambda t: L.SimpleRNN(3, return_sequences=True)(t))
    build("merge_maximum", two_masks(L.Maximum()), lambda t: L.GRU(2)(t))
    build("merge_subtract", two_masks(L.Subtract()), lambda t: L.LSTM(2, return_sequences=True)(t))
    build("merge_concat", two_masks(L.Concatenate()), lambda t: L.LSTM(3, return_sequences=True)(t))
    build("merge_concat_steps", lambda inp: L.Concatenate(axis=1)([L.Masking()(inp), L.Masking(0.5)(inp)]),
          lambda t: L.LSTM(3, return_sequences=True)(t))
    return cases


def nested_cases():
    """Masks cross nested models (Functional.call(inputs, mask)): into a nested Sequential model whose LSTM uses
    the mask and passes it out to the outer LSTM; made inside a nested Functional model (Embedding(mask_zero))
    and used outside it."""
    cases = {}
    tf.keras.backend.clear_session()
    x = padded(mf.rng_for("mask_nested_seq"), KEEP, 4)
    inner = tf.keras.Sequential([L.Dense(4), L.LSTM(3, return_sequences=True)], name="inner")
    inp = L.Input(x.shape[1:])
    out = L.LSTM(2, return_sequences=True)(inner(L.Masking()(inp)))
    cases["nested_seq"] = run_functional("nested_seq", inp, out, x)

    tf.keras.backend.clear_session()
    rng = mf.rng_for("mask_nested_words")
    ids = rng.integers(1, 12, (len(KEEP), 6)).astype(np.int32) * np.array(KEEP, dtype=np.int32)
    w_in = L.Input((6,), dtype="int32")
    words = tf.keras.Model(w_in, L.Dense(3)(L.Embedding(12, 4, mask_zero=True)(w_in)), name="words")
    inp = L.Input((6,), dtype="int32")
    out = L.Dense(1)(L.GRU(3)(words(inp)))
    cases["nested_words"] = run_functional("nested_words", inp, out, ids)
    return cases


def metrics_case():
    """A masked sequence model's evaluate() (mask_metrics.npz): Masking -> LSTM(return_sequences) ->
    Dense(1, sigmoid), binary_crossentropy, metrics binary accuracy, AUC, Precision, Recall and mse, weighted
    metrics accuracy and AUC, sample weights; 7 samples in batches of 3 (the last partial). Keras passes the
    output's mask to the metrics as their sample weight (times the sample weights for weighted_metrics)."""
    tf.keras.backend.clear_session()
    rng = mf.rng_for("mask_metrics")
    keep = KEEP + [[1, 1, 0, 0, 0, 0], [0, 1, 1, 1, 0, 1]]
    x = padded(rng, keep, 3)
    t = rng.integers(0, 2, (len(keep), 6, 1)).astype(np.float32)
    sw = mf.uniform(rng, 0.2, 2.0, (len(keep),))
    model = tf.keras.Sequential([L.Masking(), L.LSTM(4, return_sequences=True), L.Dense(1, activation="sigmoid")])
    model.build((None,) + x.shape[1:])
    arrays = {"x": x, "t": t, "sw": sw}
    for var in model.weights:
        var.assign(mf.uniform(rng, -1.0, 1.0, tuple(var.shape)))
    # the output's bias centred so that about half the predictions exceed 0.5 (Precision and Recall see both)
    p = np.median(model.predict(x, verbose=0))
    bias = model.layers[-1].bias
    bias.assign(bias.numpy() - np.float32(np.log(p / (1 - p))))
    for var in model.weights:
        arrays["w_" + mf.layer_weight_name(var)] = var.numpy()
    metrics = ["accuracy", tf.keras.metrics.AUC(name="auc"), tf.keras.metrics.Precision(name="precision"),
               tf.keras.metrics.Recall(name="recall"), "mse"]
    weighted = ["accuracy", tf.keras.metrics.AUC(name="wauc")]
    model.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="binary_crossentropy", metrics=metrics,
                  weighted_metrics=weighted)
    logs = model.evaluate(x, t, sample_weight=sw, batch_size=3, verbose=0, return_dict=True)
    for k, v in logs.items():
        arrays["eval_" + k] = np.float64(v)
    # the mask is the weight: accuracy by hand over the unmasked steps
    m = np.array(keep, np.float32)
    hit = ((model.predict(x, verbose=0) > 0.5).astype(np.float32) == t)[:, :, 0]
    assert abs(float(np.sum(hit * m) / np.sum(m)) - logs["accuracy"]) < 1e-6, "accuracy is sum(hit m) / sum(m)"
    print("mask_metrics:", logs)
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
    for name, value, make in PASS_CASES:
        mf.save(args.out, f"mask_{name}.npz", pass_case(name, value, make))
    for name, arrays in {**merge_cases(), **nested_cases()}.items():
        mf.save(args.out, f"mask_{name}.npz", arrays)
    mf.save(args.out, "mask_metrics.npz", metrics_case())


if __name__ == "__main__":
    main()
