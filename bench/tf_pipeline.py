#!/usr/bin/env python3
"""tf_pipeline.py - tf.data beside bench_pipeline's pipeline alone.

The same work on the same files: the TFRecord files bench_pipeline wrote
(`build/bench/bench_pipeline --dir DIR` keeps them), read one after another
-> zip with range -> shuffle(10,000) -> map(parse the Example, decode the
bytes to float32, normalise to [0, 1], flip left-right when a hash of the
element's number says so; AUTOTUNE) -> batch(1,000, drop_remainder) ->
repeat -> prefetch(AUTOTUNE). Prints elements/s over 20 batches after one,
best of 3, as bench_pipeline does for its own.

    .gl/bin/python bench/tf_pipeline.py DIR
"""
import glob
import os
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402

BATCH = 1000
BATCHES = 20


def main():
    files = sorted(glob.glob(os.path.join(sys.argv[1], "train-*.tfrecord")))
    if not files:
        sys.exit(f"tf_pipeline: no train-*.tfrecord in {sys.argv[1]}")
    spec = {"image": tf.io.FixedLenFeature([], tf.string), "label": tf.io.FixedLenFeature([], tf.int64)}

    def parse(record, number):
        f = tf.io.parse_single_example(record, spec)
        x = tf.reshape(tf.cast(tf.io.decode_raw(f["image"], tf.uint8), tf.float32) / 255.0, (28, 28, 1))
        # bench_pipeline flips by a hash of the number; any fair coin per
        # element costs the same here.
        flip = tf.random.stateless_uniform([], seed=tf.stack([number, tf.constant(0x5EED, tf.int64)])) < 0.5
        x = tf.where(flip, tf.reverse(x, axis=[1]), x)
        return x, f["label"]

    d = tf.data.Dataset.zip((tf.data.TFRecordDataset(files), tf.data.Dataset.range(2**62)))
    d = d.shuffle(10000, seed=1).map(parse, num_parallel_calls=tf.data.AUTOTUNE)
    d = d.batch(BATCH, drop_remainder=True).repeat().prefetch(tf.data.AUTOTUNE)
    it = iter(d)
    best = 0.0
    for _ in range(3):
        next(it)
        t0 = time.perf_counter()
        for _ in range(BATCHES):
            next(it)
        best = max(best, BATCHES * BATCH / (time.perf_counter() - t0))
    print(f"  tf.data {tf.__version__}, the same pipeline alone: {best:.0f} samples/s")


if __name__ == "__main__":
    main()
