#!/usr/bin/env python3
"""make_rnn_activation_fixtures.py - golden fixtures for issue 15's recurrent
activations: LSTM and GRU with any Keras activation name as activation and
recurrent_activation, from tf.keras 2.15.

Writes into tests/golden/ (test_golden.c's test_rnn_activations reads them):

  layer_rnn_act_<case>.npz  one LSTM or GRU layer on fixed x and weights, as
                            make_fixtures.py's layer files: x, w_kernel,
                            w_recurrent_kernel, w_bias, y, r, dx, dw_* (the
                            gradients of sum(y * r))

Across the cases every activation systolic reads other than tanh, sigmoid
and relu (which have the scans' fast cells) appears: elu, selu, gelu, swish,
softplus, softsign, hard_sigmoid (Keras 2.15's clip(0.2 x + 0.5, 0, 1)),
exponential, relu6 and linear, both as activation and as
recurrent_activation, with return_sequences both ways and go_backwards.
Each case's y is also checked here against a float64 numpy cell written from
Keras's LSTMCell and GRUCell (reset_after).

tests/golden/README.md documents them. Determinism is make_fixtures.py's:
oneDNN off, one thread, op determinism, each case's numpy Generator seeded
with the CRC-32 of its file's name ("layer_rnn_act_<case>"), weights drawn
uniform and assigned.

Usage (from the repository root):
    .venv/bin/python tools/golden/make_rnn_activation_fixtures.py [--out DIR]
"""

import os

import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixtures as mf  # noqa: E402  (sets TF's determinism before importing it)

import argparse  # noqa: E402
import math  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

L = tf.keras.layers
rng_for, uniform, save = mf.rng_for, mf.uniform, mf.save
F32 = np.float32


# (case, layer class, units, activation, recurrent_activation, return_sequences, go_backwards, x shape)
CASES = [
    ("lstm_gelu_hard_sigmoid", L.LSTM, 4, "gelu", "hard_sigmoid", False, False, (2, 5, 3)),
    ("lstm_elu_softsign_seq", L.LSTM, 4, "elu", "softsign", True, False, (2, 5, 3)),
    ("lstm_selu_swish_seq", L.LSTM, 3, "selu", "swish", True, False, (3, 4, 2)),
    ("lstm_exponential_sigmoid", L.LSTM, 3, "exponential", "sigmoid", False, False, (2, 5, 3)),
    ("lstm_relu6_hard_sigmoid_backwards", L.LSTM, 4, "relu6", "hard_sigmoid", True, True, (2, 5, 3)),
    ("lstm_softplus_linear", L.LSTM, 3, "softplus", "linear", False, False, (2, 4, 3)),
    ("lstm_tanh_gelu_seq", L.LSTM, 3, "tanh", "gelu", True, False, (2, 4, 3)),
    ("gru_swish_softsign", L.GRU, 4, "swish", "softsign", False, False, (2, 5, 3)),
    ("gru_gelu_hard_sigmoid_seq", L.GRU, 4, "gelu", "hard_sigmoid", True, False, (2, 5, 3)),
    ("gru_elu_sigmoid_seq", L.GRU, 3, "elu", "sigmoid", True, False, (3, 4, 2)),
    ("gru_selu_softplus", L.GRU, 3, "selu", "softplus", False, False, (2, 4, 3)),
    ("gru_exponential_relu6_seq", L.GRU, 3, "exponential", "relu6", True, False, (2, 4, 3)),
    ("gru_softsign_exponential_backwards", L.GRU, 3, "softsign", "exponential", False, True, (2, 4, 3)),
    ("gru_linear_selu_seq", L.GRU, 3, "linear", "selu", True, False, (2, 4, 3)),
]

SELU_ALPHA, SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
NP_ACT = {
    "linear": lambda v: v,
    "tanh": np.tanh,
    "sigmoid": lambda v: 1 / (1 + np.exp(-v)),
    "elu": lambda v: np.where(v > 0, v, np.expm1(np.minimum(v, 0))),
    "selu": lambda v: SELU_SCALE * np.where(v > 0, v, SELU_ALPHA * np.expm1(np.minimum(v, 0))),
    "gelu": lambda v: 0.5 * v * (1 + np.vectorize(math.erf)(v / math.sqrt(2))),
    "swish": lambda v: v / (1 + np.exp(-v)),
    "softplus": lambda v: np.logaddexp(v, 0),
    "softsign": lambda v: v / (1 + np.abs(v)),
    "hard_sigmoid": lambda v: np.clip(0.2 * v + 0.5, 0, 1),
    "exponential": np.exp,
    "relu6": lambda v: np.clip(v, 0, 6),
}


def reference(cls, act, rec, x, k, rk, b, go_backwards):
    """float64 LSTMCell / GRUCell (reset_after) steps; returns the outputs in Keras's order (B, T, U)."""
    f, g = NP_ACT[act], NP_ACT[rec]
    x, k, rk, b = (a.astype(np.float64) for a in (x, k, rk, b))
    if go_backwards:
        x = x[:, ::-1]
    u = rk.shape[0]
    h = np.zeros((x.shape[0], u))
    c = np.zeros_like(h)
    out = []
    for t in range(x.shape[1]):
        if cls is L.LSTM:
            z = x[:, t] @ k + h @ rk + b
            i, fg, cc, o = (z[:, n * u:(n + 1) * u] for n in range(4))
            c = g(fg) * c + g(i) * f(cc)
            h = g(o) * f(c)
        else:
            xw, inner = x[:, t] @ k + b[0], h @ rk + b[1]
            zz = g(xw[:, :u] + inner[:, :u])
            r = g(xw[:, u:2 * u] + inner[:, u:2 * u])
            hh = f(xw[:, 2 * u:] + r * inner[:, 2 * u:])
            h = zz * h + (1 - zz) * hh
        out.append(h)
    return np.stack(out, 1)


def layer_fixtures(out_dir):
    for case, cls, units, act, rec, seqs, back, xshape in CASES:
        name = "rnn_act_" + case
        rng = rng_for("layer_" + name)
        x = uniform(rng, -1, 1, xshape)
        layer = cls(units, activation=act, recurrent_activation=rec, return_sequences=seqs, go_backwards=back)
        xt = tf.constant(x)
        layer(xt, training=False)  # build; the initial values are overwritten below
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
        seq = reference(cls, act, rec, x, arrays["w_kernel"], arrays["w_recurrent_kernel"], arrays["w_bias"], back)
        ref = seq if seqs else seq[:, -1]
        err = np.max(np.abs(ref - arrays["y"]))
        assert err < 1e-5, (case, err)
        save(out_dir, f"layer_{name}.npz", arrays)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.join("tests", "golden"))
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    layer_fixtures(args.out)
    import keras as keras_package

    print("keras", keras_package.__version__, "tensorflow", tf.__version__)


if __name__ == "__main__":
    main()
