#!/usr/bin/env python3
"""tfrecord_multiio.py - a model with two inputs and two outputs trained,
evaluated and predicted from TFRecord files TensorFlow wrote, with sample
weights from the records, against tf.keras 2.15 on the same data (issue
17, points 6 to 8). Run by tests/tfrecord_layouts.sh with `multiio`:

    python tests/tfrecord_multiio.py SYSTOLIC DIR MULTIIO_H5

The model is tests/data/keras/multiio.h5 (inputs in_a (None, 4) and in_b
(None, 3); outputs cls, 3-way softmax, sparse categorical crossentropy,
and reg, 2 units, mse with loss weight 0.5; compiled with SGD(0.1)). The
files: mio-train.tfrecord and mio-test.tfrecord (40 and 24 Examples:
floats "a" and "b", int64 "cls", floats "reg", a float "weight" in
[0, 2), and a bytes "id"), and mio-unlabelled.tfrecord ("a" and "b"
alone). The record spec names each input and output, in another order
than the model's (the command takes the model's), and w.

Checked, each against Keras on the same records:
  evaluate: every log (loss, cls_loss, reg_loss, cls_accuracy, reg_mae),
    with and without w, flag and JSON spec (the printed 4 decimals, so
    within 6e-5); the weights change the loss; multiio_dict.h5, compiled
    with a dict of losses and loss weights, keeps each output's
  train: one epoch of one batch of 40 with the weights, validating on the
    test file: the logs, val_ logs and the trained weights (1e-5)
  predict: the trained model's outputs as OUT.npz (one array per output,
    named after it) and OUT.csv, from the labelled file with the training
    spec (labels and weights not read) and from the unlabelled file
  refusals naming the spec's role and the model's input or output
"""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tfrecord_layouts import feature, run  # noqa: E402  (the Feature builder; a command and its exit status)

LOGS = ["loss", "cls_loss", "reg_loss", "cls_accuracy", "reg_mae"]
SPEC = ("y.reg=FixedLen(reg, float, [2]); x.in_b=FixedLen(b, float, [3]); w=FixedLen(weight, float); "
        "y.cls=FixedLen(cls, int64); x.in_a=FixedLen(a, float, [4])")
UNWEIGHTED = SPEC.replace(" w=FixedLen(weight, float);", "")
FEATURES = {"a": tf.io.FixedLenFeature([4], tf.float32), "b": tf.io.FixedLenFeature([3], tf.float32),
            "cls": tf.io.FixedLenFeature([], tf.int64), "reg": tf.io.FixedLenFeature([2], tf.float32),
            "weight": tf.io.FixedLenFeature([], tf.float32)}


def write(path, n, seed, labelled=True):
    rng = np.random.default_rng(seed)
    with tf.io.TFRecordWriter(path) as w:
        for i in range(n):
            f = {"a": feature("float", rng.uniform(-1, 1, 4).astype(np.float32)),
                 "b": feature("float", rng.uniform(-1, 1, 3).astype(np.float32)),
                 "id": feature("bytes", [b"r%03d" % i])}
            if labelled:
                f.update({"cls": feature("int64", [int(rng.integers(0, 3))]),
                          "reg": feature("float", rng.uniform(-1, 1, 2).astype(np.float32)),
                          "weight": feature("float", [float(np.float32(rng.uniform(0, 2)))])})
            w.write(tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString())


def read(path, labelled=True):
    """The records as Keras takes them: ([a, b], [cls, reg], weight), as tf.data parses them."""
    spec = FEATURES if labelled else {k: FEATURES[k] for k in ("a", "b")}
    e = next(iter(tf.data.TFRecordDataset(path).map(lambda r: tf.io.parse_single_example(r, spec)).batch(1000)))
    x = [e["a"].numpy(), e["b"].numpy()]
    return (x, [e["cls"].numpy(), e["reg"].numpy()], e["weight"].numpy()) if labelled else x


