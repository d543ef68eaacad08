#!/usr/bin/env python3
"""make_callback_fixtures.py - what tf.keras 2.15's CSVLogger and
EarlyStopping do, as fixtures for tests/test_callbacks.c.

Each case drives Keras's real callback, attached to a tiny real Keras model
(Dense(2) on 3 inputs), through scripted fit() runs: on_train_begin, then for
each scripted epoch the model's weights are set to that epoch's marker
(every weight = epoch + 1 + index / 1000), on_epoch_end(epoch, logs) is
called, and the run ends early when the callback sets model.stop_training,
as fit() does; then on_train_end. What Keras produced is written down:

  tests/data/callbacks/early_stopping.txt   per run: the epochs that ran,
      stopped_epoch, best, best_epoch, wait, the epoch whose weights the
      model holds at the end (so restore_best_weights is observable), the
      verbose messages Keras printed and the warnings it logged;
  tests/data/callbacks/csv_logger.txt       per case: the separator, append
      mode, the file's content before, the runs' logs, and the file it left,
      as <case>.csv beside it (the exact bytes csv.DictWriter wrote; none
      when Keras left no file);
  tests/data/callbacks/float_repr.txt       doubles and Python's repr of them
      (what a CSV cell holds), including every power of two, where the
      shortest round-trip form is hardest to find.

The text format (one item per line, values as Python's repr, so they read
back exactly with strtod) is read by tests/test_callbacks.c:

  case NAME
  option KEY VALUE          (EarlyStopping's arguments / CSVLogger's)
  train                     a fit() run begins
  epoch N name=value ...    the logs of epoch N, in the order fit() gives
  ran N ...                 the epochs that ran (EarlyStopping)
  result KEY VALUE          stopped_epoch, best, best_epoch, wait, weights_epoch
  print TEXT                a line Keras printed (verbose)
  warning TEXT              a warning Keras logged
  end

Usage (from the repository root):
    .gl/bin/python tools/golden/make_callback_fixtures.py [--out tests/data/callbacks]
"""

import argparse
import contextlib
import io
import logging
import os
import random
import struct

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

INF, NAN = float("inf"), float("nan")


def marker_weights(model, epoch):
    return [np.full(w.shape, epoch + 1.0, np.float32) + np.arange(w.size, dtype=np.float32).reshape(w.shape) / 1000
            for w in model.get_weights()]


def weights_epoch(model):
    """The epoch whose marker the model's weights hold (-1: none)."""
    first = float(model.get_weights()[0].flat[0])
    e = int(round(first - 1.0))
    want = marker_weights(model, e)
    ok = all(np.array_equal(a, b) for a, b in zip(model.get_weights(), want))
    return e if ok else -1


