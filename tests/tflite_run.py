"""tflite_run.py - TensorFlow's side of tests/tflite_run.sh (issue 18): in DIR,
  unsupported.tflite   an int8 model with an operator systolic does not run (TANH)
  float.tflite         the same model unquantized (float32)
  cnn_eval.txt         the accuracy tf.lite.Interpreter (reference kernels) gets for
                       DIR/fashion_mnist_cnn.tflite on Fashion-MNIST's 10,000 test images,
                       fed as systolic evaluate feeds them (raw pixels, float32)
  bad_shape.npy, bad_dtype.npy  inputs of the wrong shape and dtype for the CNN

  python tests/tflite_run.py DIR FASHION_MNIST_DIR
"""
import gzip
import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tools"))
from tflite_models import convert, run  # noqa: E402

out, data = sys.argv[1], sys.argv[2]
tf.keras.utils.set_random_seed(18)
m = tf.keras.Sequential([tf.keras.layers.Dense(4, activation="tanh", input_shape=(8,))])
with open(os.path.join(out, "unsupported.tflite"), "wb") as f:
    f.write(convert(m, np.random.default_rng(18).random((8, 8), dtype="f4"), False))

with open(os.path.join(out, "float.tflite"), "wb") as f:  # no quantization at all
    f.write(tf.lite.TFLiteConverter.from_keras_model(m).convert())

with gzip.open(os.path.join(data, "t10k-images-idx3-ubyte.gz")) as f:
    x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28, 1)
with gzip.open(os.path.join(data, "t10k-labels-idx1-ubyte.gz")) as f:
    y = np.frombuffer(f.read(), np.uint8, offset=8)
x = x.astype("f4")
p = run(os.path.join(out, "fashion_mnist_cnn.tflite"), x)[0]  # the reference kernels, BUILTIN_REF
with open(os.path.join(out, "cnn_eval.txt"), "w") as f:
    # Keras's sparse_categorical_crossentropy on probabilities: scaled to sum 1, clipped to [1e-7, 1 - 1e-7]
    q = np.clip(p[np.arange(len(y)), y].astype("f8") / p.sum(axis=1, dtype="f8"), 1e-7, 1 - 1e-7)
    f.write("loss: %.4f - accuracy: %.4f\n" % (-np.log(q).mean(), np.mean(np.argmax(p, axis=1) == y)))
np.save(os.path.join(out, "bad_shape.npy"), np.zeros((2, 28, 27, 1), "f4"))
np.save(os.path.join(out, "bad_dtype.npy"), np.zeros((2, 28, 28, 1), "f8"))
