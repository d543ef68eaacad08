#!/usr/bin/env python3
"""tfrecord_fixtures.py - TFRecord files and tf.train.Examples written by
TensorFlow, with what TensorFlow reads back from them, for
tests/test_tfrecord.c (so the read side of the interop test runs without
TensorFlow), and the fuzzers' seeds.

    .gl/bin/python tools/tfrecord_fixtures.py      (TensorFlow 2.15: make bench-deps)

Writes, into tests/data/tfrecord/:

  examples.tfrecord, examples.zlib.tfrecord, examples.gzip.tfrecord
      the same 12 tf.train.Examples, by tf.io.TFRecordWriter with
      compression "", "ZLIB" and "GZIP";
  raw.tfrecord
      records that are not Examples: empty, one byte, 3,000 bytes, ...;
  expected.json
      "examples": the serialized Examples (hex), "specs": a feature spec
      (tf.io.FixedLenFeature / VarLenFeature), "parsed": what
      tf.io.parse_example gives for it (fixed-length features flat with
      their shape, variable-length ones as values and row splits), "raw":
      the raw records (hex);
  wire_cases.json
      Examples encoded the ways protobuf allows but TensorFlow's writers
      never use (fields out of order or repeated, unknown fields, packed
      and unpacked lists mixed, messages given twice) and damaged ones,
      each with what Python's protobuf reads in feature 'x' (kind and
      values) or that it refuses the bytes, and what TensorFlow's own
      parse_example gives where it differs.

Floats are written as their IEEE bit patterns (uint32), so NaN, -0.0 and
infinities compare exactly; bytes as hex. And into tests/fuzz/corpus/:
the TFRecord files (fuzz_tfrecord) and the Examples (fuzz_example).
"""
import json
import os
import struct
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# The oracle for the wire cases is protobuf's pure-Python parser, which
# follows the language guide; upb (the default) drops a map entry that
# holds an unknown field, which C++ protobuf and the guide keep.
os.environ["PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION"] = "python"
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.core.example import example_pb2  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "tfrecord")
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")

I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def bits(values):
    """float32 values as their uint32 bit patterns."""
    return np.asarray(values, dtype=np.float32).reshape(-1).view(np.uint32).tolist()


def feature(kind, values):
    if kind == "float32":
        return tf.train.Feature(float_list=tf.train.FloatList(value=values))
    if kind == "int64":
        return tf.train.Feature(int64_list=tf.train.Int64List(value=values))
    return tf.train.Feature(bytes_list=tf.train.BytesList(value=values))


def make_examples():
    """12 Examples with fixed and variable-length features of every type,
    some absent, some empty, and the values that test the edges."""
    rng = np.random.RandomState(20240)
    edge_floats = [0.0, -0.0, float("inf"), float("-inf"), float("nan"), 1e-45, 3.4028235e38, -1.5]
    edge_ints = [0, -1, 1, I64_MIN, I64_MAX, 127, 128, -129, 2**31, -(2**31) - 1]
    edge_bytes = [b"", b"\x00", b"\xff\xfe", b"caf\xc3\xa9", b"a\x00b", b"x" * 200]
    examples = []
    for i in range(12):
        f = {
            "label": feature("int64", [int(rng.randint(0, 10))]),
            "pixels": feature("float32", rng.standard_normal(6).astype(np.float32).tolist()),
            "name": feature("string", [("example-%d" % i).encode()]),
        }
        if i % 3 != 1:  # absent in a third: the default 0.5
            f["score"] = feature("float32", [float(np.float32(rng.uniform()))])
        if i % 4 != 3:  # absent in a quarter
            n = [0, 1, 3, 8][i % 4]
            vals = [edge_floats[(i + k) % len(edge_floats)] for k in range(n)]
            f["weights"] = feature("float32", vals)
        n = i % 5
        f["ids"] = feature("int64", [edge_ints[(i * 3 + k) % len(edge_ints)] for k in range(n)])
        if i % 2 == 0:
            f["tags"] = feature("string", [edge_bytes[(i + k) % len(edge_bytes)] for k in range(i % 4 + 1)])
        examples.append(tf.train.Example(features=tf.train.Features(feature=f)).SerializeToString())
    return examples


SPECS = [
    {"key": "label", "kind": "fixed", "dtype": "int64", "shape": []},
    {"key": "pixels", "kind": "fixed", "dtype": "float32", "shape": [2, 3]},
    {"key": "name", "kind": "fixed", "dtype": "string", "shape": []},
    {"key": "score", "kind": "fixed", "dtype": "float32", "shape": [], "default": [0.5]},
    {"key": "weights", "kind": "var", "dtype": "float32"},
    {"key": "ids", "kind": "var", "dtype": "int64"},
    {"key": "tags", "kind": "var", "dtype": "string"},
]


def tf_spec(s):
    dtype = {"float32": tf.float32, "int64": tf.int64, "string": tf.string}[s["dtype"]]
    if s["kind"] == "var":
        return tf.io.VarLenFeature(dtype)
    default = s.get("default")
    if default is not None:
        default = np.asarray(default, dtype=dtype.as_numpy_dtype).reshape(s["shape"])
    return tf.io.FixedLenFeature(s["shape"], dtype, default_value=default)


