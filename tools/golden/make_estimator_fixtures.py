#!/usr/bin/env python3
"""make_estimator_fixtures.py - TensorFlow 2.15's TPUEstimator(use_tpu=False)
on a small model_fn, for tests/test_estimator.c (issue 19, point 5).

The model_fn: tf.compat.v1.layers.Dense(4, relu) on 3 features, then
Dense(2) logits, from fixed initial weights; the loss
tf.compat.v1.losses.sparse_softmax_cross_entropy; the train_op
GradientDescentOptimizer(exponential_decay(0.5, global_step, 3, 0.5)).minimize;
eval_metrics (metric_fn, [labels, logits]) with tf.compat.v1.metrics'
accuracy, precision, recall (of argmax(logits)), mean_absolute_error and
mean (of softmax(logits)[:, 1]); predictions logits and probabilities.

The run, on x (20, 3), y (20,) in {0, 1}:
  train(max_steps=6) with batches of 4 (repeat, drop_remainder), RunConfig
    save_summary_steps 2, save_checkpoints_steps 4, log_step_count_steps 1,
    TPUConfig(iterations_per_loop=2);
  evaluate() with batches of 6 (the last of 2 rows);
  train(steps=2): resumed from the checkpoint of step 6, input_fn called anew;
  predict() with batches of 6.

Arrays (tests/golden/estimator.npz):
  x, y; w0_<weight> the initial weights (dense_kernel (3, 4), dense_bias (4,),
  dense_1_kernel (4, 2), dense_1_bias (2,));
  train_loss (8,), train_lr (8,): each step's loss and learning rate, as a hook
    fetched them; w6_<weight>, w8_<weight>: the weights after steps 6 and 8;
  eval_accuracy, eval_precision, eval_recall, eval_mae, eval_mean_p, eval_loss,
    eval_global_step: evaluate()'s dict;
  pred_logits (20, 2), pred_probabilities (20, 2);
  ckpt_steps: the global steps of the checkpoints in model_dir at the end;
  summary_<tag>_steps, summary_<tag>_values for the train tags loss,
    global_step/sec (as global_step_per_sec) and examples/sec (examples_per_sec),
    and eval_summary_<tag>_steps for the eval directory's.

Usage (from the repository root):
    $SYSTOLIC_PYTHON tools/golden/make_estimator_fixtures.py [--out DIR]
"""

import argparse
import glob
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_fixtures import REPO, rng_for, save, tf, uniform  # noqa: E402  (sets TF's threads and determinism)

import numpy as np  # noqa: E402

N, TRAIN_BATCH, EVAL_BATCH, PREDICT_BATCH = 20, 4, 6, 6
WEIGHTS = [("dense_kernel", (3, 4)), ("dense_bias", (4,)), ("dense_1_kernel", (4, 2)), ("dense_1_bias", (2,))]
V1 = tf.compat.v1


def make_data():
    rng = rng_for("estimator")
    x = uniform(rng, -1, 1, (N, 3))
    y = rng.integers(0, 2, N).astype(np.int32)
    w0 = {name: uniform(rng, -0.6, 0.6, shape) for name, shape in WEIGHTS}
    return x, y, w0


def metric_fn(labels, logits):
    classes = tf.argmax(logits, axis=1)
    p1 = tf.nn.softmax(logits)[:, 1]
    return {
        "accuracy": V1.metrics.accuracy(labels, classes),
        "precision": V1.metrics.precision(labels, classes),
        "recall": V1.metrics.recall(labels, classes),
        "mae": V1.metrics.mean_absolute_error(tf.cast(labels, tf.float32), p1),
        "mean_p": V1.metrics.mean(p1),
    }


def model_fn_of(w0):
    def model_fn(features, labels, mode, params):
        c = tf.constant_initializer
        h = V1.layers.Dense(4, activation=tf.nn.relu, kernel_initializer=c(w0["dense_kernel"]),
                            bias_initializer=c(w0["dense_bias"]))(features)
        logits = V1.layers.Dense(2, kernel_initializer=c(w0["dense_1_kernel"]),
                                 bias_initializer=c(w0["dense_1_bias"]))(h)
        if mode == tf.estimator.ModeKeys.PREDICT:
            return V1.estimator.tpu.TPUEstimatorSpec(
                mode, predictions={"logits": logits, "probabilities": tf.nn.softmax(logits)})
        loss = V1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        if mode == tf.estimator.ModeKeys.TRAIN:
            lr = V1.train.exponential_decay(0.5, V1.train.get_global_step(), decay_steps=3, decay_rate=0.5)
            V1.add_to_collection("golden", loss)
            V1.add_to_collection("golden", lr)
            opt = V1.train.GradientDescentOptimizer(lr)
            return V1.estimator.tpu.TPUEstimatorSpec(mode, loss=loss,
                                                     train_op=opt.minimize(loss, V1.train.get_global_step()))
        return V1.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, eval_metrics=(metric_fn, [labels, logits]))
    return model_fn


