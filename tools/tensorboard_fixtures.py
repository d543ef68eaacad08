#!/usr/bin/env python3
"""tensorboard_fixtures.py - an event file written by TensorFlow's own
summary writer, for tests/test_events.c, which re-encodes every record
with systolic's writer (src/io/events.c) and compares the bytes, so the
comparison runs without TensorFlow.

    .gl/bin/python tools/tensorboard_fixtures.py      (TensorFlow 2.15: make bench-deps)

Writes, into tests/data/events/:

  tensorflow.tfevents
      tf.summary.create_file_writer's file, holding its first event
      (file_version) and the SCALARS below through tf.summary.scalar, as
      Keras's TensorBoard callback writes them;
  tensorflow_name.txt
      the name TensorFlow gave that file, with its host name and process id
      replaced by HOST and PID (test_events checks systolic's names have
      the same form).

The values are float32, as tf.summary.scalar stores them: the test gives
the same tags, steps and values to systolic's writer and expects the same
bytes, each record's wall_time taken from TensorFlow's.
"""
import glob
import os
import shutil
import socket
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402

# (tag, step, value): test_events.c's tf_scalars[] holds the same list.
SCALARS = [
    ("epoch_loss", 0, 0.5),
    ("epoch_sparse_categorical_accuracy", 0, 0.8125),
    ("epoch_learning_rate", 0, 0.001),
    ("epoch_loss", 1, 0.25),
    ("batch_loss", 7, 1.0e-8),
    ("evaluation_loss_vs_iterations", 600, -3.75),
    ("a/b c", 123456789012, 3.0e38),
    ("inf", 2, float("inf")),
]


def main():
    out = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "data", "events")
    os.makedirs(out, exist_ok=True)
    tmp = tempfile.mkdtemp()
    try:
        writer = tf.summary.create_file_writer(tmp)
        with writer.as_default():
            for tag, step, value in SCALARS:
                tf.summary.scalar(tag, value, step=step)
        writer.close()
        (path,) = glob.glob(os.path.join(tmp, "events.out.tfevents.*"))
        shutil.copyfile(path, os.path.join(out, "tensorflow.tfevents"))
        name = os.path.basename(path).replace("." + socket.gethostname() + ".", ".HOST.", 1)
        name = name.replace(".%d." % os.getpid(), ".PID.", 1)
        with open(os.path.join(out, "tensorflow_name.txt"), "w") as f:
            f.write(name + "\n")
        print("TensorFlow %s wrote %s (%d bytes) -> %s" % (tf.__version__, name, os.path.getsize(path), out))
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    sys.exit(main())
