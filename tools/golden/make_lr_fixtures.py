#!/usr/bin/env python3
"""make_lr_fixtures.py - what tf.keras 2.15's learning-rate schedules,
ReduceLROnPlateau and LearningRateScheduler do, as fixtures for
tests/test_lr.c (issue 17, points 4 and 6).

  tests/data/lr/schedules.txt   per schedule: its config as
      keras.optimizers.schedules.serialize gives it (one JSON line), and its
      value at a list of steps, evaluated from an int64 variable as the
      optimizer's iterations is, inside a tf.function as fit() runs it:
      grappler's constant folding turns divisions by constants into
      multiplications by float32 reciprocals, so an eager call differs in
      the last bit (docs/design/lr-schedules.md);
  tests/data/lr/reduce_lr.txt   ReduceLROnPlateau driven through scripted
      fit() runs on a real model compiled with SGD(0.1): after each epoch's
      on_epoch_end, the optimizer's learning rate, the "lr" the callback put
      into the logs, and the callback's wait, best and cooldown_counter;
      what it printed (verbose) and the warnings it logged;
  tests/data/lr/lr_scheduler.txt  LearningRateScheduler with the schedule
      functions named below (test_lr.c has the same in C): per epoch the
      rate after on_epoch_begin, the "lr" of the logs, and the messages;
  tests/data/lr/fit.txt  a real fit() with both callbacks, with and without
      a schedule: the history's lr per epoch, the rate at the end, the
      messages.

Format, one item a line (numbers as Python's repr, read back with strtod):

  case NAME
  config JSON               (schedules)
  value STEP LR             (schedules: float(the float32 value))
  option KEY VALUE          (the callback's arguments)
  train                     a fit() run begins
  epoch N name=value ...    that epoch's logs, given to on_epoch_end
  after lr=.. logs_lr=.. [wait=.. best=.. cooldown=..]
  print TEXT / warning TEXT
  end

Usage (from the repository root):
    $SYSTOLIC_PYTHON tools/golden/make_lr_fixtures.py [--out tests/data/lr]
"""

import argparse
import contextlib
import io
import json
import logging
import math
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

S = tf.keras.optimizers.schedules
NAN = float("nan")

STEPS = [0, 1, 2, 3, 4, 5, 7, 9, 10, 11, 49, 50, 51, 99, 100, 101, 149, 150, 199, 200, 201, 250, 299, 300, 301,
         499, 500, 999, 1000, 1001, 1100, 2500, 5000, 12345, 100000, 16777217]

SCHEDULES = [
    ("exponential", S.ExponentialDecay(0.1, 1000, 0.96)),
    ("exponential_staircase", S.ExponentialDecay(0.1, 100, 0.5, staircase=True)),
    ("exponential_odd", S.ExponentialDecay(1e-3, 7, 0.3)),
    ("piecewise", S.PiecewiseConstantDecay([100, 1000], [1.0, 0.5, 0.1])),
    ("piecewise_4", S.PiecewiseConstantDecay([10, 50, 200], [0.3, 0.2, 0.1, 0.05])),
    ("polynomial", S.PolynomialDecay(0.1, 1000, 0.01, power=0.5)),
    ("polynomial_default", S.PolynomialDecay(0.05, 300)),
    ("polynomial_cycle", S.PolynomialDecay(0.1, 100, 0.001, power=2.0, cycle=True)),
    ("inverse_time", S.InverseTimeDecay(0.1, 10, 0.5)),
    ("inverse_time_staircase", S.InverseTimeDecay(0.1, 10, 0.5, staircase=True)),
    ("cosine", S.CosineDecay(0.1, 1000)),
    ("cosine_alpha", S.CosineDecay(0.1, 500, alpha=0.2)),
    ("cosine_warmup", S.CosineDecay(0.0, 1000, warmup_target=0.1, warmup_steps=100)),
    ("cosine_warmup_alpha", S.CosineDecay(0.01, 200, alpha=0.1, warmup_target=0.5, warmup_steps=50)),
    ("restarts", S.CosineDecayRestarts(0.1, 100)),
    ("restarts_t1", S.CosineDecayRestarts(0.1, 50, t_mul=1.0, m_mul=0.5, alpha=0.1)),
    ("restarts_t3", S.CosineDecayRestarts(0.05, 30, t_mul=3.0, m_mul=0.8)),
]