class Fetch(V1.train.SessionRunHook):
    """Each step's loss and learning rate, fetched with the step."""

    def __init__(self, out):
        self.out = out

    def begin(self):
        self.tensors = V1.get_collection("golden")

    def before_run(self, run_context):
        return V1.train.SessionRunArgs(self.tensors)

    def after_run(self, run_context, run_values):
        self.out.append([float(v) for v in run_values.results])


def summaries(path):
    """tag -> [(step, value)] of every event file in path."""
    got = {}
    for f in sorted(glob.glob(os.path.join(path, "events.out.tfevents*"))):
        for e in V1.train.summary_iterator(f):
            for v in e.summary.value:
                if v.HasField("simple_value"):
                    got.setdefault(v.tag, []).append((e.step, v.simple_value))
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.path.join(REPO, "tests", "golden"))
    args = ap.parse_args()
    x, y, w0 = make_data()

    def train_input_fn(params):
        d = tf.data.Dataset.from_tensor_slices((x, y))
        return d.repeat().batch(params["batch_size"], drop_remainder=True)

    def eval_input_fn(params):
        return tf.data.Dataset.from_tensor_slices((x, y)).batch(params["batch_size"])

    def predict_input_fn(params):
        return tf.data.Dataset.from_tensor_slices(x).batch(params["batch_size"])

    md = tempfile.mkdtemp(prefix="estimator-golden-")
    try:
        config = V1.estimator.tpu.RunConfig(
            model_dir=md, save_summary_steps=2, save_checkpoints_steps=4, log_step_count_steps=1,
            tpu_config=V1.estimator.tpu.TPUConfig(iterations_per_loop=2))
        est = V1.estimator.tpu.TPUEstimator(model_fn=model_fn_of(w0), config=config, use_tpu=False,
                                            train_batch_size=TRAIN_BATCH, eval_batch_size=EVAL_BATCH,
                                            predict_batch_size=PREDICT_BATCH)
        fetched = []
        est.train(train_input_fn, max_steps=6, hooks=[Fetch(fetched)])
        w6 = {name: est.get_variable_value(name.replace("_kernel", "/kernel").replace("_bias", "/bias"))
              for name, _ in WEIGHTS}
        ev = est.evaluate(eval_input_fn)
        est.train(train_input_fn, steps=2, hooks=[Fetch(fetched)])
        w8 = {name: est.get_variable_value(name.replace("_kernel", "/kernel").replace("_bias", "/bias"))
              for name, _ in WEIGHTS}
        pred = list(est.predict(predict_input_fn))
        ckpts = sorted(int(p.split("-")[-1].split(".")[0]) for p in glob.glob(os.path.join(md, "model.ckpt-*.index")))
        train_sum, eval_sum = summaries(md), summaries(os.path.join(md, "eval"))
    finally:
        shutil.rmtree(md, ignore_errors=True)

    assert len(fetched) == 8, fetched
    arrays = {"x": x, "y": y}
    arrays.update({"w0_" + k: v for k, v in w0.items()})
    arrays["train_loss"] = np.array([f[0] for f in fetched], np.float32)
    arrays["train_lr"] = np.array([f[1] for f in fetched], np.float32)
    arrays.update({"w6_" + k: v for k, v in w6.items()})
    arrays.update({"w8_" + k: v for k, v in w8.items()})
    for k in ("accuracy", "precision", "recall", "mae", "mean_p", "loss"):
        arrays["eval_" + k] = np.array(ev[k], np.float32)
    arrays["eval_global_step"] = np.array(ev["global_step"], np.int32)
    arrays["pred_logits"] = np.stack([p["logits"] for p in pred]).astype(np.float32)
    arrays["pred_probabilities"] = np.stack([p["probabilities"] for p in pred]).astype(np.float32)
    arrays["ckpt_steps"] = np.array(ckpts, np.int32)
    for tag, key in (("loss", "loss"), ("global_step/sec", "global_step_per_sec"), ("examples/sec", "examples_per_sec")):
        arrays["summary_%s_steps" % key] = np.array([s for s, _ in train_sum[tag]], np.int32)
        arrays["summary_%s_values" % key] = np.array([v for _, v in train_sum[tag]], np.float32)
    for tag in sorted(eval_sum):
        arrays["eval_summary_%s_steps" % tag] = np.array([s for s, _ in eval_sum[tag]], np.int32)
    save(args.out, "estimator.npz", arrays)
    print("estimator.npz: losses", arrays["train_loss"], "eval", ev, "checkpoints", ckpts,
          "summaries", {k: [s for s, _ in v] for k, v in train_sum.items()},
          {k: [s for s, _ in v] for k, v in eval_sum.items()})


if __name__ == "__main__":
    main()
