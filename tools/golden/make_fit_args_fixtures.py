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
import re
import shutil
import tempfile

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


def golden_data():
    """The golden model's data (12 samples of 4 features, 3 classes), sample weights and initial weights."""
    rng = np.random.default_rng(17)
    x = rng.normal(size=(12, 4)).astype(np.float32)
    y = np.array([0, 1, 2, 1, 0, 2, 2, 1, 0, 1, 2, 0], np.int32)
    w = rng.uniform(0.0, 2.0, size=12).astype(np.float32)
    kernel0 = rng.normal(scale=0.5, size=(4, 3)).astype(np.float32)
    bias0 = np.array([0.1, -0.1, 0.0], np.float32)
    return x, y, w, kernel0, bias0


def fit_fixtures():
    x, y, w, kernel0, bias0 = golden_data()
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


# ---- TerminateOnNaN ----------------------------------------------------------------------------------------

TIMING = re.compile(r"^\d+(\.\d+)?(s|ms|us)(/epoch|/step)?$")


def untimed(line):
    """A verbose-2 progress line without its times, which no two runs share."""
    return " - ".join(part for part in line.split(" - ") if not TIMING.match(part))


def printed_lines(text):
    return [untimed(line) for line in text.splitlines() if line]


class Recorder(tf.keras.callbacks.Callback):
    """What fit() called, in order: batch ends, epoch ends with their logs, train end."""

    def __init__(self, out):
        super().__init__()
        self.out = out

    def on_train_batch_end(self, batch, logs=None):
        self.out.append(f"event batch_end {batch} loss={float(logs['loss'])!r}")

    def on_epoch_end(self, epoch, logs=None):
        self.out.append(f"event epoch_end {epoch} {fmt_logs({k: float(v) for k, v in logs.items()})}")

    def on_train_end(self, logs=None):
        self.out.append("event train_end")


def terminate_on_nan_fixtures():
    """tests/data/fit_args/terminate_on_nan.txt: Keras's TerminateOnNaN on scripted batch logs (what it prints,
    whether it stops), then real fits of the golden model on x with a NaN in sample 6 (batch 1 of 3): the lines
    printed (verbose 0 and 2, the times left out), every callback call, the history, the weights."""
    out = []
    m = tf.keras.Sequential([tf.keras.layers.Dense(2, input_shape=(3,))])
    cb = tf.keras.callbacks.TerminateOnNaN()
    cb.set_model(m)
    out.append("case scripted")
    for n, logs in enumerate([{"loss": 0.5}, {"loss": float("nan")}, {"loss": float("inf")}, {"loss": float("-inf")},
                              {}, {"accuracy": float("nan")}, {"loss": 1e308}, {"loss": 0.0, "val_loss": float("nan")}]):
        m.stop_training = False
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            cb.on_batch_end(n, dict(logs))
        out.append(f"batch {n} {fmt_logs(logs)}".rstrip())
        out.extend(f"print {line}" for line in printed_lines(printed.getvalue()))
        out.append(f"stop {int(m.stop_training)}")
    out.append("end")
    x, y, _, kernel0, bias0 = golden_data()
    x[6, 2] = np.nan
    for verbose in (0, 2):
        for spe in (1, 2):
            m = tf.keras.Sequential([tf.keras.layers.Dense(3, activation="softmax", input_shape=(4,))])
            m.set_weights([kernel0, bias0])
            m.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy",
                      metrics=["accuracy"], steps_per_execution=spe)
            out.append(f"case fit verbose={verbose} steps_per_execution={spe}")
            events = []
            printed = io.StringIO()
            with contextlib.redirect_stdout(printed):
                h = m.fit(x, y, batch_size=4, epochs=3, shuffle=False, verbose=verbose,
                          validation_data=(x[:4], y[:4]),
                          callbacks=[tf.keras.callbacks.TerminateOnNaN(), Recorder(events)])
            out.extend(f"print {line}" for line in printed_lines(printed.getvalue()))
            out.extend(events)
            for i, epoch in enumerate(h.epoch):
                out.append(f"history {epoch} {fmt_logs({k: float(v[i]) for k, v in h.history.items()})}")
            out.append(f"weights_nan {int(np.isnan(m.get_weights()[0]).all())}")
            out.append("end")
    with open(os.path.join(ROOT, "tests", "data", "fit_args", "terminate_on_nan.txt"), "w") as f:
        f.write("\n".join(out) + "\n")