def schedule_cases():
    out = []
    for name, sch in SCHEDULES:
        out.append(f"case {name}")
        out.append("config " + json.dumps(S.serialize(sch)))
        it = tf.Variable(0, dtype=tf.int64)
        traced = tf.function(lambda: sch(it))
        for step in STEPS:
            it.assign(step)
            value = traced().numpy()
            assert value.dtype == np.float32
            out.append(f"value {step} {float(value)!r}")
        out.append("end")
    return out


class Capture(logging.Handler):
    def __init__(self):
        super().__init__()
        self.messages = []

    def emit(self, record):
        self.messages.append(record.getMessage())


def fmt_logs(logs):
    return " ".join(f"{k}={v!r}" for k, v in logs.items())


def compiled_model():
    tf.keras.backend.clear_session()
    m = tf.keras.Sequential([tf.keras.layers.Dense(2, input_shape=(3,))])
    m.compile(optimizer=tf.keras.optimizers.SGD(0.1), loss="mse")
    return m


def drive(out, name, options, runs, make, begin):
    """Scripted fit() runs of a callback: runs is a list of runs, each a
    list of (epoch, logs)."""
    model = compiled_model()
    logger = logging.getLogger("tensorflow")
    cap = Capture()
    logger.addHandler(cap)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        cb = make()
    cb.set_model(model)
    out.append(f"case {name}")
    for k, v in options.items():
        out.append(f"option {k} {v!r}" if not isinstance(v, str) else f"option {k} {v}")
    for epochs in runs:
        out.append("train")
        with contextlib.redirect_stdout(printed):
            cb.on_train_begin()
        for epoch, logs in epochs:
            out.append(f"epoch {epoch} {fmt_logs(logs)}".rstrip())
            lg = dict(logs)
            with contextlib.redirect_stdout(printed):
                if begin:
                    cb.on_epoch_begin(epoch)
                cb.on_epoch_end(epoch, lg)
            after = f"after lr={float(model.optimizer.lr.numpy())!r} logs_lr={float(lg['lr'])!r}"
            if hasattr(cb, "cooldown_counter"):
                after += f" wait={cb.wait} best={float(cb.best)!r} cooldown={cb.cooldown_counter}"
            out.append(after)
        with contextlib.redirect_stdout(printed):
            cb.on_train_end()
    logger.removeHandler(cap)
    for line in printed.getvalue().splitlines():
        if line:
            out.append(f"print {line}")
    for msg in cap.messages:
        out.append(f"warning {msg}")
    out.append("end")


def seq(values, key="val_loss"):
    return [(i, {"loss": 1.0 + i / 8, key: v} if key != "loss" else {"loss": v}) for i, v in enumerate(values)]


def reduce_lr_cases():
    out = []

    def run(name, options, runs):
        drive(out, name, options, runs, lambda: tf.keras.callbacks.ReduceLROnPlateau(**options), False)

    flat = [1.0, 0.9, 0.95, 0.92, 0.91, 0.93, 0.94, 0.96, 0.97, 0.98, 0.99, 1.0, 1.01, 1.02, 1.03]
    run("defaults", {}, [seq(flat)])
    run("patience2_verbose", {"patience": 2, "factor": 0.5, "verbose": 1}, [seq(flat)])
    run("patience0", {"patience": 0, "factor": 0.2, "verbose": 1}, [seq(flat[:6])])
    slow = [1.0, 0.95, 0.91, 0.905, 0.9, 0.7, 0.69, 0.6, 0.59, 0.58]
    run("min_delta", {"patience": 1, "min_delta": 0.05, "factor": 0.5}, [seq(slow)])
    run("cooldown", {"patience": 1, "cooldown": 2, "factor": 0.5, "verbose": 1}, [seq(flat)])
    run("min_lr", {"patience": 0, "factor": 0.5, "min_lr": 0.02, "verbose": 1}, [seq(flat[:8])])
    up = [0.5, 0.6, 0.55, 0.58, 0.59, 0.7, 0.65, 0.64, 0.63]
    for monitor in ["val_accuracy", "acc", "val_auc", "accuracy_loss"]:
        run(f"auto_{monitor}", {"monitor": monitor, "patience": 1, "factor": 0.5}, [seq(up, monitor)])
    run("mode_max", {"monitor": "loss", "mode": "max", "patience": 1, "factor": 0.5}, [seq(up, "loss")])
    run("mode_min_accuracy", {"monitor": "val_accuracy", "mode": "min", "patience": 1, "factor": 0.5},
        [seq(up, "val_accuracy")])
    run("mode_unknown", {"mode": "lowest", "patience": 1, "factor": 0.5}, [seq(flat[:5])])
    run("missing_monitor", {"patience": 0}, [[(e, {"loss": 1.0 - e / 10}) for e in range(3)]])
    run("nan_values", {"patience": 1, "factor": 0.5, "verbose": 1}, [seq([0.5, NAN, NAN, 0.4, NAN, NAN])])
    run("reused", {"patience": 1, "factor": 0.5, "verbose": 1}, [seq(flat[:5]), seq([0.9, 0.95, 0.97, 0.8])])
    return out


