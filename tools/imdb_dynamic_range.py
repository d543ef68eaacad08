#!/usr/bin/env python3
"""imdb_dynamic_range.py - IMDB test accuracy of a float Keras model and of
dynamic-range .tflite files, by TensorFlow (bench/imdb_dynamic_range.sh,
issue 18 point 3, docs/benchmarks.md).

  python tools/imdb_dynamic_range.py MODEL.h5 [FILE.tflite ...] [--converter OUT.tflite] [--rows N]

The 25,000 test reviews are rebuilt from $SYSTOLIC_DATASETS/imdb (the
labelled review archive and Keras's word index) as systolic's
--dataset imdb and the Keras tutorial prepare them: words in the index,
start character 1, index_from 3, ids from the model's vocabulary on (its
Embedding's input_dim) the out-of-vocabulary 2, padded and cut at the front
to the model's input length. Order does not matter to an accuracy.

Prints the float model's accuracy (Keras, model.predict), then for each
FILE and for the converter's own dynamic-range file of MODEL.h5
(TFLiteConverter, optimizations=[DEFAULT], no representative dataset,
traced for a batch of 1; written to --converter when given) tf.lite.Interpreter's accuracy and
binary crossentropy, and the change from the float model in points.
"""

import argparse
import json
import os
import sys
import tarfile

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from imdb_test_values import ascii_lower_words  # noqa: E402


def test_split(num_words, maxlen, rows):
    root = os.path.join(os.environ.get("SYSTOLIC_DATASETS", os.path.join("..", "shared", "datasets")), "imdb")
    with open(os.path.join(root, "imdb_word_index.json")) as f:
        index = json.load(f)
    xs, ys = [], []
    with tarfile.open(os.path.join(root, "aclImdb_v1_labeled.tar.gz")) as t:
        for m in t:
            parts = m.name.split("/")
            if not m.isfile() or len(parts) != 4 or parts[1] != "test" or parts[2] not in ("pos", "neg"):
                continue
            seq = [index[w] for w in ascii_lower_words(t.extractfile(m).read().decode("utf-8")) if w in index]
            seq = [1] + [w + 3 if w + 3 < num_words else 2 for w in seq]
            xs.append(seq)
            ys.append(int(parts[2] == "pos"))
    x = tf.keras.utils.pad_sequences(xs, maxlen=maxlen).astype(np.int32)
    y = np.array(ys, np.float32)
    if rows:
        x, y = x[:rows], y[:rows]
    return x, y


def scores(p, y):
    p = np.asarray(p, np.float64).reshape(-1)
    eps = 1e-7
    q = np.clip(p, eps, 1 - eps)
    loss = -np.mean(y * np.log(q + eps) + (1 - y) * np.log(1 - q + eps))
    return float(np.mean((p > 0.5) == (y > 0.5))), float(loss)


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dynamic_range_check import convert, run as interpret  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("h5")
    p.add_argument("tflite", nargs="*")
    p.add_argument("--converter", help="where to write the converter's file (default: a temporary one)")
    p.add_argument("--rows", type=int, default=0, help="the first N test reviews only (0: all 25,000)")
    a = p.parse_args()
    model = tf.keras.models.load_model(a.h5, compile=False)
    emb = next(layer for layer in model.layers if isinstance(layer, tf.keras.layers.Embedding))
    x, y = test_split(emb.input_dim, model.input_shape[1], a.rows)
    acc_f, loss_f = scores(model.predict(x, batch_size=250, verbose=0), y)
    print("float (Keras):                     accuracy %.4f  loss %.4f  (%d reviews)" % (acc_f, loss_f, len(y)))
    path = a.converter or os.path.join(os.path.dirname(os.path.abspath(a.h5)), "converter_dynamic_range.tflite")
    with open(path, "wb") as f:
        f.write(convert(model))
    for f in a.tflite + [path]:
        acc, loss = scores(interpret(f, x), y)
        print("%-34s accuracy %.4f  loss %.4f  (%+.2f points, %d bytes)" % (
            os.path.basename(f) + " (interpreter):", acc, loss, 100 * (acc - acc_f), os.path.getsize(f)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
