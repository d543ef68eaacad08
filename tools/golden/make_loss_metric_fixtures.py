#!/usr/bin/env python3
"""make_loss_metric_fixtures.py - tf.keras 2.15's losses and metrics on small
inputs, for tests/test_losses.c (issue 17, losses and metrics).

Writes tests/golden/losses_metrics.npz with, per loss case <c> (the cases
are listed in LOSSES below; test_losses.c has the same table):

  loss_<c>_y_true, loss_<c>_y_pred   float32 (6, 5)
  loss_<c>_value                     the Loss object's value: the mean over
                                     the batch (SUM_OVER_BATCH_SIZE)
  loss_<c>_grad                      d value / d y_pred (GradientTape)

per metric case <c> (METRICS below), three batches b = 0, 1, 2:

  metric_<c>_y_true_<b>, metric_<c>_y_pred_<b>   (8, 4) (sparse: (8,) labels)
  metric_<c>_value                   result() after update_state on all three
                                     batches, Keras's stateful accumulation

and tests/golden/losses_metrics_model.h5 with losses_metrics_model.npz: a
Dense(3, sigmoid) on 4 inputs compiled with BinaryFocalCrossentropy(
gamma=1.5, apply_class_balancing=True, label_smoothing=0.1) and the
metrics AUC, AUC(curve='PR', num_thresholds=50), Precision, Recall and
RootMeanSquaredError; x (21, 4), y (21, 3) 0/1, and model.evaluate's
return_dict at batch_size 8 (the last batch is partial), each as
eval_<name>, plus training_config: the file's training_config as bytes.

Deterministic (seeded, one thread, oneDNN off).

Usage (from the repository root):
    .venv/bin/python tools/golden/make_loss_metric_fixtures.py [--out tests/golden]
"""

import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"

import h5py  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow import keras  # noqa: E402

tf.config.threading.set_inter_op_parallelism_threads(1)
tf.config.threading.set_intra_op_parallelism_threads(1)
K = keras.losses
M = keras.metrics

# (case, Loss object, kind of y_pred, kind of y_true)
LOSSES = [
    ("cce_smooth", K.CategoricalCrossentropy(label_smoothing=0.1), "probs", "onehot"),
    ("cce_logits_smooth", K.CategoricalCrossentropy(from_logits=True, label_smoothing=0.2), "logits", "onehot"),
    ("bce_smooth", K.BinaryCrossentropy(label_smoothing=0.1), "unit", "binary"),
    ("mae", K.MeanAbsoluteError(), "normal", "normal"),
    ("mape", K.MeanAbsolutePercentageError(), "normal", "normal"),
    ("msle", K.MeanSquaredLogarithmicError(), "unit", "positive"),
    ("kld", K.KLDivergence(), "probs", "probs"),
    ("huber", K.Huber(), "normal", "normal"),
    ("huber_half", K.Huber(delta=0.5), "normal", "normal"),
    ("log_cosh", K.LogCosh(), "normal", "normal"),
    ("poisson", K.Poisson(), "unit", "positive"),
    ("hinge01", K.Hinge(), "normal", "binary"),
    ("hinge_pm1", K.Hinge(), "normal", "pm1"),
    ("squared_hinge", K.SquaredHinge(), "normal", "binary"),
    ("categorical_hinge", K.CategoricalHinge(), "normal", "onehot"),
    ("cosine", K.CosineSimilarity(), "normal", "normal"),
    ("bfocal", K.BinaryFocalCrossentropy(), "unit", "binary"),
    ("bfocal_logits", K.BinaryFocalCrossentropy(apply_class_balancing=True, gamma=1.5, from_logits=True,
                                                label_smoothing=0.1), "logits", "binary"),
    ("cfocal", K.CategoricalFocalCrossentropy(), "probs", "onehot"),
    ("cfocal_logits", K.CategoricalFocalCrossentropy(alpha=0.5, from_logits=True, label_smoothing=0.1), "logits",
     "onehot"),
]

