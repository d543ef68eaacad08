#!/usr/bin/env python3
"""tfrecord_tensorflow.py DIR - TensorFlow reads the TFRecord files that
`test_tfrecord --write-for-tensorflow DIR` wrote (tests/tfrecord_tensorflow.sh
runs both): tf.data.TFRecordDataset gives exactly the records written, in
each compression, and tf.io.parse_example gives exactly the values the
Examples were built from (expected.json, in the format of the fixtures
tools/tfrecord_fixtures.py writes). Exits 1 naming every difference."""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
import tensorflow as tf  # noqa: E402
from tfrecord_fixtures import parse_with_tensorflow  # noqa: E402


def main(directory):
    with open(os.path.join(directory, "expected.json")) as f:
        expected = json.load(f)
    bad = []
    files = [("examples.tfrecord", "", "examples"), ("examples.zlib.tfrecord", "ZLIB", "examples"),
             ("examples.gzip.tfrecord", "GZIP", "examples"), ("raw.tfrecord", "", "raw")]
    for name, compression, key in files:
        path = os.path.join(directory, name)
        got = [r.numpy().hex() for r in tf.data.TFRecordDataset(path, compression_type=compression)]
        if got != expected[key]:
            bad.append("%s: TFRecordDataset read %d records, %d differ from the %d written"
                       % (name, len(got), sum(a != b for a, b in zip(got, expected[key])), len(expected[key])))
    examples = [bytes.fromhex(h) for h in expected["examples"]]
    parsed = parse_with_tensorflow(examples, expected["specs"])
    for spec in expected["specs"]:
        k = spec["key"]
        for part in ("values", "row_splits", "shape"):
            if expected["parsed"][k].get(part) != parsed[k].get(part):
                bad.append("tf.io.parse_example: feature '%s': %s differ: %s, written %s"
                           % (k, part, parsed[k].get(part), expected["parsed"][k].get(part)))
    for b in bad:
        print(b)
    print("TensorFlow %s read %d Examples and %d raw records written by systolic %s: %s"
          % (tf.__version__, len(examples), len(expected["raw"]), expected.get("systolic"),
             "%d differences" % len(bad) if bad else "identical"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
