#!/usr/bin/env python3
"""dynamic_range_check.py - systolic's dynamic-range .tflite file beside
TFLiteConverter's, made from the same Keras weights, both run by
tf.lite.Interpreter (tests/dynamic_range_tensorflow.sh,
bench/imdb_dynamic_range.sh, docs/design/tflite.md "Dynamic-range
quantization").

  python tools/dynamic_range_check.py --make MODEL.h5 X.npy [--vocab V --length T --units U --dim D --seed S --rows N]
  python tools/dynamic_range_check.py MODEL.h5 SYSTOLIC.tflite DIR --x X.npy

--make writes a seeded Keras model Embedding(V, D, input_length=T) ->
LSTM(U) -> Dense(1, sigmoid) (weights drawn apart from their initial
values, biases nonzero) as MODEL.h5 and N rows of word ids (int32, some
0-padded as pad_sequences pads) as X.npy.

The check has TensorFlow's converter quantize MODEL.h5 with
optimizations=[DEFAULT] and no representative dataset (traced for a batch
of 1, as TensorFlow's guide to fused Keras LSTMs converts one) into
DIR/tensorflow.tflite, then, exiting 1 on any failure:

  structure   the same operators in the same order with the same options
              (asymmetric_quantize_inputs, the fused activation), the same
              tensor types and shapes, the same variable tensors
  weights     each int8 weight tensor's scales equal to the converter's
              (relative 1e-6: both are max|w| / 127 rounded to float32), zero
              points 0, the int8 values within 1 of the converter's (and how
              many are equal, printed); float weights bit for bit
  outputs     tf.lite.Interpreter's outputs on X for both files, written to
              DIR/tensorflow_y.npy and DIR/systolic_y.npy (a row at a time,
              the file's batch, from fresh LSTM states: reset_all_variables()),
              and the float Keras model's to DIR/keras_y.npy; the two files'
              outputs within 1e-6 of each other, printed with their distance
              from the float model's
"""

import argparse
import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402
from tensorflow.lite.python import schema_py_generated as S  # noqa: E402


def make(a):
    L = tf.keras.layers
    tf.keras.utils.set_random_seed(a.seed)
    first = [tf.keras.Input(shape=(a.length,), dtype="int32")] if a.int_input else []
    m = tf.keras.Sequential(first + [L.Embedding(a.vocab, a.dim, input_length=a.length), L.LSTM(a.units),
                                     L.Dense(1, activation="sigmoid")])
    m.build((None, a.length))
    rng = np.random.default_rng(a.seed)
    for layer in m.layers:  # as trained weights are: spread, nonzero biases
        layer.set_weights([w * 3 if w.ndim > 1 else rng.normal(0, 0.3, w.shape).astype(np.float32)
                           for w in layer.get_weights()])
    m.save(a.out, save_format="h5")
    x = rng.integers(1, a.vocab, (a.rows, a.length)).astype(np.int32)
    for i in range(0, a.rows, 3):  # pad_sequences's zeros in front of a short review
        x[i, :rng.integers(0, a.length)] = 0
    np.save(a.x_out, x)


def names(cls):
    return {v: k for k, v in cls.__dict__.items() if not k.startswith("_")}


OPS, TYPES = names(S.BuiltinOperator), names(S.TensorType)


def model_of(path):
    with open(path, "rb") as f:
        buf = f.read()
    return S.ModelT.InitFromObj(S.Model.GetRootAsModel(buf, 0))


