#!/usr/bin/env python3
"""make_fit_args_fixtures.py - what tf.keras 2.15's fit() and evaluate() do
with sample_weight, class_weight and validation_split, and what its
ModelCheckpoint decides on a scripted sequence of logs: fixtures for
tests/test_fit_args.c.

tests/golden/fit_args.npz, for a Dense(3, softmax) model on 4 inputs trained
with SGD(0.1) and sparse_categorical_crossentropy, metrics accuracy and
weighted_metrics none (Keras 2.15 does not weight `metrics`), shuffle off:
  x, y, w                 the data (12 samples) and per-sample weights
  kernel0, bias0          the initial weights
  <case>_loss, <case>_acc the logs of each epoch (2 epochs, batch 4)
  <case>_kernel, _bias    the weights after fit
  <case>_val_loss         (validation_split case) each epoch's val_loss
  eval_loss, eval_acc     evaluate(x, y, sample_weight=w, batch_size=5)
  wm_...                  compile(weighted_metrics=["accuracy"]): fit with sample_weight=w
                          (wm_weighted_acc per epoch) and evaluate (wm_eval_weighted_acc)
cases: plain, sw (sample_weight=w), cw (class_weight {0: 1, 1: 3, 2: 0.5}),
split (validation_split=0.333, 8 samples left for training, with sample_weight=w).

tests/data/fit_args/model_checkpoint.txt: per case, the callback's options,
the scripted calls (epoch N logs / batch N logs) and what Keras did:
  save PATH          a save (the formatted file name)
  print TEXT         a line Keras printed (verbose=1)
  warning TEXT       a warning it logged
  error TEXT         the exception's message (the case ends there)

Usage (from the repository root):
    python tools/golden/make_fit_args_fixtures.py
"""

import contextlib
import io
import logging
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

ROOT = os.path.join(os.path.dirname(__file__), "..", "..")


def model_of(kernel, bias, weighted=None):
    m = tf.keras.Sequential([tf.keras.layers.Dense(3, activation="softmax", input_shape=(4,))])
    m.set_weights([kernel, bias])
    m.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy", metrics=["accuracy"],
              weighted_metrics=weighted)
    return m


def fit_fixtures():
    rng = np.random.default_rng(17)
    x = rng.normal(size=(12, 4)).astype(np.float32)
    y = np.array([0, 1, 2, 1, 0, 2, 2, 1, 0, 1, 2, 0], np.int32)
    w = rng.uniform(0.0, 2.0, size=12).astype(np.float32)
    kernel0 = rng.normal(scale=0.5, size=(4, 3)).astype(np.float32)
    bias0 = np.array([0.1, -0.1, 0.0], np.float32)
    out = {"x": x, "y": y, "w": w, "kernel0": kernel0, "bias0": bias0}
    cases = {"plain": {}, "sw": {"sample_weight": w}, "cw": {"class_weight": {0: 1.0, 1: 3.0, 2: 0.5}},
             "split": {"sample_weight": w, "validation_split": 0.333}}
    for name, kw in cases.items():
        m = model_of(kernel0, bias0)
        h = m.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0, **kw)
        out[f"{name}_loss"] = np.array(h.history["loss"], np.float64)
        out[f"{name}_acc"] = np.array(h.history["accuracy"], np.float64)
        if "val_loss" in h.history:
            out[f"{name}_val_loss"] = np.array(h.history["val_loss"], np.float64)
        k, b = m.get_weights()
        out[f"{name}_kernel"], out[f"{name}_bias"] = k, b
    m = model_of(kernel0, bias0)
    loss, acc = m.evaluate(x, y, sample_weight=w, batch_size=5, verbose=0)
    out["eval_loss"], out["eval_acc"] = np.array([loss]), np.array([acc])
    # weighted_metrics: "accuracy" again, logged as weighted_accuracy (the name is taken), and a weighted mse
    # metric on the same output would need one-hot labels, so the confusion-count kind is covered by AUC in C only
    m = model_of(kernel0, bias0, weighted=["accuracy"])
    h = m.fit(x, y, batch_size=4, epochs=2, shuffle=False, verbose=0, sample_weight=w)
    assert list(h.history) == ["loss", "accuracy", "weighted_accuracy"], list(h.history)
    out["wm_loss"] = np.array(h.history["loss"], np.float64)
    out["wm_acc"] = np.array(h.history["accuracy"], np.float64)
    out["wm_weighted_acc"] = np.array(h.history["weighted_accuracy"], np.float64)
    out["wm_kernel"], out["wm_bias"] = m.get_weights()
    r = m.evaluate(x, y, sample_weight=w, batch_size=5, verbose=0, return_dict=True)
    out["wm_eval_weighted_acc"] = np.array([r["weighted_accuracy"]])
    np.savez(os.path.join(ROOT, "tests", "golden", "fit_args.npz"), **out)