def logs_of(out, prefix=""):
    """The named values a systolic command printed ("loss: 1.4171 - cls_loss: ...")."""
    values = {}
    line = [l for l in out.splitlines() if "loss: " in l][-1]  # train's summary line, or evaluate's logs
    for part in line.split("; ")[-1].split(" - "):  # after train's "MODEL: 1 epoch of ...; "
        name, _, v = part.strip().rpartition(": ")
        if name.startswith(prefix) and (prefix or not name.startswith("val_")):
            values[name[len(prefix):]] = float(v)
    return values


def same_logs(what, got, want):
    assert sorted(got) == sorted(LOGS), (what, got)
    for k in LOGS:
        assert abs(got[k] - want[k]) <= 6e-5, (what, k, got[k], want[k])  # printed with 4 decimals


def main():
    systolic, d, h5 = sys.argv[1:4]
    train, test, unlabelled = (os.path.join(d, n) for n in ("mio-train.tfrecord", "mio-test.tfrecord",
                                                            "mio-unlabelled.tfrecord"))
    write(train, 40, 1)
    write(test, 24, 2)
    write(unlabelled, 10, 3, labelled=False)
    x, y, w = read(train)
    keras = tf.keras.models.load_model(h5)

    # evaluate, with and without the records' sample weights; the flag's and the JSON spelling
    common = ["--data", "tfrecord:" + train, "--batch-size", "16", "--verbose", "0"]
    want = keras.evaluate(x, y, batch_size=16, verbose=0, return_dict=True)
    same_logs("evaluate", logs_of(run([systolic, "evaluate", h5, "--features", UNWEIGHTED] + common)), want)
    want_w = keras.evaluate(x, y, sample_weight=w, batch_size=16, verbose=0, return_dict=True)
    got_w = logs_of(run([systolic, "evaluate", h5, "--features", SPEC] + common))
    same_logs("evaluate with w", got_w, want_w)
    assert abs(want_w["loss"] - want["loss"]) > 1e-3, "the weights should change the loss"
    spec_json = os.path.join(d, "spec.json")
    with open(spec_json, "w") as f:
        json.dump({"w": {"kind": "FixedLen", "feature": "weight", "dtype": "float"},
                   "y.cls": {"kind": "FixedLen", "feature": "cls", "dtype": "int64"},
                   "y.reg": {"kind": "FixedLen", "feature": "reg", "dtype": "float", "shape": [2]},
                   "x.in_b": {"kind": "FixedLen", "feature": "b", "dtype": "float", "shape": [3]},
                   "x.in_a": {"kind": "FixedLen", "feature": "a", "dtype": "float", "shape": [4]}}, f)
    same_logs("evaluate, JSON spec", logs_of(run([systolic, "evaluate", h5, "--features", spec_json] + common)), want_w)
    # the same model compiled with a dict of losses (cls a SparseCategoricalCrossentropy taking logits, reg mse,
    # given reg first) and dict loss weights: each output keeps its own
    dict_h5 = os.path.join(os.path.dirname(h5), "multiio_dict.h5")
    want_d = tf.keras.models.load_model(dict_h5).evaluate(x, y, sample_weight=w, batch_size=16, verbose=0,
                                                          return_dict=True)
    got_d = logs_of(run([systolic, "evaluate", dict_h5, "--features", SPEC] + common))
    assert sorted(got_d) == sorted(want_d) and all(abs(got_d[k] - want_d[k]) <= 6e-5 for k in want_d), (got_d, want_d)

    # train: one step of 40 weighted records (the shuffle cannot change a whole batch), validated on the test file
    trained = os.path.join(d, "trained.h5")
    out = run([systolic, "train", h5, "--data", "tfrecord:" + train, "--features", SPEC, "--batch-size", "40",
               "--epochs", "1", "--verbose", "0", "--save-model", trained])
    xv, yv, wv = read(test)
    h = keras.fit(x, y, sample_weight=w, batch_size=40, epochs=1, shuffle=False, verbose=0,
                  validation_data=(xv, yv, wv), validation_batch_size=40)
    same_logs("train", logs_of(out), {k: v[0] for k, v in h.history.items()})
    same_logs("train's validation", logs_of(out, "val_"), {k[4:]: v[0] for k, v in h.history.items()
                                                           if k.startswith("val_")})
    mine = tf.keras.models.load_model(trained)
    err = max(float(np.abs(a - b).max()) for a, b in zip(mine.get_weights(), keras.get_weights()))
    assert err <= 1e-5, ("trained weights differ from Keras's by", err)

    # predict: every record, to .npz and .csv; labels and weights in the spec are not read, so unlabelled records do
    for path, spec, xs in ((train, SPEC, x), (unlabelled, SPEC, read(unlabelled, labelled=False)),
                           (unlabelled, "x.in_b=FixedLen(b, float, [3]); x.in_a=FixedLen(a, float, [4])",
                            read(unlabelled, labelled=False))):
        want = dict(zip(keras.output_names, keras.predict(xs, verbose=0)))
        for ext in ("npz", "csv"):
            pred = os.path.join(d, "pred." + ext)
            out = run([systolic, "predict", trained, "--data", "tfrecord:" + path, "--features", spec, "--batch-size",
                       "16", "--output", pred, "--verbose", "0"])
            n = len(xs[0])
            assert out.strip() == "wrote %s: cls float32 (%d, 3), reg float32 (%d, 2)" % (pred, n, n), out
        p = np.load(os.path.join(d, "pred.npz"))
        assert sorted(p.files) == ["cls", "reg"], p.files
        for k in want:
            assert p[k].shape == want[k].shape and np.abs(p[k] - want[k]).max() <= 1e-5, (path, k)
        rows = open(os.path.join(d, "pred.csv")).read().splitlines()
        assert rows[0] == "cls_0,cls_1,cls_2,reg_0,reg_1" and len(rows) == len(xs[0]) + 1, rows[:2]
        csv = np.array([[float(v) for v in r.split(",")] for r in rows[1:]], np.float32)
        assert np.array_equal(csv, np.concatenate([p["cls"], p["reg"]], axis=1)), "the CSV's values are the .npz's"

    # refused, naming the spec's role and the model's inputs or outputs
    bad = run([systolic, "evaluate", h5, "--features", UNWEIGHTED.replace("x.in_b", "x.in_c")] + common, 1)
    assert "x.in_c names no input of the model; its inputs: in_a, in_b" in bad, bad
    bad = run([systolic, "evaluate", h5, "--features", UNWEIGHTED.replace("y.reg=FixedLen(reg, float, [2]); ", "")]
              + common, 1)
    assert "the model's output 'reg' has no feature: give y.reg=" in bad, bad
    bad = run([systolic, "train", h5, "--features", "x=FixedLen(a, float, [4]); y=FixedLen(cls, int64)"] + common, 1)
    assert "x names no input, but the model has 2 inputs (in_a, in_b)" in bad, bad
    bad = run([systolic, "evaluate", h5, "--features", UNWEIGHTED.replace("[2]", "[4]").replace("(reg,", "(a,")]
              + common, 1)
    assert "y.reg (FixedLen(a)) gives float32 (4,) but the loss mse of output 'reg' (None, 2)" in bad, bad
    bad = run([systolic, "evaluate", h5, "--data", "tfrecord:" + unlabelled, "--features", SPEC, "--verbose", "0"], 1)
    assert "mio-unlabelled.tfrecord, record 0" in bad and "feature 'cls' is required" in bad, bad  # evaluate reads labels
    bad = run([systolic, "evaluate", h5, "--data", "tfrecord:" + train, "--verbose", "0"], 1)
    assert "has 2 inputs and 2 outputs" in bad and "give --features" in bad, bad
    print("tfrecord_multiio: a 2-input, 2-output model trained, evaluated (with sample weights) and predicted from "
          "TFRecords TensorFlow %s wrote, as tf.keras does" % tf.__version__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
