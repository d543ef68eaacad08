#!/usr/bin/env python3
"""tfrecord_layouts.py - TFRecord files in several layouts, written by
TensorFlow at test time, read by systolic as TensorFlow reads them (issue
17, point 7). Run by tests/tfrecord_layouts.sh:

    python tests/tfrecord_layouts.py TEST_FEATURES SYSTOLIC DIR

Layouts (each 40 Examples of 16 x 12 pixel images in 3 classes):

  floats      "pixels": float_list of H*W*3, "target": int64, other keys
  imagenet_png, imagenet_jpeg
              TensorFlow's ImageNet tools' layout (build_imagenet_data.py):
              image/encoded (PNG or JPEG bytes; JPEGs alternate baseline
              and progressive, some grayscale), image/format, image/height,
              image/width, image/colorspace, image/channels,
              image/class/label, image/class/synset, image/class/text,
              image/filename
  varlen      "tokens": a variable number of int64s, "label": int64

For each, `test_features --dump` gives systolic's tensors, compared with
TensorFlow's own pipeline (parse_single_example, decode_image, resize,
rescale; VarLen through tf.sparse.to_dense, cut or padded): decoded pixels
exactly, resized floats within 1e-4 (the C test checks the resize bit for
bit on its fixtures). Then the command line: a Keras model (Input (8, 8,
3), Flatten, Dense 3 softmax) trains on the JPEG layout with --features
(resize, rescale) and a JSON spec file, evaluates, and predicts every record
to CSV and .npy (one row per record, no padding); and refuses, with the
feature, the file and the record, a missing feature, a feature of another
type, and a GZIP file read without --data-compression.
"""
import json
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

N, H, W = 40, 12, 16


def images(seed):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:H, 0:W]
    out, labels = [], []
    for i in range(N):
        label = i % 3
        base = np.stack([(x * (8 + label * 5) + i) % 256, (y * 19 + 40 * label) % 256,
                         np.full((H, W), 60 * label + 30)], axis=-1)
        noise = rng.integers(0, 24, size=(H, W, 3))
        out.append(np.clip(base + noise, 0, 255).astype(np.uint8))
        labels.append(label)
    return out, labels


def feature(kind, values):
    if kind == "bytes":
        return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))
    if kind == "float":
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    return tf.train.Feature(int64_list=tf.train.Int64List(value=values))


def write(path, examples, compression=None):
    with tf.io.TFRecordWriter(path, options=compression) as w:
        for e in examples:
            w.write(tf.train.Example(features=tf.train.Features(feature=e)).SerializeToString())


def imagenet(encoded, fmt, img, label, i, channels):
    return {"image/encoded": feature("bytes", [encoded]), "image/format": feature("bytes", [fmt]),
            "image/height": feature("int64", [img.shape[0]]), "image/width": feature("int64", [img.shape[1]]),
            "image/colorspace": feature("bytes", [b"RGB" if channels == 3 else b"Gray"]),
            "image/channels": feature("int64", [channels]),
            "image/class/label": feature("int64", [label + 1]),  # the tools count classes from 1
            "image/class/synset": feature("bytes", [b"n0144%04d" % label]),
            "image/class/text": feature("bytes", [b"class %d" % label]),
            "image/filename": feature("bytes", [b"img_%03d.%s" % (i, fmt.lower())])}


def make_layouts(d):
    imgs, labels = images(1)
    layouts = {}
    # float_list images under other names
    write(os.path.join(d, "floats.tfrecord"),
          [{"pixels": feature("float", (im.astype(np.float32) / 255).flatten().tolist()),
            "target": feature("int64", [lab]), "id": feature("bytes", [b"%d" % i])}
           for i, (im, lab) in enumerate(zip(imgs, labels))])
    layouts["floats"] = "x=FixedLen(pixels, float, [12,16,3]); y=FixedLen(target, int64)"
    # the ImageNet tools' layout, PNG
    pngs = [tf.io.encode_png(im).numpy() for im in imgs]
    write(os.path.join(d, "imagenet_png.tfrecord"),
          [imagenet(p, b"PNG", im, lab, i, 3) for i, (p, im, lab) in enumerate(zip(pngs, imgs, labels))])
    layouts["imagenet_png"] = "x=Image(image/encoded, channels=3); y=FixedLen(image/class/label, int64)"
    # ... JPEG: baseline and progressive, RGB and grayscale, read as RGB, resized and rescaled
    jpegs, chans = [], []
    for i, im in enumerate(imgs):
        gray = i % 5 == 4
        src = tf.image.rgb_to_grayscale(im) if gray else im
        jpegs.append(tf.io.encode_jpeg(src, quality=85, progressive=i % 2 == 1).numpy())
        chans.append(1 if gray else 3)
    examples = [imagenet(j, b"JPEG", im, lab, i, c) for i, (j, im, lab, c) in enumerate(zip(jpegs, imgs, labels, chans))]
    write(os.path.join(d, "imagenet_jpeg.tfrecord"), examples)
    write(os.path.join(d, "imagenet_jpeg.gz.tfrecord"), examples, "GZIP")
    layouts["imagenet_jpeg"] = ("x=Image(image/encoded, channels=3, resize=[8,8], rescale=0.00392156862); "
                                "y=FixedLen(image/class/label, int64)")
    layouts["imagenet_jpeg_raw"] = "x=Image(image/encoded); y=FixedLen(image/class/label, int64)"
    # variable-length int64s
    rng = np.random.default_rng(2)
    tokens = [rng.integers(1, 100, size=int(rng.integers(0, 12))).tolist() for _ in range(N)]
    write(os.path.join(d, "varlen.tfrecord"),
          [{"tokens": feature("int64", t), "label": feature("int64", [i % 2])} for i, t in enumerate(tokens)])
    layouts["varlen"] = "x=VarLen(tokens, int64, length=6, default=-1); y=FixedLen(label, int64)"
    return layouts