class Capture(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def fmt_logs(logs):
    return " ".join(f"{k}={v!r}" for k, v in logs.items())


def run_early_stopping(out, name, options, runs):
    """runs: a list of fit() runs, each a list of (epoch, logs)."""
    model = tf.keras.Sequential([tf.keras.layers.Dense(2, input_shape=(3,))])
    cb = tf.keras.callbacks.EarlyStopping(**options)
    cb.set_model(model)
    out.append(f"case {name}")
    for k, v in options.items():
        out.append(f"option {k} {v!r}" if not isinstance(v, str) else f"option {k} {v}")
    logger = logging.getLogger("tensorflow")
    for epochs in runs:
        out.append("train")
        for epoch, logs in epochs:
            out.append(f"epoch {epoch} {fmt_logs(logs)}".rstrip())
        cap = Capture()
        logger.addHandler(cap)
        printed = io.StringIO()
        ran = []
        model.stop_training = False
        with contextlib.redirect_stdout(printed):
            cb.on_train_begin()
            for epoch, logs in epochs:
                model.set_weights(marker_weights(model, epoch))
                cb.on_epoch_end(epoch, dict(logs))
                ran.append(epoch)
                if model.stop_training:
                    break
            cb.on_train_end()
        logger.removeHandler(cap)
        out.append("ran " + " ".join(str(e) for e in ran))
        out.append(f"result stopped_epoch {cb.stopped_epoch}")
        out.append(f"result best {float(cb.best)!r}")
        out.append(f"result best_epoch {cb.best_epoch}")
        out.append(f"result wait {cb.wait}")
        out.append(f"result weights_epoch {weights_epoch(model)}")
        for line in printed.getvalue().splitlines():
            out.append(f"print {line}")
        for msg in cap.messages:
            out.append(f"warning {msg}")
    out.append("end")


def seq(values, key="val_loss", start=0):
    """Epochs whose logs hold loss and `key` (the monitored value)."""
    return [(start + i, {"loss": 1.0 + i / 8, key: v} if key != "loss" else {"loss": v}) for i, v in enumerate(values)]


def early_stopping_cases():
    out = []
    down_up = [1.0, 0.8, 0.9, 0.85, 0.7, 0.75, 0.76, 0.77, 0.78, 0.79]
    run_early_stopping(out, "patience0", {}, [seq(down_up)])
    run_early_stopping(out, "patience1", {"patience": 1}, [seq(down_up)])
    run_early_stopping(out, "patience3", {"patience": 3}, [seq(down_up)])
    run_early_stopping(out, "patience3_restore_verbose", {"patience": 3, "restore_best_weights": True, "verbose": 1},
                       [seq(down_up)])
    run_early_stopping(out, "restore_silent", {"patience": 2, "restore_best_weights": True}, [seq(down_up)])
    # Improvements smaller than min_delta do not count; its sign is ignored.
    slow = [1.0, 0.95, 0.91, 0.905, 0.9, 0.7, 0.69, 0.6, 0.59, 0.58]
    run_early_stopping(out, "min_delta", {"patience": 1, "min_delta": 0.05}, [seq(slow)])
    run_early_stopping(out, "min_delta_negative", {"patience": 1, "min_delta": -0.05}, [seq(slow)])
    run_early_stopping(out, "min_delta_restore", {"patience": 2, "min_delta": 0.05, "restore_best_weights": True,
                                                  "verbose": 1}, [seq(slow)])
    up_down = [0.5, 0.6, 0.55, 0.7, 0.65, 0.64, 0.63, 0.8, 0.5, 0.4]
    for monitor in ["val_accuracy", "accuracy", "val_sparse_categorical_accuracy", "acc", "val_acc", "auc",
                    "val_auc", "binary_accuracy"]:
        run_early_stopping(out, f"auto_max_{monitor}", {"monitor": monitor, "patience": 1}, [seq(up_down, monitor)])
    run_early_stopping(out, "auto_min_accuracy_loss", {"monitor": "accuracy_loss", "patience": 1},
                       [seq(up_down, "accuracy_loss")])
    run_early_stopping(out, "mode_max_loss", {"monitor": "loss", "mode": "max", "patience": 1}, [seq(up_down, "loss")])
    run_early_stopping(out, "mode_min_accuracy", {"monitor": "val_accuracy", "mode": "min", "patience": 1},
                       [seq(up_down, "val_accuracy")])
    run_early_stopping(out, "mode_max_min_delta", {"monitor": "val_accuracy", "mode": "max", "patience": 1,
                                                   "min_delta": 0.06, "verbose": 1, "restore_best_weights": True},
                       [seq(up_down, "val_accuracy")])
    # baseline: no epoch beats it, so training stops after patience epochs and
    # the best of those is restored; one that beats it late.
    run_early_stopping(out, "baseline_never", {"patience": 2, "baseline": 0.5, "restore_best_weights": True,
                                               "verbose": 1}, [seq([0.9, 0.8, 0.85, 0.7, 0.6, 0.4])])
    run_early_stopping(out, "baseline_beaten", {"patience": 2, "baseline": 0.75},
                       [seq([0.9, 0.8, 0.7, 0.72, 0.71, 0.74, 0.73])])
    run_early_stopping(out, "baseline_max", {"monitor": "val_accuracy", "patience": 1, "baseline": 0.6},
                       [seq([0.5, 0.55, 0.65, 0.7, 0.68, 0.69], "val_accuracy")])
    run_early_stopping(out, "start_from_epoch", {"patience": 1, "start_from_epoch": 3, "restore_best_weights": True,
                                                 "verbose": 1}, [seq([0.1, 0.9, 0.95, 0.8, 0.85, 0.9, 0.7])])
    # The monitored value missing: a warning each epoch, no stopping; then
    # present only every other epoch (validation_freq 2).
    run_early_stopping(out, "missing_monitor", {"patience": 0},
                       [[(e, {"loss": 1.0 - e / 10, "accuracy": 0.5 + e / 20}) for e in range(4)]])
    run_early_stopping(out, "missing_some_epochs", {"patience": 1, "verbose": 1},
                       [[(e, {"loss": 1.0, "val_loss": v} if e % 2 else {"loss": 1.0})
                         for e, v in enumerate([None, 0.5, None, 0.6, None, 0.7, None, 0.4])]])
    run_early_stopping(out, "missing_no_logs", {"monitor": "loss"}, [[(0, {}), (1, {})]])
    # NaN never improves; a NaN first epoch with restore_best_weights
    # restores that first epoch ("best epoch: 1").
    run_early_stopping(out, "nan_values", {"patience": 1}, [seq([0.5, NAN, 0.4, NAN, NAN, 0.1])])
    run_early_stopping(out, "nan_first_restore", {"patience": 1, "restore_best_weights": True, "verbose": 1},
                       [seq([NAN, NAN, NAN])])
    run_early_stopping(out, "patience0_nan_epoch0", {"patience": 0}, [seq([NAN, 0.5, 0.6])])
    run_early_stopping(out, "inf_values", {"patience": 1}, [seq([INF, INF, 1.0, INF, INF])])
    # Running out of epochs without stopping: Keras 2.15 does not restore.
    run_early_stopping(out, "restore_no_stop", {"patience": 5, "restore_best_weights": True, "verbose": 1},
                       [seq([0.5, 0.3, 0.4, 0.45])])
    # fit(initial_epoch=3): epochs numbered from 3.
    run_early_stopping(out, "initial_epoch", {"patience": 1, "restore_best_weights": True, "verbose": 1},
                       [seq([0.5, 0.4, 0.6, 0.7, 0.3], start=3)])
    run_early_stopping(out, "start_from_epoch_initial", {"patience": 0, "start_from_epoch": 2},
                       [seq([0.5, 0.6, 0.7, 0.8], start=1)])
    # One callback, two fit() runs: on_train_begin starts it afresh.
    run_early_stopping(out, "reused", {"patience": 1, "restore_best_weights": True, "verbose": 1},
                       [seq([0.5, 0.4, 0.6, 0.7, 0.3]), seq([0.9, 0.8, 0.85, 0.86])])
    run_early_stopping(out, "monitor_loss_train_only", {"monitor": "loss", "patience": 2, "verbose": 1},
                       [seq([2.0, 1.5, 1.2, 1.3, 1.25, 1.21, 1.0], "loss")])
    return out


def run_csv(out, outdir, name, separator, append, before, runs):
    """runs: fit() runs, each a list of (epoch, logs). before: the file's
    content (bytes) before the first run, None: no file."""
    path = os.path.join(outdir, f"{name}.csv")
    if os.path.exists(path):
        os.remove(path)
    if before is not None:
        with open(path, "wb") as f:
            f.write(before)
    cb = tf.keras.callbacks.CSVLogger(path, separator=separator, append=append)
    out.append(f"case {name}")
    out.append(f"option separator {ord(separator)}")
    out.append(f"option append {int(append)}")
    out.append("option before none" if before is None else f"option before {before.hex() or '-'}")
    for epochs in runs:
        out.append("train")
        cb.on_train_begin()
        for epoch, lg in epochs:
            out.append(f"epoch {epoch} {fmt_logs(lg)}".rstrip())
            cb.on_epoch_end(epoch, dict(lg))
        cb.on_train_end()
    out.append("end")


def csv_cases(outdir):
    out = []
    odd = [0.1 + 0.2, 1e-05, 1e16, 123456789012345680.0, 5e-324, -0.0, 2.5, 1.0, 0.0001, 1234567890123456.8]
    full = [(e, {"loss": odd[e], "accuracy": odd[-1 - e], "val_loss": 0.5 / (e + 1), "val_accuracy": 1 / 3})
            for e in range(5)]
    run_csv(out, outdir, "basic", ",", False, None, [full])
    specials = [(0, {"loss": NAN, "accuracy": INF}), (1, {"loss": -INF, "accuracy": 0.25})]
    run_csv(out, outdir, "no_validation", ",", False, None, [specials])
    # validation_freq 2: the first epoch has no val_ keys, so Keras adds them.
    freq2 = [(e, {"loss": 1 / (e + 1), "sparse_categorical_accuracy": e / 7} |
              ({"val_loss": 2 / (e + 1), "val_sparse_categorical_accuracy": e / 9} if e % 2 else {}))
             for e in range(4)]
    run_csv(out, outdir, "validation_freq2", ",", False, None, [freq2])
    # val_ keys in the first epoch, missing later (NA); a key new after the
    # first epoch is not a column.
    later = [(0, {"loss": 0.5, "val_loss": 0.6}), (1, {"loss": 0.4}), (2, {"loss": 0.3, "val_loss": 0.2, "lr": 0.01})]
    run_csv(out, outdir, "keys_fixed_at_first_epoch", ",", False, None, [later])
    small = [(e, {"loss": 1.5 - e / 4, "accuracy": e / 4}) for e in range(2)]
    run_csv(out, outdir, "append_new_file", ",", True, None, [small])
    run_csv(out, outdir, "append_existing", ",", True, b"epoch,accuracy,loss,val_accuracy,val_loss\r\n0,0.5,1.0,NA,NA\r\n",
            [[(1, {"loss": 0.5, "accuracy": 0.75})]])
    run_csv(out, outdir, "append_empty_file", ",", True, b"", [small])
    run_csv(out, outdir, "append_blank_first_line", ",", True, b"\n", [small])
    run_csv(out, outdir, "overwrite_existing", ",", False, b"old content\nmore\n", [small])
    for sep, tag in [(";", "semicolon"), ("\t", "tab"), (" ", "space"), (".", "dot"), ("-", "dash"), ("_", "underscore"),
                     ("e", "letter_e"), ("|", "bar")]:
        run_csv(out, outdir, f"separator_{tag}", sep, False, None, [full[:3]])
    run_csv(out, outdir, "quote_in_name", ",", False, None, [[(0, {'we"ird': 0.5, "loss": 0.25})]])
    # GFile opens its file at the first write: a run without epochs leaves
    # an existing file as it was and creates none.
    run_csv(out, outdir, "no_epochs", ",", False, b"old\n", [[]])
    run_csv(out, outdir, "no_epochs_no_file", ",", False, None, [[]])
    run_csv(out, outdir, "no_epochs_no_file_append", ",", True, None, [[]])
    run_csv(out, outdir, "initial_epoch", ",", False, None, [[(3, {"loss": 0.5}), (4, {"loss": 0.25})]])
    # One callback, two fit() runs: the columns stay those of the first run;
    # without append the file starts over (header again), with it rows follow.
    run_csv(out, outdir, "reused_overwrite", ",", False, None, [small, [(2, {"loss": 0.125, "val_loss": 0.5})]])
    run_csv(out, outdir, "reused_append", ",", True, None, [small, [(2, {"loss": 0.125, "accuracy": 0.875})]])
    return out


def float_reprs():
    rng = random.Random(20240607)
    values = [0.0, -0.0, 1.0, -1.0, 0.1, 0.30000000000000004, 1e-05, 0.0001, 1e16, 1e15, 9999999999999998.0,
              1e22, 1e23, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 123456.789, 1 / 3, 2 / 3,
              0.5, 100.0, 1234567890123456.8, 12345678901234567.0]
    values += [2.0 ** k for k in range(-1074, 1024)]
    values += [-(2.0 ** k) * 3 for k in range(-1000, 1000, 37)]
    for _ in range(1200):
        values.append(struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64) & ~(0x7ff << 52) |
                                                      (rng.randrange(0, 0x7ff) << 52)))[0])
    for _ in range(500):
        values.append(float(np.float32(rng.uniform(-10, 10))))
    for _ in range(500):
        values.append(rng.uniform(0, 1) * 10 ** rng.randint(-30, 30))
    return [f"{struct.pack('>d', v).hex()} {v!r}" for v in values]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/data/callbacks")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tf.get_logger().setLevel(logging.WARNING)
    tf.get_logger().propagate = False
    with open(os.path.join(args.out, "early_stopping.txt"), "w") as f:
        f.write("\n".join(early_stopping_cases()) + "\n")
    with open(os.path.join(args.out, "csv_logger.txt"), "w") as f:
        f.write("\n".join(csv_cases(args.out)) + "\n")
    with open(os.path.join(args.out, "float_repr.txt"), "w") as f:
        f.write("\n".join(float_reprs()) + "\n")


if __name__ == "__main__":
    main()
