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

and the same for the losses with an axis other than the last (AXIS_LOSSES,
(4, 3, 5), the classes along axis 1);

and tests/golden/losses_metrics_model.h5 with losses_metrics_model.npz: a
Dense(3, sigmoid) on 4 inputs compiled with BinaryFocalCrossentropy(
gamma=1.5, apply_class_balancing=True, label_smoothing=0.1) and the
metrics AUC, AUC(curve='PR', num_thresholds=50), Precision, Recall and
RootMeanSquaredError; x (21, 4), y (21, 3) 0/1, and model.evaluate's
return_dict at batch_size 8 (the last batch is partial), each as
eval_<name>, plus training_config: the file's training_config as bytes.

issue 17: saved_models() writes <name>.h5 and <name>.npz (saved_model_case):
loss_axis_model (CategoricalCrossentropy(axis=1) over a softmax),
ignore_class_model (SparseCategoricalCrossentropy(ignore_class=-1) on a
masked sequence output), weighted_metrics_model (metrics and
weighted_metrics, sample weights), and weighted_metrics_outputs.h5 (per
output weighted_metrics of two outputs, saved as compile() left it),
metric_options_model (Precision and Recall's top_k, class_id and a list of
one threshold, AUC's multi_label, num_labels, label_weights, from_logits
and summation_method). METRICS17's cases are the metric cases' with those
options, some with sample weights (metric_<c>_sw_<b>).

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