def tf_read(path, spec):
    """TensorFlow's own reading of what spec asks for: (x, y) as numpy."""
    if spec.startswith("x=FixedLen(pixels"):
        f = {"pixels": tf.io.FixedLenFeature([12, 16, 3], tf.float32), "target": tf.io.FixedLenFeature([], tf.int64)}
        xs, ys = "pixels", "target"
    elif spec.startswith("x=VarLen"):
        f = {"tokens": tf.io.VarLenFeature(tf.int64), "label": tf.io.FixedLenFeature([], tf.int64)}
        xs, ys = "tokens", "label"
    else:
        f = {"image/encoded": tf.io.FixedLenFeature([], tf.string),
             "image/class/label": tf.io.FixedLenFeature([], tf.int64)}
        xs, ys = "image/encoded", "image/class/label"
    x_all, y_all = [], []
    for rec in tf.data.TFRecordDataset(path):
        e = tf.io.parse_single_example(rec, f)
        x = e[xs]
        if xs == "tokens":
            dense = tf.sparse.to_dense(x, default_value=-1)[:6]
            x = tf.pad(dense, [[0, 6 - tf.shape(dense)[0]]], constant_values=-1)
        elif xs == "image/encoded":
            if "resize" in spec:
                x = tf.image.resize(tf.io.decode_image(x, channels=3), [8, 8]) * np.float32(0.00392156862)
            else:
                x = tf.io.decode_image(x)
        x_all.append(x.numpy())
        y_all.append(e[ys].numpy())
    return x_all, np.array(y_all)


def run(cmd, expect_status=0):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if p.returncode != expect_status:
        sys.exit("tfrecord_layouts: %s exited %d, expected %d:\n%s" % (" ".join(cmd), p.returncode, expect_status,
                                                                       p.stdout))
    return p.stdout


def check_layouts(test_features, d, layouts):
    for name, spec in layouts.items():
        path = os.path.join(d, name.replace("_raw", "") + ".tfrecord")
        want_x, want_y = tf_read(path, spec)
        if name == "imagenet_jpeg_raw":
            # channels 0: each image as its file has it (gray or RGB), which no batch can stack: one by one
            for i in range(len(want_x)):
                assert want_x[i].shape[2] in (1, 3)
            out = run([test_features, "--dump", path, "x=Image(image/encoded, channels=3); "
                       "y=FixedLen(image/class/label, int64)", os.path.join(d, name)])
            want_x = [tf.io.decode_image(r, channels=3).numpy() for r in
                      (tf.io.parse_single_example(rec, {"image/encoded": tf.io.FixedLenFeature([], tf.string)})
                       ["image/encoded"] for rec in tf.data.TFRecordDataset(path))]
        else:
            out = run([test_features, "--dump", path, spec, os.path.join(d, name)])
        got_x = np.load(os.path.join(d, name + "_x.npy"))
        got_y = np.load(os.path.join(d, name + "_y.npy"))
        want_x = np.stack(want_x)
        assert got_x.shape == want_x.shape, (name, got_x.shape, want_x.shape, out)
        assert got_x.dtype == want_x.dtype, (name, got_x.dtype, want_x.dtype)
        if got_x.dtype == np.float32 and "resize" in spec:
            err = float(np.max(np.abs(got_x - want_x)))
            assert err <= 1e-4, (name, "resize differs from TensorFlow's by", err)
        else:
            assert np.array_equal(got_x, want_x), (name, "values differ", np.argwhere(got_x != want_x)[:5])
        assert np.array_equal(got_y, want_y), (name, got_y, want_y)