def convert(model):
    """TFLiteConverter's dynamic-range file of a Keras model with an LSTM. from_keras_model cannot convert one
    with a free batch axis (the LSTM's TensorList ops need static shapes), so, as TensorFlow's guide to fused
    Keras LSTMs does, the model is traced for a batch of 1."""
    fn = tf.function(lambda x: model(x))
    spec = tf.TensorSpec([1] + list(model.input_shape[1:]), model.inputs[0].dtype)
    conv = tf.lite.TFLiteConverter.from_concrete_functions([fn.get_concrete_function(spec)], model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    return conv.convert()


def run(path, x):
    """The interpreter's outputs, one row at a time (the file's batch is 1: its LSTM states are (1, units)
    variable tensors), the states reset to zero before each row, as a Keras model starts every sequence."""
    it = tf.lite.Interpreter(model_path=path)
    it.allocate_tensors()
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    ys = []
    for row in x:
        it.reset_all_variables()
        it.set_tensor(inp["index"], row[None].astype(inp["dtype"]))
        it.invoke()
        ys.append(it.get_tensor(out["index"]).copy())
    return np.concatenate(ys)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--make":
        p = argparse.ArgumentParser()
        p.add_argument("--make", dest="out")
        p.add_argument("x_out")
        for k, v in (("vocab", 1000), ("length", 20), ("units", 32), ("dim", 32), ("seed", 18), ("rows", 64)):
            p.add_argument("--" + k, type=int, default=v)
        p.add_argument("--int-input", action="store_true", help="an Input(dtype='int32') first: no CAST in the file")
        make(p.parse_args())
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("h5")
    p.add_argument("systolic")
    p.add_argument("dir")
    p.add_argument("--x", required=True)
    p.add_argument("--tolerance", type=float, default=1e-6)
    a = p.parse_args()
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)
            print("FAIL: " + what)

    model = tf.keras.models.load_model(a.h5, compile=False)
    tf_path = os.path.join(a.dir, "tensorflow.tflite")
    with open(tf_path, "wb") as f:
        f.write(convert(model))

    ms, mt = model_of(a.systolic), model_of(tf_path)
    gs, gt = ms.subgraphs[0], mt.subgraphs[0]
    ops_s = [OPS[ms.operatorCodes[o.opcodeIndex].builtinCode] for o in gs.operators]
    ops_t = [OPS[mt.operatorCodes[o.opcodeIndex].builtinCode] for o in gt.operators]
    check(ops_s == ops_t, "operators: systolic %s, TFLiteConverter %s" % (ops_s, ops_t))
    weights = exact = int8_weights = 0
    if ops_s == ops_t:
        for k, (os_, ot) in enumerate(zip(gs.operators, gt.operators)):
            opt_s, opt_t = os_.builtinOptions, ot.builtinOptions
            for field in ("asymmetricQuantizeInputs", "fusedActivationFunction", "timeMajor", "cellClip", "beginMask",
                          "endMask", "shrinkAxisMask", "axis"):
                vs, vt = getattr(opt_s, field, None), getattr(opt_t, field, None)
                check(vs == vt, "op %d %s: option %s %r, converter's %r" % (k, ops_s[k], field, vs, vt))
            ins_s, ins_t = list(os_.inputs), list(ot.inputs)
            check(len(ins_s) == len(ins_t), "op %d %s: %d inputs, converter's %d" % (k, ops_s[k], len(ins_s), len(ins_t)))
            for j, (i_s, i_t) in enumerate(zip(ins_s, ins_t)):
                if (i_s < 0) != (i_t < 0):
                    check(False, "op %d %s input %d present in one file only" % (k, ops_s[k], j))
                    continue
                if i_s < 0:
                    continue
                ts, tt = gs.tensors[i_s], gt.tensors[i_t]
                what = "op %d %s input %d ('%s')" % (k, ops_s[k], j, tt.name.decode())
                check(ts.type == tt.type and list(ts.shape) == list(tt.shape) and ts.isVariable == tt.isVariable,
                      "%s: %s %s variable %s, converter's %s %s %s" % (what, TYPES[ts.type], list(ts.shape),
                                                                       ts.isVariable, TYPES[tt.type], list(tt.shape),
                                                                       tt.isVariable))
                ds, dt = ms.buffers[ts.buffer].data, mt.buffers[tt.buffer].data
                if ts.type != tt.type or ds is None or dt is None or ts.isVariable:
                    continue
                weights += 1
                if tt.type == S.TensorType.INT8:
                    int8_weights += 1
                    qs, qt = ts.quantization, tt.quantization
                    ss, st = np.array(qs.scale, np.float64), np.array(qt.scale, np.float64)
                    check(ss.shape == st.shape and qs.quantizedDimension == qt.quantizedDimension,
                          "%s: %d scales (dimension %d), converter's %d (%d)" % (
                              what, ss.size, qs.quantizedDimension, st.size, qt.quantizedDimension))
                    if ss.shape == st.shape:
                        check(np.max(np.abs(ss / st - 1)) <= 1e-6, "%s: scales differ by %g" % (
                            what, np.max(np.abs(ss / st - 1))))
                        check(not np.any(qs.zeroPoint), what + ": zero points not 0")
                    vs = np.frombuffer(bytes(ds), np.int8).astype(np.int32)
                    vt = np.frombuffer(bytes(dt), np.int8).astype(np.int32)
                    d = np.abs(vs - vt)
                    check(d.max() <= 1, "%s: int8 values differ by up to %d" % (what, d.max()))
                    exact += int(np.sum(d == 0))
                    print("%s: int8, %d scale(s), %d of %d values equal the converter's" % (
                        what, ss.size, int(np.sum(d == 0)), d.size))
                else:
                    check(bytes(ds) == bytes(dt), "%s: float values differ" % what)
    x = np.load(a.x)
    y_t, y_s = run(tf_path, x), run(a.systolic, x)
    y_k = model.predict(x, verbose=0)
    np.save(os.path.join(a.dir, "tensorflow_y.npy"), y_t)
    np.save(os.path.join(a.dir, "systolic_y.npy"), y_s)
    np.save(os.path.join(a.dir, "keras_y.npy"), y_k.astype(np.float32))
    d = float(np.max(np.abs(y_t - y_s)))
    check(d <= a.tolerance, "tf.lite.Interpreter's outputs on the two files differ by up to %g" % d)
    print("interpreter: the two files' %d outputs within %.3g; the float Keras model's within %.3g (mean %.3g)" % (
        y_t.size, d, float(np.max(np.abs(y_t - y_k))), float(np.mean(np.abs(y_t - y_k)))))
    if failures:
        print("dynamic_range_check: %d failures" % len(failures))
        return 1
    print("dynamic_range_check: systolic's file matches TFLiteConverter's (TensorFlow %s): %s, %d weights "
          "(%d int8)" % (tf.__version__, " ".join(ops_s), weights, int8_weights))
    return 0


if __name__ == "__main__":
    sys.exit(main())