def encode(dtype, values):
    if dtype == "string":  # as objects: numpy's bytes arrays drop trailing NULs
        return [bytes(v).hex() for v in np.asarray(values, dtype=object).reshape(-1)]
    values = np.asarray(values).reshape(-1)
    if dtype == "float32":
        return bits(values)
    return [int(v) for v in values]


def parse_with_tensorflow(examples, specs):
    """tf.io.parse_example on the batch, as JSON."""
    parsed = tf.io.parse_example(tf.constant(examples), {s["key"]: tf_spec(s) for s in specs})
    out = {}
    for s in specs:
        t = parsed[s["key"]]
        if s["kind"] == "var":
            rows = t.indices.numpy()[:, 0]
            counts = np.bincount(rows, minlength=len(examples))
            splits = np.concatenate([[0], np.cumsum(counts)]).tolist()
            out[s["key"]] = {"values": encode(s["dtype"], t.values.numpy()), "row_splits": splits}
        else:
            out[s["key"]] = {"values": encode(s["dtype"], t.numpy()), "shape": list(t.shape)}
    return out


def write_records(path, records, compression):
    with tf.io.TFRecordWriter(path, options=tf.io.TFRecordOptions(compression_type=compression)) as w:
        for r in records:
            w.write(r)
    back = [r.numpy() for r in tf.data.TFRecordDataset(path, compression_type=compression)]
    assert back == list(records), path


# ---- wire cases: protobuf's reading of odd and damaged encodings -------------------------


def varint(n):
    n &= 2**64 - 1
    out = b""
    while True:
        b, n = n & 0x7F, n >> 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def ld(field, payload):
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def floats(*xs):
    return ld(1, b"".join(struct.pack("<f", x) for x in xs))


def int64s(*xs):
    return ld(1, b"".join(varint(x) for x in xs))


def entry(key, feat, extra=b""):
    return ld(1, key) + ld(2, feat) + extra


def example(*entries, extra=b""):
    return ld(1, b"".join(ld(1, e) for e in entries)) + extra