# The schedule functions; test_lr.c defines the same in C under these names.
FUNCTIONS = {
    "exp_after_2": lambda epoch, lr: lr if epoch < 2 else lr * math.exp(-0.1),
    "step_halving": lambda epoch, lr: 0.1 * 0.5 ** (epoch // 2),
    "times_0_7": lambda epoch, lr: lr * 0.7,
}


def lr_scheduler_cases():
    out = []
    for fn in FUNCTIONS:
        for verbose in (0, 1):
            options = {"schedule": fn, "verbose": verbose}
            drive(out, f"{fn}_v{verbose}", options, [[(e, {"loss": 1.0}) for e in range(6)]],
                  lambda fn=fn, verbose=verbose: tf.keras.callbacks.LearningRateScheduler(FUNCTIONS[fn], verbose),
                  True)
    # fit(initial_epoch=3): the function sees epochs from 3
    drive(out, "initial_epoch", {"schedule": "step_halving", "verbose": 1},
          [[(e, {"loss": 1.0}) for e in range(3, 6)]],
          lambda: tf.keras.callbacks.LearningRateScheduler(FUNCTIONS["step_halving"], 1), True)
    return out


def fit_with_schedule_cases():
    """A real fit() with SGD(ExponentialDecay(0.1, 2, 0.5)), 8 rows in batches
    of 4 for 3 epochs, and both callbacks: ReduceLROnPlateau(loss, patience
    0, factor 0.5, min_delta 10: every epoch after the first reduces, whatever
    the losses) then LearningRateScheduler(times_0_7). With a schedule their
    settings last until the next step, so the history's lr is the schedule's
    (as the callbacks set it at epoch end). Then the same with SGD(0.1)."""
    out = []
    x = np.linspace(-1, 1, 24, dtype=np.float32).reshape(8, 3)
    y = np.zeros((8, 2), np.float32)
    for name, lr in [("schedule", S.ExponentialDecay(0.1, 2, 0.5)), ("constant", 0.1)]:
        tf.keras.backend.clear_session()
        m = tf.keras.Sequential([tf.keras.layers.Dense(2, input_shape=(3,))])
        m.compile(optimizer=tf.keras.optimizers.SGD(lr), loss="mse")
        cbs = [tf.keras.callbacks.ReduceLROnPlateau(monitor="loss", patience=0, factor=0.5, min_delta=10, verbose=1),
               tf.keras.callbacks.LearningRateScheduler(FUNCTIONS["times_0_7"], verbose=1)]
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            h = m.fit(x, y, batch_size=4, epochs=3, shuffle=False, verbose=0, callbacks=cbs)
        out.append(f"case {name}")
        for v in h.history["lr"]:
            out.append(f"history_lr {float(v)!r}")
        out.append(f"final_lr {float(m.optimizer.lr.numpy())!r}")
        for line in printed.getvalue().splitlines():
            if line:
                out.append(f"print {line}")
        out.append("end")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default="tests/data/lr")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tf.get_logger().setLevel(logging.WARNING)
    tf.get_logger().propagate = False
    for name, lines in [("schedules.txt", schedule_cases()), ("reduce_lr.txt", reduce_lr_cases()),
                        ("lr_scheduler.txt", lr_scheduler_cases()), ("fit.txt", fit_with_schedule_cases())]:
        with open(os.path.join(args.out, name), "w") as f:
            f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
