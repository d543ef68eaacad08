#!/usr/bin/env python3
"""tensorboard_reader.py SYSTOLIC DIR - TensorBoard's own reader reads what
`systolic train --logdir` writes (tests/tensorboard_reader.sh runs it).

Trains the Fashion-MNIST tutorial model for 2 epochs of 3 steps with
validation after each and --update-freq 1, writing DIR/logs; then reads
DIR/logs/train and DIR/logs/validation with the EventAccumulator that the
TensorBoard server itself uses (plugin_event_accumulator) and checks that
every scalar is there, with the right step and value, and nothing else:

  train:      epoch_loss, epoch_sparse_categorical_accuracy and
              epoch_learning_rate at steps 0 and 1; batch_loss and
              batch_sparse_categorical_accuracy at steps 1..6
  validation: epoch_loss, epoch_sparse_categorical_accuracy at steps 0, 1;
              evaluation_loss_vs_iterations and
              evaluation_sparse_categorical_accuracy_vs_iterations at 3, 6

The expected values come from the command's own --verbose 2 lines (epoch
logs, to 4 decimals), and the batch values from a second run of the same
seed with one step per epoch, whose epoch lines are each step's loss and
accuracy: training is deterministic, so step k is the same step in both
runs, and Keras's batch logs are the running means of the epoch's steps.
A third run with --lr-schedule checks that epoch_learning_rate is the
schedule at the optimizer's iterations, as Keras writes it (issue 17).
Exits 1 naming every difference."""
import os
import re
import subprocess
import sys

from tensorboard import version
from tensorboard.backend.event_processing import plugin_event_accumulator as pea
from tensorboard.util import tensor_util

COMMON = ["train", "fashion_mnist_cnn", "--batch-size", "100", "--validation-steps", "2", "--validation-freq", "1",
          "--learning-rate", "0.002", "--seed", "3", "--verbose", "2"]
METRIC = "sparse_categorical_accuracy"
LINE = re.compile(r"^\d+/\d+ - .*?- loss: ([0-9.]+) - %s: ([0-9.]+) - val_loss: ([0-9.]+) - val_%s: ([0-9.]+) -"
                  % (METRIC, METRIC), re.M)


def epoch_lines(systolic, extra):
    out = subprocess.run([systolic] + COMMON + extra, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if out.returncode != 0:
        sys.exit("systolic %s failed (%d):\n%s" % (" ".join(COMMON + extra), out.returncode, out.stdout))
    return [tuple(float(v) for v in m) for m in LINE.findall(out.stdout)]


def read_run(path):
    """The scalars of one run directory: tag -> step -> (value, plugin name); and the accumulator."""
    acc = pea.EventAccumulator(path, size_guidance={pea.TENSORS: 0})
    acc.Reload()
    got = {}
    for tag in acc.Tags()[pea.TENSORS]:
        plugin = acc.SummaryMetadata(tag).plugin_data.plugin_name
        got[tag] = {e.step: (float(tensor_util.make_ndarray(e.tensor_proto)), plugin) for e in acc.Tensors(tag)}
    return acc, got


def compare(run, expected, got, bad):
    """Appends to bad every difference between got (read_run's) and expected (tag -> step ->
    (value, tolerance), a value of None meaning any positive number): missing or extra tags and
    steps, plugins other than scalars, values off by more than tolerance + 1e-6 relative.
    Returns how many scalars it compared."""
    count = 0
    for tag in sorted(set(got) | set(expected)):
        want, have = expected.get(tag, {}), got.get(tag, {})
        if not want:
            bad.append("%s: unexpected tag %s" % (run, tag))
            continue
        if sorted(have) != sorted(want):
            bad.append("%s/%s: steps %s, expected %s" % (run, tag, sorted(have), sorted(want)))
        for step, (value, tol) in want.items():
            if step not in have:
                continue
            count += 1
            v, plugin = have[step]
            if plugin != "scalars":
                bad.append("%s/%s: plugin '%s', expected 'scalars'" % (run, tag, plugin))
            if value is None:
                if not v > 0:
                    bad.append("%s/%s at step %d: %g, expected a positive rate" % (run, tag, step, v))
            elif abs(v - value) > tol + 1e-6 * abs(value):
                bad.append("%s/%s at step %d: %.7g, expected %.7g" % (run, tag, step, v, value))
    return count


def main(systolic, directory):
    logdir = os.path.join(directory, "logs")
    epochs = epoch_lines(systolic, ["--epochs", "2", "--steps-per-epoch", "3", "--logdir", logdir,
                                    "--update-freq", "1"])
    steps = epoch_lines(systolic, ["--epochs", "6", "--steps-per-epoch", "1"])
    if len(epochs) != 2 or len(steps) != 6:
        sys.exit("expected 2 and 6 epoch lines, found %d and %d" % (len(epochs), len(steps)))

    expected = {"train": {}, "validation": {}}  # run -> tag -> step -> (value, tolerance)
    printed = 6e-5  # 4 decimals, and float32's rounding
    for e, (loss, acc, val_loss, val_acc) in enumerate(epochs):
        expected["train"].setdefault("epoch_loss", {})[e] = (loss, printed)
        expected["train"].setdefault("epoch_" + METRIC, {})[e] = (acc, printed)
        expected["train"].setdefault("epoch_learning_rate", {})[e] = (0.002, 1e-9)
        expected["validation"].setdefault("epoch_loss", {})[e] = (val_loss, printed)
        expected["validation"].setdefault("epoch_" + METRIC, {})[e] = (val_acc, printed)
        expected["validation"].setdefault("evaluation_loss_vs_iterations", {})[3 * (e + 1)] = (val_loss, printed)
        expected["validation"].setdefault("evaluation_%s_vs_iterations" % METRIC, {})[3 * (e + 1)] = (val_acc, printed)
    for k in range(1, 7):  # the running means of the epoch's steps so far
        first = (k - 1) // 3 * 3
        done = steps[first:k]
        expected["train"].setdefault("batch_loss", {})[k] = (sum(s[0] for s in done) / len(done), 1e-4)
        expected["train"].setdefault("batch_" + METRIC, {})[k] = (sum(s[1] for s in done) / len(done), 1e-4)

    bad = []
    count = 0
    for run in ("train", "validation"):
        acc, got = read_run(os.path.join(logdir, run))
        if acc.file_version != 2:
            bad.append("%s: file_version %s, expected 2 (brain.Event:2)" % (run, acc.file_version))
        count += compare(run, expected[run], got, bad)
    # issue 17, learning-rate schedules: with --lr-schedule, epoch_learning_rate is Keras's
    # _collect_learning_rate, the schedule at the optimizer's iterations (3 and 6 here): 0.002 * 0.5^(it/2)
    sched_dir = os.path.join(directory, "logs_schedule")
    epoch_lines(systolic, ["--epochs", "2", "--steps-per-epoch", "3", "--logdir", sched_dir,
                           "--lr-schedule", "exponential_decay:decay_steps=2,decay_rate=0.5"])
    _, got = read_run(os.path.join(sched_dir, "train"))
    have = got.get("epoch_learning_rate", {})
    for step, it in ((0, 3), (1, 6)):
        want = 0.002 * 0.5 ** (it / 2)
        count += 1
        if step not in have or abs(have[step][0] - want) > 1e-6 * want:
            bad.append("schedule: epoch_learning_rate at step %d: %s, expected %.7g" % (step, have.get(step), want))
    for b in bad:
        print(b)
    print("TensorBoard %s read %d scalars in %s: %s" % (version.VERSION, count, logdir,
                                                         "%d differences" % len(bad) if bad else "all as expected"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