def check_cli(systolic, d):
    model = tf.keras.Sequential([tf.keras.Input((8, 8, 3)), tf.keras.layers.Flatten(),
                                 tf.keras.layers.Dense(4, activation="softmax")])
    model_json = os.path.join(d, "model.json")
    with open(model_json, "w") as f:
        f.write(model.to_json())
    spec = ("x=Image(image/encoded, channels=3, resize=[8,8], rescale=0.00392156862); "
            "y=FixedLen(image/class/label, int64)")
    data = "tfrecord:" + os.path.join(d, "imagenet_jpeg.tfrecord")
    out = run([systolic, "train", model_json, "--data", data, "--features", spec, "--epochs", "20", "--batch-size",
               "8", "--optimizer", "adam", "--learning-rate", "0.05", "--verbose", "0",
               "--save-weights", os.path.join(d, "w.h5")])
    assert "20 epochs of 5 steps" in out, out
    spec_json = os.path.join(d, "spec.json")
    with open(spec_json, "w") as f:
        json.dump({"x": {"kind": "Image", "feature": "image/encoded", "channels": 3, "resize": [8, 8],
                         "rescale": 0.00392156862},
                   "y": {"kind": "FixedLen", "feature": "image/class/label", "dtype": "int64", "shape": []}}, f)
    out = run([systolic, "evaluate", model_json, "--data", data, "--features", spec_json, "--load-weights",
               os.path.join(d, "w.h5"), "--batch-size", "16", "--verbose", "0"])
    acc = float(out.split("sparse_categorical_accuracy: ")[1].split()[0])
    assert acc >= 0.9, ("trained on 3 separable classes, accuracy %.4f" % acc, out)
    # predict: every record once (40 with batches of 16: the last one padded, the padding left out)
    for ext in ("csv", "npy"):
        path = os.path.join(d, "pred." + ext)
        run([systolic, "predict", model_json, "--data", data, "--features", spec_json, "--load-weights",
             os.path.join(d, "w.h5"), "--batch-size", "16", "--output", path, "--verbose", "0"])
    rows = open(os.path.join(d, "pred.csv")).read().splitlines()
    assert rows[0] == "dense_0,dense_1,dense_2,dense_3", rows[0]
    assert len(rows) == N + 1, len(rows)
    csv = np.array([[float(v) for v in r.split(",")] for r in rows[1:]], dtype=np.float32)
    npy = np.load(os.path.join(d, "pred.npy"))
    assert npy.shape == (N, 4) and np.array_equal(csv, npy), "the CSV's %.9g values are the .npy's floats"
    model.load_weights(os.path.join(d, "w.h5"))
    x, _ = tf_read(os.path.join(d, "imagenet_jpeg.tfrecord"), spec)
    keras_pred = model.predict(np.stack(x), verbose=0)
    assert np.max(np.abs(keras_pred - npy)) < 1e-5, ("Keras predicts otherwise", np.max(np.abs(keras_pred - npy)))
    # refused, naming the feature, the file and the record
    bad = run([systolic, "evaluate", model_json, "--data", data, "--features",
               "x=Image(image/jpeg, channels=3, resize=[8,8]); y=FixedLen(image/class/label, int64)",
               "--verbose", "0"], 1)
    assert "image/jpeg" in bad and "imagenet_jpeg.tfrecord, record 0" in bad, bad
    bad = run([systolic, "evaluate", model_json, "--data", data, "--features",
               "x=Image(image/encoded, channels=3, resize=[8,8]); y=FixedLen(image/class/label, float)",
               "--verbose", "0"], 1)
    assert "image/class/label" in bad and "record 0" in bad, bad
    gz = "tfrecord:" + os.path.join(d, "imagenet_jpeg.gz.tfrecord")
    bad = run([systolic, "train", model_json, "--data", gz, "--features", spec, "--verbose", "0"], 1)
    assert "looks GZIP-compressed" in bad and "--data-compression GZIP" in bad, bad
    out = run([systolic, "evaluate", model_json, "--data", gz, "--data-compression", "GZIP", "--features", spec,
               "--load-weights", os.path.join(d, "w.h5"), "--verbose", "0"])
    assert ("sparse_categorical_accuracy: %.4f" % acc) in out, out


def main():
    test_features, systolic, d = sys.argv[1:4]
    layouts = make_layouts(d)
    check_layouts(test_features, d, layouts)
    check_cli(systolic, d)
    print("tfrecord_layouts: %d layouts written by TensorFlow %s read as TensorFlow reads them, then trained, evaluated "
          "and predicted" % (len(layouts), tf.__version__))
    return 0


if __name__ == "__main__":
    sys.exit(main())
