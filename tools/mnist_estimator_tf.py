#!/usr/bin/env python3
"""TensorFlow's official mnist_tpu.py (tensorflow/tpu, models/official/mnist)
in TensorFlow 2.15's tf.compat.v1.estimator.tpu.TPUEstimator(use_tpu=False),
on the data examples/mnist_estimator.c trains on, for docs/benchmarks.md
(issue 19, point 4).

    SYSTOLIC_DATASETS=../shared/datasets .venv/bin/python tools/mnist_estimator_tf.py [--train_steps 1000]

The official script's model_fn, metric_fn, RunConfig(TPUConfig(iterations,
num_shards)) and TPUEstimator(use_tpu=False, batch sizes 1,024), its flags'
defaults (learning rate 0.05, iterations 50, num_shards 8, train_steps
1000) and its train_input_fn (cache, repeat, shuffle(50000), batch with
drop_remainder), unchanged; the data, as mnist_estimator.c's: the MNIST IDX
files of $SYSTOLIC_DATASETS/mnist (60,000 training images, where the
official TFRecords hold 55,000), evaluated on all 10,000 test images
(batches of 1,024, the last of 784, where the official script evaluates
eval_steps batches of its validation split). Prints TensorFlow's INFO lines
and, last, the evaluation's dict and the wall time.
"""
import argparse
import gzip
import os
import struct
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402


def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    _, _, dtype, rank = struct.unpack(">BBBB", data[:4])
    dims = struct.unpack(">" + "I" * rank, data[4:4 + 4 * rank])
    return np.frombuffer(data, np.uint8, offset=4 + 4 * rank).reshape(dims)


def load(datasets):
    d = os.path.join(datasets, "mnist")
    x_train = idx(os.path.join(d, "train-images-idx3-ubyte.gz")).reshape(-1, 28, 28, 1).astype(np.float32)
    y_train = idx(os.path.join(d, "train-labels-idx1-ubyte.gz")).astype(np.int64)
    x_test = idx(os.path.join(d, "t10k-images-idx3-ubyte.gz")).reshape(-1, 28, 28, 1).astype(np.float32)
    y_test = idx(os.path.join(d, "t10k-labels-idx1-ubyte.gz")).astype(np.int64)
    return x_train, y_train, x_test, y_test


def metric_fn(labels, logits):
    accuracy = tf.metrics.accuracy(labels=labels, predictions=tf.argmax(logits, axis=1))
    return {"accuracy": accuracy}


def model_fn_of(flags):
    def model_fn(features, labels, mode, params):
        """mnist_tpu.py's model_fn, as it is."""
        del params
        image = features / 255.
        y = tf.layers.Conv2D(filters=32, kernel_size=5, padding="same", activation="relu")(image)
        y = tf.layers.MaxPooling2D(pool_size=(2, 2), strides=(2, 2), padding="same")(y)
        y = tf.layers.Conv2D(filters=32, kernel_size=5, padding="same", activation="relu")(y)
        y = tf.layers.MaxPooling2D(pool_size=(2, 2), strides=(2, 2), padding="same")(y)
        y = tf.layers.Flatten()(y)
        y = tf.layers.Dense(1024, activation="relu")(y)
        y = tf.layers.Dropout(0.4)(y, training=(mode == tf.estimator.ModeKeys.TRAIN))
        logits = tf.layers.Dense(10)(y)
        if mode == tf.estimator.ModeKeys.PREDICT:
            predictions = {"class_ids": tf.argmax(logits, axis=1), "probabilities": tf.nn.softmax(logits)}
            return tf.estimator.tpu.TPUEstimatorSpec(mode, predictions=predictions)
        loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
        if mode == tf.estimator.ModeKeys.TRAIN:
            learning_rate = tf.train.exponential_decay(flags.learning_rate, tf.train.get_global_step(),
                                                       decay_steps=100000, decay_rate=0.96)
            optimizer = tf.train.GradientDescentOptimizer(learning_rate=learning_rate)
            if flags.use_tpu:
                optimizer = tf.tpu.CrossShardOptimizer(optimizer)
            return tf.estimator.tpu.TPUEstimatorSpec(
                mode=mode, loss=loss, train_op=optimizer.minimize(loss, tf.train.get_global_step()))
        return tf.estimator.tpu.TPUEstimatorSpec(mode=mode, loss=loss, eval_metrics=(metric_fn, [labels, logits]))
    return model_fn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train_steps", type=int, default=1000)
    ap.add_argument("--batch_size", type=int, default=1024)
    ap.add_argument("--learning_rate", type=float, default=0.05)
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--num_shards", type=int, default=8)
    ap.add_argument("--model_dir", default=None)
    flags = ap.parse_args()
    flags.use_tpu = False
    x_train, y_train, x_test, y_test = load(os.environ.get("SYSTOLIC_DATASETS", "../shared/datasets"))

    def train_input_fn(params):
        d = tf.data.Dataset.from_tensor_slices((x_train, y_train))
        return d.cache().repeat().shuffle(buffer_size=50000).batch(params["batch_size"], drop_remainder=True)

    def eval_input_fn(params):
        return tf.data.Dataset.from_tensor_slices((x_test, y_test)).batch(params["batch_size"])

    tf.logging.set_verbosity(tf.logging.INFO)
    model_dir = flags.model_dir or tempfile.mkdtemp(prefix="mnist-estimator-tf-")
    run_config = tf.estimator.tpu.RunConfig(model_dir=model_dir,
                                            tpu_config=tf.estimator.tpu.TPUConfig(flags.iterations, flags.num_shards))
    estimator = tf.estimator.tpu.TPUEstimator(model_fn=model_fn_of(flags), use_tpu=False,
                                              train_batch_size=flags.batch_size, eval_batch_size=flags.batch_size,
                                              predict_batch_size=flags.batch_size, config=run_config)
    start = time.time()
    estimator.train(input_fn=train_input_fn, max_steps=flags.train_steps)
    trained = time.time()
    results = estimator.evaluate(input_fn=eval_input_fn)
    print("tensorflow %s: %s; train %.0f s, evaluate %.0f s" % (tf.__version__ if hasattr(tf, "__version__") else "",
                                                                  results, trained - start, time.time() - trained))


if __name__ == "__main__":
    sys.exit(main())