# issue 17: the losses with an axis other than the last, on (4, 3, 5) with the classes along axis 1 (or -2)
AXIS_LOSSES = [
    ("cce_axis1", K.CategoricalCrossentropy(axis=1, label_smoothing=0.1), "probs", "onehot"),
    ("cce_logits_axis1", K.CategoricalCrossentropy(from_logits=True, axis=1), "logits", "onehot"),
    ("cce_axis_m2", K.CategoricalCrossentropy(axis=-2), "probs", "onehot"),
    ("bce_axis1", K.BinaryCrossentropy(axis=1, label_smoothing=0.1), "unit", "binary"),
    ("bce_logits_axis1", K.BinaryCrossentropy(from_logits=True, axis=1), "logits", "binary"),
    ("bfocal_axis1", K.BinaryFocalCrossentropy(axis=1, gamma=1.5, apply_class_balancing=True), "unit", "binary"),
    ("cfocal_axis1", K.CategoricalFocalCrossentropy(axis=1, label_smoothing=0.1), "probs", "onehot"),
    ("cfocal_logits_axis1", K.CategoricalFocalCrossentropy(axis=1, from_logits=True), "logits", "onehot"),
    ("cosine_axis1", K.CosineSimilarity(axis=1), "normal", "normal"),
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


# issue 17, metric options: (case, metric factory, kind of y_pred, sample weights given)
METRICS17 = [
    ("precision_top2", lambda: M.Precision(top_k=2), "unit", False),
    ("recall_class1", lambda: M.Recall(class_id=1, thresholds=[0.3]), "unit", True),
    ("precision_top1_class2", lambda: M.Precision(top_k=1, class_id=2), "unit", False),
    ("recall_top2_03", lambda: M.Recall(top_k=2, thresholds=0.3), "unit", True),
    ("auc_logits", lambda: M.AUC(from_logits=True), "logits", False),
    ("auc_label_weights", lambda: M.AUC(label_weights=[0.5, 1, 2, 0.25]), "unit", True),
    ("auc_multi", lambda: M.AUC(multi_label=True, num_labels=4, num_thresholds=100), "unit", False),
    ("auc_multi_pr_weights", lambda: M.AUC(multi_label=True, curve="PR", num_thresholds=50,
                                           label_weights=[1, 2, 0.5, 0.25]), "unit", True),
    ("auc_pr_minoring", lambda: M.AUC(curve="PR", summation_method="minoring"), "unit", False),
    ("auc_majoring", lambda: M.AUC(summation_method="majoring"), "unit", True),
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


def loss_case(arrays, case, loss, y_true, y_pred):
    """loss_<case>_*: the inputs, the Loss object's value and its gradient wrt y_pred."""
    p = tf.Variable(y_pred)
    with tf.GradientTape() as tape:
        v = loss(tf.constant(y_true), p)
    arrays["loss_%s_y_true" % case] = y_true
    arrays["loss_%s_y_pred" % case] = y_pred
    arrays["loss_%s_value" % case] = np.float64(v.numpy())
    arrays["loss_%s_grad" % case] = tape.gradient(v, p).numpy()


def along_axis1(rng, kind, shape):
    """values() with the classes along axis 1 of shape (N, C, T): drawn as (N, T, C), axes swapped."""
    flat = values(rng, kind, (shape[0] * shape[2], shape[1]))
    return np.ascontiguousarray(flat.reshape(shape[0], shape[2], shape[1]).transpose(0, 2, 1))


def training_config(path):
    with h5py.File(path, "r") as f:
        tc = f.attrs["training_config"]
    return tc.decode() if isinstance(tc, bytes) else tc


def saved_model_case(out, name, model, x, y, sw=None, batch_size=4, fit=True):
    """model saved as <name>.h5; <name>.npz: x, y (and sw), its training_config as bytes, evaluate's logs at
    batch_size (eval_<name>) and, with fit, one fit step over all samples (fit_<log>) and the weights after it
    (after_<i>, in model.weights order)."""
    path = os.path.join(out, name + ".h5")
    model.save(path)
    arrays = {"x": x, "y": y, "training_config": np.frombuffer(training_config(path).encode(), np.uint8)}
    if sw is not None:
        arrays["sw"] = sw
    logs = model.evaluate(x, y, sample_weight=sw, batch_size=batch_size, verbose=0, return_dict=True)
    for k, v in logs.items():
        arrays["eval_" + k] = np.float64(v)
    if fit:
        h = model.fit(x, y, sample_weight=sw, batch_size=len(x), epochs=1, shuffle=False, verbose=0)
        for k, v in h.history.items():
            arrays["fit_" + k] = np.float64(v[0])
        for i, w in enumerate(model.get_weights()):
            arrays["after_%d" % i] = w
    np.savez(os.path.join(out, name + ".npz"), **arrays)
    print(name, json.dumps({k: float(v) for k, v in logs.items()}))


def saved_models(out, rng):
    """issue 17: Keras-written models with a loss axis, ignore_class and weighted_metrics (test_losses.c)."""
    # CategoricalCrossentropy(axis=1) over a softmax of the last axis: Keras takes the softmax's logits
    # (_keras_logits) and reduces them along axis 1
    keras.backend.clear_session()
    tf.keras.utils.set_random_seed(171)
    model = keras.Sequential([keras.layers.Dense(5, activation="softmax", input_shape=(3, 4))])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.5),
                  loss=K.CategoricalCrossentropy(axis=1, label_smoothing=0.1))
    x = rng.randn(10, 3, 4).astype(np.float32)
    saved_model_case(out, "loss_axis_model", model, x, along_axis1(rng, "onehot", (10, 3, 5)))

    # ignore_class=-1 on a masked sequence output: the labels of class -1 and the masked steps count in neither
    # the loss nor its mean; sparse_categorical_accuracy sees the labels as given (a -1 never matches) and the mask
    keras.backend.clear_session()
    tf.keras.utils.set_random_seed(172)
    model = keras.Sequential([keras.layers.Masking(input_shape=(4, 3)), keras.layers.Dense(5)])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.5),
                  loss=K.SparseCategoricalCrossentropy(from_logits=True, ignore_class=-1),
                  metrics=["sparse_categorical_accuracy"])
    x = rng.randn(10, 4, 3).astype(np.float32)
    x[1, 2:] = 0  # masked steps
    x[6, :3] = 0
    y = rng.randint(0, 5, (10, 4)).astype(np.int32)
    y[rng.rand(10, 4) < 0.3] = -1
    y[9] = -1  # a sample with every label ignored
    saved_model_case(out, "ignore_class_model", model, x, y)

    # weighted_metrics beside metrics (Keras renames a weighted one whose name is taken: weighted_<name>)
    keras.backend.clear_session()
    tf.keras.utils.set_random_seed(173)
    model = keras.Sequential([keras.layers.Dense(3, activation="sigmoid", input_shape=(4,))])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1), loss="binary_crossentropy",
                  metrics=["accuracy", "AUC"], weighted_metrics=["accuracy", "AUC", "mse"])
    x = rng.randn(21, 4).astype(np.float32)
    y = rng.randint(0, 2, (21, 3)).astype(np.float32)
    sw = rng.uniform(0.2, 2, 21).astype(np.float32)
    saved_model_case(out, "weighted_metrics_model", model, x, y, sw, batch_size=8)

    # per output (Keras's dict), two outputs
    keras.backend.clear_session()
    tf.keras.utils.set_random_seed(174)
    inp = keras.Input((4,))
    a = keras.layers.Dense(2, name="a")(inp)
    b = keras.layers.Dense(3, activation="softmax", name="b")(inp)
    model = keras.Model(inp, [a, b])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1), loss=["mse", "categorical_crossentropy"],
                  metrics=["mae"], weighted_metrics={"a": ["mse"], "b": ["accuracy", "mae"]})
    path = os.path.join(out, "weighted_metrics_outputs.h5")
    model.save(path)  # saved before any evaluate: what compile() alone writes
    np.savez(os.path.join(out, "weighted_metrics_outputs.npz"),
             training_config=np.frombuffer(training_config(path).encode(), np.uint8))

    # the metric options: Precision and Recall's top_k, class_id, a list of one threshold; AUC's multi_label,
    # num_labels, label_weights, from_logits, summation_method (fewer thresholds: the states of a model's
    # metrics together stay within systolic's 1024 numbers)
    keras.backend.clear_session()
    tf.keras.utils.set_random_seed(175)
    model = keras.Sequential([keras.layers.Dense(4, activation="sigmoid", input_shape=(5,))])
    model.compile(optimizer=keras.optimizers.SGD(learning_rate=0.1), loss="binary_crossentropy",
                  metrics=[M.Precision(top_k=2, name="p_top2"), M.Recall(class_id=1, thresholds=[0.3], name="r_c1"),
                           M.AUC(multi_label=True, num_labels=4, label_weights=[0.3, 1, 2, 0.5], num_thresholds=60,
                                 name="auc_ml"),
                           M.AUC(from_logits=True, label_weights=[1, 2, 0.5, 0.25], num_thresholds=50, name="auc_lw"),
                           M.AUC(curve="PR", summation_method="minoring", name="auc_min")])
    x = rng.randn(21, 5).astype(np.float32)
    y = rng.randint(0, 2, (21, 4)).astype(np.float32)
    saved_model_case(out, "metric_options_model", model, x, y, batch_size=8, fit=False)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="tests/golden")
    out = ap.parse_args().out
    rng = np.random.RandomState(17)
    arrays = {}
    for case, loss, pk, tk in LOSSES:
        loss_case(arrays, case, loss, values(rng, tk, (6, 5)), values(rng, pk, (6, 5)))
    rng17 = np.random.RandomState(1717)  # issue 17's cases draw apart, leaving the others' numbers as they were
    for case, loss, pk, tk in AXIS_LOSSES:
        loss_case(arrays, case, loss, along_axis1(rng17, tk, (4, 3, 5)), along_axis1(rng17, pk, (4, 3, 5)))
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
    saved_models(out, rng17)
    # last: a metric object made earlier would change Keras's automatic names and random draws above
    rng18 = np.random.RandomState(1718)
    for case, make, pk, weighted in METRICS17:
        m = make()
        for b in range(3):
            y_true = values(rng18, "binary", (8, 4))
            y_pred = values(rng18, pk, (8, 4))
            if b == 1:  # ties within a row (top_k) and the ends of [0, 1]
                y_pred[0, :] = [0.0, 1.0, 0.5, 0.5]
            sw = rng18.uniform(0, 2, 8).astype(np.float32) if weighted else None
            m.update_state(y_true, y_pred, sample_weight=sw)
            arrays["metric_%s_y_true_%d" % (case, b)] = y_true
            arrays["metric_%s_y_pred_%d" % (case, b)] = y_pred
            if weighted:
                arrays["metric_%s_sw_%d" % (case, b)] = sw
        arrays["metric_%s_value" % case] = np.float64(m.result().numpy())
    np.savez(os.path.join(out, "losses_metrics.npz"), **arrays)


if __name__ == "__main__":
    main()
