#!/usr/bin/env python3
"""estimator_tensorboard.py TEST_ESTIMATOR DIR - TensorBoard's own reader
finds the estimator's summaries where TensorFlow's TPUEstimator puts them
(issue 19, point 5; `tests/tensorboard_reader.sh TEST_ESTIMATOR ROOT
estimator_tensorboard.py` runs it, and tests/tensorboard_reader.py's
read_run and compare read and check).

`test_estimator --model-dir DIR` runs the golden run of test_estimator.c
with use_tpu false -- train(max_steps=6) with save_summary_steps 2 and
log_step_count_steps 1, evaluate(), train(steps=2) -- leaving its model
directory. Then the EventAccumulator the TensorBoard server reads with
(plugin_event_accumulator) reads DIR and DIR/eval, and every scalar must be
at the step where TensorFlow 2.15's TPUEstimator(use_tpu=False) wrote it on
the same run (tests/golden/estimator.npz, tools/golden/make_estimator_fixtures.py),
with its value, and nothing else be there:

  DIR:      loss at 1, 3, 5, 7 (TensorFlow's values); learning_rate at the
            same steps (the rate of that step, which TensorFlow writes only
            when model_fn asks); global_step/sec and examples/sec at 2..6, 8
            (positive, examples/sec the batch of 4 times global_step/sec)
  DIR/eval: accuracy, loss, mae, mean_p, precision, recall at step 6
            (TensorFlow's values)

Exits 1 naming every difference."""
import os
import subprocess
import sys

import numpy as np
from tensorboard import version

from tensorboard_reader import compare, read_run


def main(test, directory):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    out = subprocess.run([test, "--model-dir", directory], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if out.returncode != 0:
        sys.exit("test_estimator --model-dir failed (%d):\n%s" % (out.returncode, out.stdout))
    fx = np.load(os.path.join(root, "tests", "golden", "estimator.npz"))
    lr = fx["train_lr"]
    expected = {"train": {}, "eval": {}}  # run -> tag -> step -> (value or None: positive, tolerance)

    def tf_value(v):  # TensorFlow's value, to float32's tolerance
        return float(v), 1e-5 * max(1.0, abs(float(v)))

    for s, v in zip(fx["summary_loss_steps"], fx["summary_loss_values"]):
        expected["train"].setdefault("loss", {})[int(s)] = tf_value(v)
        expected["train"].setdefault("learning_rate", {})[int(s)] = (float(lr[s - 1]), 1e-6)
    for s in fx["summary_global_step_per_sec_steps"]:
        expected["train"].setdefault("global_step/sec", {})[int(s)] = (None, 0)
    for s in fx["summary_examples_per_sec_steps"]:
        expected["train"].setdefault("examples/sec", {})[int(s)] = (None, 0)
    for name in fx.files:
        if name.startswith("eval_summary_") and name.endswith("_steps"):
            tag = name[len("eval_summary_"):-len("_steps")]
            for s in fx[name]:
                expected["eval"].setdefault(tag, {})[int(s)] = tf_value(fx["eval_" + tag])

    bad, count = [], 0
    got = {"train": read_run(directory)[1], "eval": read_run(os.path.join(directory, "eval"))[1]}
    for run in ("train", "eval"):
        count += compare(run, expected[run], got[run], bad)
    per_step, per_example = got["train"].get("global_step/sec", {}), got["train"].get("examples/sec", {})
    for step in sorted(set(per_step) & set(per_example)):
        if abs(per_example[step][0] - 4 * per_step[step][0]) > 1e-5 * per_example[step][0]:
            bad.append("examples/sec at step %d: %g, not 4 x global_step/sec %g" % (step, per_example[step][0],
                                                                                    per_step[step][0]))
    for b in bad:
        print(b)
    print("estimator_tensorboard: TensorBoard %s read %d scalars in %s: %s" % (
        version.VERSION, count, directory, "%d differences" % len(bad) if bad else "all where TensorFlow puts them"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