# (case, metric factory, sparse labels)
METRICS = [
    ("auc", lambda: M.AUC(), False),
    ("auc_pr50", lambda: M.AUC(curve="PR", num_thresholds=50), False),
    ("precision", lambda: M.Precision(), False),
    ("recall", lambda: M.Recall(), False),
    ("precision_03", lambda: M.Precision(thresholds=0.3), False),
    ("top2", lambda: M.TopKCategoricalAccuracy(k=2), False),
    ("sparse_top2", lambda: M.SparseTopKCategoricalAccuracy(k=2), True),
    ("mape", lambda: M.MeanAbsolutePercentageError(), False),
    ("msle", lambda: M.MeanSquaredLogarithmicError(), False),
    ("mse", lambda: M.MeanSquaredError(), False),
    ("rmse", lambda: M.RootMeanSquaredError(), False),
]


def values(rng, kind, shape):
    if kind == "normal":
        return rng.randn(*shape).astype(np.float32)
    if kind == "logits":
        return (rng.randn(*shape) * 2).astype(np.float32)
    if kind == "unit":
        return rng.uniform(0.05, 0.95, shape).astype(np.float32)
    if kind == "positive":
        return rng.uniform(0, 3, shape).astype(np.float32)
    if kind == "probs":
        e = np.exp(rng.randn(*shape))
        return (e / e.sum(-1, keepdims=True)).astype(np.float32)
    if kind == "onehot":
        return np.eye(shape[-1], dtype=np.float32)[rng.randint(0, shape[-1], shape[0])]
    if kind == "binary":
        return rng.randint(0, 2, shape).astype(np.float32)
    if kind == "pm1":
        return (rng.randint(0, 2, shape) * 2 - 1).astype(np.float32)
    raise ValueError(kind)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/golden")
    out = ap.parse_args().out
    rng = np.random.RandomState(17)
    arrays = {}
    for case, loss, pk, tk in LOSSES:
        y_true, y_pred = values(rng, tk, (6, 5)), values(rng, pk, (6, 5))
        p = tf.Variable(y_pred)
        with tf.GradientTape() as tape:
            v = loss(tf.constant(y_true), p)
        arrays["loss_%s_y_true" % case] = y_true
        arrays["loss_%s_y_pred" % case] = y_pred
        arrays["loss_%s_value" % case] = np.float64(v.numpy())
        arrays["loss_%s_grad" % case] = tape.gradient(v, p).numpy()
    for case, make, sparse in METRICS:
        m = make()
        for b in range(3):
            if sparse:
                y_true = rng.randint(0, 4, 8).astype(np.int32)
            elif case in ("mape", "msle", "mse", "rmse"):
                y_true = values(rng, "positive", (8, 4))
            else:
                y_true = values(rng, "onehot" if case == "top2" else "binary", (8, 4))
            y_pred = values(rng, "unit", (8, 4))
            if b == 1:  # ties and the ends of [0, 1], where thresholds and buckets decide
                y_pred[0, :] = [0.0, 1.0, 0.5, 0.5]
            m.update_state(y_true, y_pred)
            arrays["metric_%s_y_true_%d" % (case, b)] = y_true
            arrays["metric_%s_y_pred_%d" % (case, b)] = y_pred
        arrays["metric_%s_value" % case] = np.float64(m.result().numpy())
    np.savez(os.path.join(out, "losses_metrics.npz"), **arrays)

    # the end-to-end model
    tf.keras.utils.set_random_seed(17)
    model = keras.Sequential([keras.layers.Dense(3, activation="sigmoid", input_shape=(4,))])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1),
                  loss=K.BinaryFocalCrossentropy(gamma=1.5, apply_class_balancing=True, label_smoothing=0.1),
                  metrics=["AUC", M.AUC(curve="PR", num_thresholds=50), "Precision", "Recall",
                           "RootMeanSquaredError"])
    x = rng.randn(21, 4).astype(np.float32)
    y = rng.randint(0, 2, (21, 3)).astype(np.float32)
    logs = model.evaluate(x, y, batch_size=8, verbose=0, return_dict=True)
    path = os.path.join(out, "losses_metrics_model.h5")
    model.save(path)
    with h5py.File(path, "r") as f:
        tc = f.attrs["training_config"]
    tc = tc.decode() if isinstance(tc, bytes) else tc
    e2e = {"x": x, "y": y, "training_config": np.frombuffer(tc.encode(), np.uint8)}
    for k, v in logs.items():
        e2e["eval_" + k] = np.float64(v)
    np.savez(os.path.join(out, "losses_metrics_model.npz"), **e2e)
    print(json.dumps({k: float(v) for k, v in logs.items()}))
    print(tc)


if __name__ == "__main__":
    main()