class Capture(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def fmt_logs(logs):
    return " ".join(f"{k}={v!r}" for k, v in logs.items())


def run_checkpoint(out, name, options, calls):
    """calls: ("epoch", N, logs) or ("batch", N, logs), in fit()'s order
    (epoch N begins before its batches)."""
    m = tf.keras.Sequential([tf.keras.layers.Dense(2, input_shape=(3,))])
    saved = []
    cb = tf.keras.callbacks.ModelCheckpoint(**options)
    cb.set_model(m)
    cb._save_handler = lambda path: saved.append(path)  # what is saved is the model; the test checks files
    out.append(f"case {name}")
    for k, v in options.items():
        out.append(f"option {k} {v!r}" if not isinstance(v, str) else f"option {k} {v}")
    logger = logging.getLogger("tensorflow")
    cap = Capture()
    logger.addHandler(cap)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        cb.on_train_begin()
        epoch_begun = -1
        for kind, n, logs in calls:
            out.append(f"{kind} {n} {fmt_logs(logs)}".rstrip())
            before, printed_before, warned_before = len(saved), len(printed.getvalue()), len(cap.messages)
            try:
                if kind == "epoch":
                    if epoch_begun != n:
                        cb.on_epoch_begin(n)
                    cb.on_epoch_end(n, dict(logs))
                else:
                    epoch = n >> 16
                    if epoch_begun != epoch:
                        cb.on_epoch_begin(epoch)
                        epoch_begun = epoch
                    cb.on_train_batch_end(n & 0xFFFF, dict(logs))
            except KeyError as e:
                out.append(f"error {e.args[0]}")
                break
            for p in saved[before:]:
                out.append(f"save {p}")
            for line in printed.getvalue()[printed_before:].splitlines():
                if line:
                    out.append(f"print {line}")
            for msg in cap.messages[warned_before:]:
                out.append(f"warning {msg}")
    logger.removeHandler(cap)
    out.append("end")


def ep(n, **logs):
    return ("epoch", n, logs)


def bt(epoch, batch, **logs):
    return ("batch", (epoch << 16) | batch, logs)


def checkpoint_fixtures():
    out = []
    seq = [ep(0, loss=0.9, val_loss=0.8, val_accuracy=0.5), ep(1, loss=0.7, val_loss=0.85, val_accuracy=0.6),
           ep(2, loss=0.6, val_loss=0.6, val_accuracy=0.55), ep(3, loss=0.5, val_loss=0.6, val_accuracy=0.7),
           ep(4, loss=0.45, val_loss=0.59, val_accuracy=0.7)]
    run_checkpoint(out, "every_epoch", {"filepath": "w-{epoch:02d}-{val_loss:.2f}.h5", "verbose": 1}, seq)
    run_checkpoint(out, "best_val_loss", {"filepath": "best.h5", "save_best_only": True, "verbose": 1}, seq)
    run_checkpoint(out, "best_auto_acc", {"filepath": "m{epoch}_{val_accuracy:.3f}.h5", "monitor": "val_accuracy",
                                          "save_best_only": True, "verbose": 1}, seq)
    run_checkpoint(out, "best_max_loss", {"filepath": "m.h5", "monitor": "loss", "mode": "max",
                                          "save_best_only": True, "verbose": 1}, seq)
    run_checkpoint(out, "threshold", {"filepath": "t{epoch:03d}.h5", "save_best_only": True, "verbose": 1,
                                      "initial_value_threshold": 0.7}, seq)
    run_checkpoint(out, "missing_monitor", {"filepath": "x.h5", "monitor": "val_auc", "save_best_only": True}, seq[:2])
    run_checkpoint(out, "key_error", {"filepath": "w-{val_acc:.2f}.h5"}, seq[:1])
    run_checkpoint(out, "formats", {"filepath": "{epoch:>4}_{loss:8.3f}_{val_loss:e}_{loss:.1%}_{epoch:x}.h5"},
                   seq[:2])
    batches = [bt(0, b, loss=1.0 - b / 10) for b in range(5)] + [ep(0, loss=0.6)] + \
              [bt(1, b, loss=0.5 - b / 20) for b in range(5)] + [ep(1, loss=0.3)]
    run_checkpoint(out, "save_freq_2", {"filepath": "b-{epoch}-{batch}-{loss:.3f}.h5", "save_freq": 2, "verbose": 1},
                   batches)
    spe = [bt(0, b, loss=1.0 - b / 10) for b in (2, 5, 8)] + [ep(0, loss=0.6)] + \
          [bt(1, b, loss=0.5 - b / 20) for b in (2, 5, 8)] + [ep(1, loss=0.3)]
    run_checkpoint(out, "save_freq_4_spe3", {"filepath": "s-{epoch}-{batch}.h5", "save_freq": 4}, spe)
    run_checkpoint(out, "save_freq_best", {"filepath": "sb.h5", "save_freq": 3, "monitor": "loss",
                                           "save_best_only": True, "verbose": 1}, batches)
    with open(os.path.join(ROOT, "tests", "data", "fit_args", "model_checkpoint.txt"), "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    fit_fixtures()
    checkpoint_fixtures()