def wire_cases():
    f32 = lambda x: struct.pack("<f", x)  # noqa: E731
    fx = lambda *v: ld(2, floats(*v))  # noqa: E731  a float_list Feature member
    ix = lambda *v: ld(3, int64s(*v))  # noqa: E731
    bx = lambda *v: ld(1, b"".join(ld(1, b) for b in v))  # noqa: E731
    cases = {
        "floats": example(entry(b"x", fx(1.0, 2.5))),
        "int64s": example(entry(b"x", ix(-3, 0, I64_MAX))),
        "bytes": example(entry(b"x", bx(b"", b"ab", b"\x00"))),
        "empty_float_list": example(entry(b"x", ld(2, b""))),
        "other_key": example(entry(b"y", fx(1.0))),
        "empty_example": b"",
        "empty_features": ld(1, b""),
        "same_kind_twice": example(entry(b"x", fx(1.0) + fx(2.0))),
        "kind_switch": example(entry(b"x", fx(1.0) + ix(5))),
        "kind_switch_back": example(entry(b"x", ix(5) + fx(1.0) + fx(2.0))),
        "value_twice": example(entry(b"x", fx(1.0), extra=ld(2, fx(2.0)))),
        "value_before_key": example(ld(2, fx(3.0)) + ld(1, b"x")),
        "key_twice": example(ld(1, b"y") + ld(1, b"x") + ld(2, fx(4.0))),
        "features_twice": ld(1, ld(1, entry(b"x", fx(1.0)))) + ld(1, ld(1, entry(b"y", fx(2.0)))),
        "duplicate_key": example(entry(b"x", fx(1.0)), entry(b"x", ix(7))),
        "duplicate_key_across_features": ld(1, ld(1, entry(b"x", fx(1.0)))) + ld(1, ld(1, entry(b"x", fx(9.0)))),
        "mixed_packed_floats": example(entry(b"x", ld(2, floats(1.0) + b"\x0d" + f32(2.0) + floats(3.0)))),
        "unpacked_int64s": example(entry(b"x", ld(3, b"\x08\x05\x08\x7f" + int64s(9)))),
        "unknown_fields": ld(7, b"junk") + example(entry(b"x", fx(1.0) + b"\x20\x01", extra=b"\x18\x01"),
                                                      extra=b"\x29" + b"\0" * 8 + b"\x35" + b"\0" * 4),
        "unknown_in_list": example(entry(b"x", ld(2, floats(1.0) + b"\x10\x05" + ld(3, b"zz")))),
        "wrong_wire_type_known_field": ld(1, b"\x08\x01" + ld(1, entry(b"x", ld(2, b"\x08\x01" + floats(1.0))))),
        "big_field_number": varint((2**29 - 1) << 3) + b"\x01" + example(entry(b"x", fx(1.0))),
        "entry_without_value": example(ld(1, b"x")),
        "feature_without_kind": example(entry(b"x", b"")),
        "negative_int64": example(entry(b"x", ix(-1, I64_MIN))),
        "varint_overflow_bits": example(entry(b"x", ld(3, ld(1, b"\xff" * 9 + b"\x7f")))),
        # damaged
        "truncated": example(entry(b"x", fx(1.0, 2.0)))[:-1],
        "length_past_end": b"\x0a\x05\x0a\x03",
        "truncated_varint": b"\x0a",
        "varint_11_bytes": example(entry(b"x", ld(3, ld(1, b"\xff" * 10 + b"\x01")))),
        "packed_floats_not_multiple_of_4": example(entry(b"x", ld(2, ld(1, b"\x00\x00\x80")))),
        "truncated_fixed32": example(entry(b"x", ld(2, b"\x0d\x00\x00"))),
        "field_number_0": b"\x02\x00",
        "wire_type_7": b"\x0f",
        "group": example(entry(b"x", fx(1.0)), extra=b"\x1b\x1c"),
    }
    # Where TensorFlow's fast parser refuses what protobuf accepts, systolic
    # sides with TensorFlow (groups: no writer of Examples makes them).
    refuse = {"group"}
    out = []
    for name, data in cases.items():
        case = {"name": name, "hex": data.hex()}
        try:
            ex = example_pb2.Example.FromString(data)
            feats = ex.features.feature
            if "x" not in feats or feats["x"].WhichOneof("kind") is None:
                case["kind"], case["values"] = "none", []
            else:
                kind = feats["x"].WhichOneof("kind")
                vals = list(getattr(feats["x"], kind).value)
                case["kind"] = {"float_list": "float32", "int64_list": "int64", "bytes_list": "string"}[kind]
                case["values"] = encode(case["kind"], vals) if vals else []
        except Exception:  # protobuf refuses the bytes
            case["error"] = True
        if name in refuse:
            case.pop("kind", None), case.pop("values", None)
            case["error"] = True
            case["note"] = "protobuf skips the group; TensorFlow's parse_example refuses it, as systolic does"
        tf_read = []
        for dtype in (tf.float32, tf.int64, tf.string):
            try:
                v = tf.io.parse_single_example(data, {"x": tf.io.VarLenFeature(dtype)})["x"].values.numpy()
                tf_read.append(encode(dtype.name, v) if len(v) else [])
            except tf.errors.InvalidArgumentError:
                tf_read.append(None)
        kinds = ["float32", "int64", "string"]
        agrees = ("error" in case and tf_read == [None, None, None]) or (
            "error" not in case and all(tf_read[k] == (case["values"] if case["kind"] in (kinds[k], "none") else None)
                                        for k in range(3)))
        if not agrees:
            case["tensorflow"] = {kinds[k]: tf_read[k] for k in range(3)}
        out.append(case)
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    examples = make_examples()
    for name, comp in (("examples.tfrecord", ""), ("examples.zlib.tfrecord", "ZLIB"), ("examples.gzip.tfrecord", "GZIP")):
        write_records(os.path.join(OUT, name), examples, comp)
    rng = np.random.RandomState(7)
    raw = [b"", b"\x00", bytes(rng.randint(0, 256, 3000, dtype=np.uint8)), b"TFRecord", b"\xff" * 17]
    write_records(os.path.join(OUT, "raw.tfrecord"), raw, "")
    expected = {
        "tensorflow": tf.__version__,
        "examples": [e.hex() for e in examples],
        "specs": SPECS,
        "parsed": parse_with_tensorflow(examples, SPECS),
        "raw": [r.hex() for r in raw],
    }
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    cases = wire_cases()
    with open(os.path.join(OUT, "wire_cases.json"), "w") as f:
        json.dump({"protobuf": __import__("google.protobuf").protobuf.__version__, "cases": cases}, f, indent=1)
        f.write("\n")

    for target in ("fuzz_tfrecord", "fuzz_example"):
        os.makedirs(os.path.join(CORPUS, target), exist_ok=True)
    for name in ("examples.tfrecord", "examples.zlib.tfrecord", "examples.gzip.tfrecord", "raw.tfrecord"):
        with open(os.path.join(OUT, name), "rb") as src, open(os.path.join(CORPUS, "fuzz_tfrecord", name), "wb") as dst:
            dst.write(src.read())
    for i in (0, 2, 5):
        with open(os.path.join(CORPUS, "fuzz_example", "example-%d.pb" % i), "wb") as f:
            f.write(examples[i])
    for c in cases:
        with open(os.path.join(CORPUS, "fuzz_example", "wire-%s.pb" % c["name"]), "wb") as f:
            f.write(bytes.fromhex(c["hex"]))
    differ = [c["name"] for c in cases if "tensorflow" in c]
    print("wrote %s: %d examples, %d raw records, %d wire cases (TensorFlow's parser differs from protobuf on: %s)"
          % (OUT, len(examples), len(raw), len(cases), ", ".join(differ) or "none"))


if __name__ == "__main__":
    sys.exit(main())