# ---- BackupAndRestore ---------------------------------------------------------------------------------------


class Interrupted(Exception):
    pass


class Interrupt(tf.keras.callbacks.Callback):
    """Raises at ("batch", epoch, batch)'s on_train_batch_end or ("epoch", epoch)'s on_epoch_end."""

    def __init__(self, at):
        super().__init__()
        self.at, self.epoch = at, -1

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.at[0] == "batch" and (self.epoch, batch) == self.at[1:]:
            raise Interrupted()

    def on_epoch_end(self, epoch, logs=None):
        if self.at[0] == "epoch" and epoch == self.at[1]:
            raise Interrupted()


def backup_fixtures():
    """tests/data/fit_args/backup_and_restore.txt: Keras's BackupAndRestore in a fit of the golden model (Adam(0.01),
    4 epochs of 3 batches, shuffle off) interrupted by an exception from a callback, then resumed by a new process's
    fit (a new model, its initial weights, new callbacks, the same backup_dir), with a learning-rate callback: the
    iterations the interrupted run reached, the resumed run's epochs, logs, printed lines (verbose 2, times left
    out), iterations, learning rate and weights. Keras restarts its data iterator when it resumes in the middle of
    an epoch (an integer save_freq), so there it trains on the epoch's first batches again: `same_data 0` marks
    those cases, whose losses and weights systolic, which goes on with the batches where the backup was made, does
    not share."""
    x, y, _, kernel0, bias0 = golden_data()

    def model():
        m = tf.keras.Sequential([tf.keras.layers.Dense(3, activation="softmax", input_shape=(4,))])
        m.set_weights([kernel0, bias0])
        m.compile(optimizer=tf.keras.optimizers.Adam(0.01), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
        return m

    def lr_callback(kind):
        if kind == "scheduler":  # lr * 0.5 at each epoch's beginning: a resumed run needs the rate it had
            return tf.keras.callbacks.LearningRateScheduler(lambda epoch, lr: lr * 0.5)
        # reduces at every epoch but the first after train begin (min_delta 10: no later epoch improves)
        return tf.keras.callbacks.ReduceLROnPlateau(monitor="loss", factor=0.5, patience=0, min_delta=10.0)

    out = []
    cases = [  # name, save_freq, lr callback, interruption (None: none), interrupter before the backup, same data
        ("whole_scheduler", "epoch", "scheduler", None, False, 1),
        ("whole_plateau", "epoch", "plateau", None, False, 1),
        ("epoch_mid_epoch", "epoch", "scheduler", ("batch", 2, 1), False, 1),
        ("epoch_plateau", "epoch", "plateau", ("batch", 2, 1), False, 1),
        ("epoch_end_after_backup", "epoch", "scheduler", ("epoch", 1), False, 1),
        ("epoch_end_before_backup", "epoch", "scheduler", ("epoch", 1), True, 1),
        ("freq2_last_batch", 2, "scheduler", ("batch", 2, 0), False, 1),
        ("freq2_mid_epoch", 2, "scheduler", ("batch", 2, 1), False, 0),
        ("freq2_epoch_end", 2, "scheduler", ("epoch", 2), False, 0),
        ("freq2_plateau_last_batch", 2, "plateau", ("batch", 2, 0), False, 1),
    ]
    for name, save_freq, kind, at, interrupt_first, same_data in cases:
        backup_dir = tempfile.mkdtemp()
        out.append(f"case {name}")
        out.append(f"option save_freq {save_freq}")
        out.append(f"option lr_callback {kind}")
        if at:
            out.append("option interrupt " + " ".join(str(v) for v in at))
            out.append(f"option interrupt_first {int(interrupt_first)}")
            m = model()
            cbs = [tf.keras.callbacks.BackupAndRestore(backup_dir, save_freq=save_freq), Interrupt(at),
                   lr_callback(kind)]
            if interrupt_first:
                cbs[0], cbs[1] = cbs[1], cbs[0]
            try:
                m.fit(x, y, batch_size=4, epochs=4, shuffle=False, verbose=0, callbacks=cbs)
                raise AssertionError(f"{name}: not interrupted")
            except Interrupted:
                pass
            out.append(f"interrupted_iterations {int(m.optimizer.iterations.numpy())}")
        out.append(f"same_data {same_data}")
        m = model()
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            h = m.fit(x, y, batch_size=4, epochs=4, shuffle=False, verbose=2,
                      callbacks=[tf.keras.callbacks.BackupAndRestore(backup_dir, save_freq=save_freq),
                                 lr_callback(kind)])
        out.append("resumed_epochs " + " ".join(str(e) for e in h.epoch))
        for i, epoch in enumerate(h.epoch):
            out.append(f"history {epoch} {fmt_logs({k: float(v[i]) for k, v in h.history.items()})}")
        out.extend(f"print {line}" for line in printed_lines(printed.getvalue()))
        out.append(f"iterations {int(m.optimizer.iterations.numpy())}")
        out.append(f"learning_rate {float(m.optimizer.learning_rate.numpy())!r}")
        k, b = m.get_weights()
        out.append("kernel " + " ".join(repr(float(v)) for v in k.ravel()))
        out.append("bias " + " ".join(repr(float(v)) for v in b.ravel()))
        out.append(f"backup_left {int(os.path.exists(backup_dir) and bool(os.listdir(backup_dir)))}")
        out.append("end")
        shutil.rmtree(backup_dir, ignore_errors=True)
    # delete_checkpoint=False: the backup of the finished run stays, and a second fit resumes past its last epoch
    backup_dir = tempfile.mkdtemp()
    m = model()
    m.fit(x, y, batch_size=4, epochs=4, shuffle=False, verbose=0,
          callbacks=[tf.keras.callbacks.BackupAndRestore(backup_dir, delete_checkpoint=False)])
    kept = os.path.exists(backup_dir) and bool(os.listdir(backup_dir))
    m2 = model()
    h = m2.fit(x, y, batch_size=4, epochs=4, shuffle=False, verbose=0,
               callbacks=[tf.keras.callbacks.BackupAndRestore(backup_dir, delete_checkpoint=False)])
    assert all((a == b).all() for a, b in zip(m.get_weights(), m2.get_weights()))
    out.append("case keep")
    out.append(f"backup_left {int(kept)}")
    out.append("resumed_epochs " + " ".join(str(e) for e in h.epoch))
    out.append(f"iterations {int(m2.optimizer.iterations.numpy())}")
    k, b = m2.get_weights()
    out.append("kernel " + " ".join(repr(float(v)) for v in k.ravel()))
    out.append("bias " + " ".join(repr(float(v)) for v in b.ravel()))
    out.append("end")
    shutil.rmtree(backup_dir, ignore_errors=True)
    with open(os.path.join(ROOT, "tests", "data", "fit_args", "backup_and_restore.txt"), "w") as f:
        f.write("\n".join(out) + "\n")


# ---- temporal sample weights --------------------------------------------------------------------------------


def temporal_fixtures():
    """tests/golden/fit_args_temporal.npz: a sequence output, Dense(4, softmax) over (5 steps, 3 features), SGD(0.1),
    sparse_categorical_crossentropy, metrics and weighted_metrics accuracy, fitted 2 epochs of batch 2 (shuffle off)
    with a weight per step, sw (6, 5):
      x, y, sw, kernel0, bias0     the data and the initial weights
      t_loss, t_acc, t_wacc        each epoch's loss, accuracy, weighted_accuracy
      t_kernel, t_bias             the weights after fit
      t_eval                       evaluate(x, y, sample_weight=sw, batch_size=4): loss, accuracy, weighted_accuracy
      s_loss, s_kernel, s_bias     the same fit with a weight per sample, w (6,), for the same sequence output
      w                            those weights
      mask_x, m_loss, m_kernel, m_bias, m_eval
                                   Masking(0.0) before the Dense: padded steps of mask_x are all zeros; the loss
                                   is sum(l * sw * mask) / sum(mask) (compile_utils.apply_mask, then the loss's
                                   apply_valid_mask): fit's losses and weights, evaluate's loss (batch_size=3)
    """
    rng = np.random.default_rng(5)
    x = rng.normal(size=(6, 5, 3)).astype(np.float32)
    y = rng.integers(0, 4, size=(6, 5)).astype(np.int32)
    sw = rng.uniform(0.0, 2.0, size=(6, 5)).astype(np.float32)
    w = rng.uniform(0.0, 2.0, size=6).astype(np.float32)
    kernel0 = rng.normal(scale=0.5, size=(3, 4)).astype(np.float32)
    bias0 = np.array([0.1, -0.1, 0.0, 0.05], np.float32)
    mask_x = x.copy()
    mask_x[1, 3:] = 0
    mask_x[4, 1:] = 0
    mask_x[5, 2] = 0
    out = {"x": x, "y": y, "sw": sw, "w": w, "kernel0": kernel0, "bias0": bias0, "mask_x": mask_x}

    def model(masked=False):
        layers = [tf.keras.layers.Masking(0.0, input_shape=(5, 3))] if masked else []
        dense = tf.keras.layers.Dense(4, activation="softmax", **({} if masked else {"input_shape": (5, 3)}))
        m = tf.keras.Sequential(layers + [dense])
        dense.set_weights([kernel0, bias0])
        m.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"], weighted_metrics=["accuracy"])
        return m

    m = model()
    h = m.fit(x, y, sample_weight=sw, batch_size=2, epochs=2, shuffle=False, verbose=0)
    out["t_loss"] = np.array(h.history["loss"], np.float64)
    out["t_acc"] = np.array(h.history["accuracy"], np.float64)
    out["t_wacc"] = np.array(h.history["weighted_accuracy"], np.float64)
    out["t_kernel"], out["t_bias"] = m.get_weights()
    r = m.evaluate(x, y, sample_weight=sw, batch_size=4, verbose=0, return_dict=True)
    out["t_eval"] = np.array([r["loss"], r["accuracy"], r["weighted_accuracy"]], np.float64)
    m = model()
    h = m.fit(x, y, sample_weight=w, batch_size=2, epochs=2, shuffle=False, verbose=0)
    out["s_loss"] = np.array(h.history["loss"], np.float64)
    out["s_kernel"], out["s_bias"] = m.get_weights()
    m = model(masked=True)
    h = m.fit(mask_x, y, sample_weight=sw, batch_size=2, epochs=2, shuffle=False, verbose=0)
    out["m_loss"] = np.array(h.history["loss"], np.float64)
    out["m_kernel"], out["m_bias"] = m.get_weights()
    out["m_eval"] = np.array([m.evaluate(mask_x, y, sample_weight=sw, batch_size=bs, verbose=0,
                                         return_dict=True)["loss"] for bs in (3, 4)], np.float64)
    np.savez(os.path.join(ROOT, "tests", "golden", "fit_args_temporal.npz"), **out)


if __name__ == "__main__":
    fit_fixtures()
    checkpoint_fixtures()
    terminate_on_nan_fixtures()
    backup_fixtures()
    temporal_fixtures()
