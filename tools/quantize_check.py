#!/usr/bin/env python3
"""quantize_check.py - systolic's int8 .tflite file beside TFLiteConverter's,
made from the same Keras weights and the same calibration samples, both run
by tf.lite.Interpreter (tests/quantize_tensorflow.sh, docs/design/tflite.md).

  python tools/quantize_check.py MODEL.h5 SYSTOLIC.tflite DIR --calibration-samples N [--untrained]
  python tools/quantize_check.py --make-resnet OUT.h5

MODEL.h5 is the float Fashion-MNIST model (systolic train ... --save-model);
SYSTOLIC.tflite what `systolic quantize MODEL.h5` wrote from it, calibrated
on the first N training images. This script has TensorFlow's converter
quantize the same model on the same N images (optimizations=[DEFAULT],
representative_dataset, TFLITE_BUILTINS_INT8) into DIR/tensorflow.tflite,
then checks, and exits 1 on any failure:

  structure     the same operators in the same order, the same tensor types
  weights       per-channel weight scales equal to float tolerance (rtol 1e-5),
                zero points 0; int32 biases at input scale x weight scale; the
                quantized weights and biases within 1 of the converter's
  activations   each operator output's scale within 0.5% of the converter's,
                its zero point within 1 (the ranges come from the same samples
                through two float implementations)
  accuracy      systolic's file on the 10,000 test images within 0.5 point of
                the float model (Keras), and of the converter's file
  outputs       systolic's file's probabilities within 4 quantization steps
                (4/256) of the float model's on average, its predicted class
                the converter's file's on >= 99% of the images

--make-resnet writes a ResNet-like Keras model on Fashion-MNIST's images
(BatchNormalization to fold, depthwise convolution, residual ADDs, PAD,
pooling, MEAN) with seeded weights; --untrained then skips the accuracy
against the float model.

It writes DIR/x.npy (the first 256 test images, float32) and, for each file,
DIR/NAME_y.npy: tf.lite.Interpreter's outputs on them with the reference
kernels (OpResolverType.BUILTIN_REF), what systolic's own int8 path is
compared against once it runs .tflite files.
"""

import argparse
import gzip
import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402


def fashion_mnist(split):
    root = os.environ.get("SYSTOLIC_DATASETS", os.path.join("..", "shared", "datasets"))
    d = next(os.path.join(root, s) for s in ("fashion-mnist", "fashion_mnist") if os.path.isdir(os.path.join(root, s)))
    prefix = "train" if split == "train" else "t10k"
    with gzip.open(os.path.join(d, prefix + "-images-idx3-ubyte.gz")) as f:
        x = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28, 1).astype(np.float32)
    with gzip.open(os.path.join(d, prefix + "-labels-idx1-ubyte.gz")) as f:
        y = np.frombuffer(f.read(), np.uint8, offset=8).astype(np.int64)
    return x, y


def run(path, x, reference=False, batch=1000):
    kw = {"experimental_op_resolver_type": tf.lite.experimental.OpResolverType.BUILTIN_REF} if reference else {}
    it = tf.lite.Interpreter(model_path=path, **kw)
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    ys = []
    for i in range(0, len(x), batch):
        xb = x[i:i + batch]
        it.resize_tensor_input(inp["index"], xb.shape)
        it.allocate_tensors()
        it.set_tensor(inp["index"], xb)
        it.invoke()
        ys.append(it.get_tensor(out["index"]).copy())
    return np.concatenate(ys)


def layout(path):
    """(op names, [(inputs' details, output's details)]) of the file's operators; constants' values in "value"."""
    it = tf.lite.Interpreter(model_path=path,  # no delegate: the file's own operators
                             experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN_REF)
    it.allocate_tensors()
    tensors = {t["index"]: t for t in it.get_tensor_details()}
    ops = it._get_ops_details()
    for o in ops:
        for i in o["inputs"][1:]:
            if i >= 0 and i in tensors:
                try:
                    tensors[i]["value"] = it.get_tensor(i).copy()
                except ValueError:
                    pass
    return [o["op_name"] for o in ops], [([tensors.get(i) for i in o["inputs"]], tensors[o["outputs"][0]]) for o in ops]


def resnet_small():
    """tools/tflite_models.py's ResNet-like model on Fashion-MNIST's 28x28x1: ZeroPadding2D, Conv2D without bias +
    BatchNormalization + ReLU, residual Add + ReLU, a strided block with a 1x1 shortcut, DepthwiseConv2D + BN,
    average and max pooling added, GlobalAveragePooling2D, Dense, Softmax; seeded weights, nonzero biases, BN
    statistics apart from 0 and 1 so that folding matters."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import tflite_models  # noqa: E402
    L = tf.keras.layers
    tf.keras.utils.set_random_seed(18)
    model = tflite_models.resnet_small((28, 28, 1))
    rng = np.random.default_rng(18)
    for layer in model.layers:
        w = layer.get_weights()
        if isinstance(layer, L.BatchNormalization):
            g, b, mean, var = w
            layer.set_weights([rng.uniform(0.5, 1.5, g.shape), rng.normal(0, 0.1, b.shape), rng.normal(0, 0.1, mean.shape),
                               rng.uniform(0.5, 2, var.shape)])
        elif w and len(w) == 2:  # nonzero biases, as trained ones are
            layer.set_weights([w[0], rng.normal(0, 0.05, w[1].shape)])
        # the raw 0-255 pixels: the stem scaled so that activations stay in a trained model's range
        if layer.name == "conv2d":
            layer.set_weights([w[0] / 255.0])
    return model


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--make-resnet":
        resnet_small().save(sys.argv[2])
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("h5")
    p.add_argument("systolic")
    p.add_argument("dir")
    p.add_argument("--calibration-samples", type=int, required=True)
    p.add_argument("--untrained", action="store_true", help="a model with random weights: its accuracy is not checked")
    p.add_argument("--int8-io", help="the same model quantized with int8 input and output: its outputs must be "
                   "SYSTOLIC.tflite's, quantized")
    a = p.parse_args()
    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)
            print("FAIL: " + what)

    xt, _ = fashion_mnist("train")
    xv, yv = fashion_mnist("test")
    model = tf.keras.models.load_model(a.h5, compile=False)
    calib = xt[:a.calibration_samples]
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = lambda: ([c[None]] for c in calib)
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    tf_path = os.path.join(a.dir, "tensorflow.tflite")
    with open(tf_path, "wb") as f:
        f.write(conv.convert())

    # structure, weights, activations
    names_s, ops_s = layout(a.systolic)
    names_t, ops_t = layout(tf_path)
    check(sorted(names_s) == sorted(names_t), "operators: systolic %s, TFLiteConverter %s" % (names_s, names_t))
    worst_w, worst_a, worst_zp, worst_q = 0.0, 0.0, 0, 0
    if sorted(names_s) == sorted(names_t):
        # each operator paired with the converter's of the same kind and shapes, in order: the two may schedule
        # independent branches (a residual block's shortcut) apart
        def key(name, op):
            ins, out = op
            return (name, tuple(out["shape"]), tuple(ins[1]["shape"]) if len(ins) > 1 and ins[1] is not None else ())
        pending = {}
        for name, op in zip(names_t, ops_t):
            pending.setdefault(key(name, op), []).append(op)
        activations_s = {op[1]["index"] for op in ops_s} | {d["index"] for d in tf.lite.Interpreter(
            model_path=a.systolic).get_input_details()}
        pairs = []
        for name, op in zip(names_s, ops_s):
            twins = pending.get(key(name, op))
            check(bool(twins), "%s with output %s has no twin in the converter's file" % (name, op[1]["shape"]))
            if twins:
                pairs.append((op, twins.pop(0)))
        for k, ((ins_s, out_s), (ins_t, out_t)) in enumerate(pairs):
            check(out_s["dtype"] == out_t["dtype"], "op %d %s: output %s, converter's %s" % (
                k, names_s[k], out_s["dtype"], out_t["dtype"]))
            qs, qt = out_s["quantization_parameters"], out_t["quantization_parameters"]
            if len(qt["scales"]):
                r = abs(qs["scales"][0] / qt["scales"][0] - 1)
                dz = abs(int(qs["zero_points"][0]) - int(qt["zero_points"][0]))
                worst_a, worst_zp = max(worst_a, r), max(worst_zp, dz)
                check(r < 5e-3 and dz <= 1, "op %d %s: output scale %g zero point %d, converter's %g %d" % (
                    k, names_s[k], qs["scales"][0], qs["zero_points"][0], qt["scales"][0], qt["zero_points"][0]))
            for j, (s, t) in enumerate(zip(ins_s, ins_t)):
                if s is None or t is None or j == 0 or s["index"] in activations_s:
                    check((s is None) == (t is None), "op %d %s: input %d present in one file only" % (k, names_s[k], j))
                    continue
                ss, st = s["quantization_parameters"]["scales"], t["quantization_parameters"]["scales"]
                check(s["dtype"] == t["dtype"] and s["shape"].tolist() == t["shape"].tolist() and len(ss) == len(st),
                      "op %d %s input %d: %s %s (%d scales), converter's %s %s (%d)" % (
                          k, names_s[k], j, s["dtype"], s["shape"], len(ss), t["dtype"], t["shape"], len(st)))
                if len(ss) and len(ss) == len(st):
                    r = float(np.max(np.abs(ss / st - 1)))
                    worst_w = max(worst_w, r)
                    check(r < 1e-5 if j == 1 else r < 5e-3, "op %d %s input %d: scales differ by %g (relative)" % (
                        k, names_s[k], j, r))
                    check(not np.any(s["quantization_parameters"]["zero_points"]), "op %d input %d: zero points not 0" % (k, j))
                if "value" in s and "value" in t and s["value"].shape == t["value"].shape:
                    d = np.abs(s["value"].astype(np.int64) - t["value"].astype(np.int64))
                    worst_q = max(worst_q, int(d.max()) if d.size else 0)
                    check(d.size == 0 or d.max() <= 1, "op %d %s input %d: quantized values differ by up to %d" % (
                        k, names_s[k], j, d.max()))
    print("weights: scales within %.2g of the converter's (relative), int8 weights and int32 biases within %d; "
          "activations: scales within %.2g, zero points within %d" % (worst_w, worst_q, worst_a, worst_zp))

    # accuracy and outputs
    if a.untrained:  # accuracy means nothing here: a thousand images compare the files
        xv, yv = xv[:1000], yv[:1000]
    y_float = model.predict(xv, batch_size=1000, verbose=0)
    y_sys, y_tf = run(a.systolic, xv), run(tf_path, xv)
    acc = [float(np.mean(np.argmax(y, 1) == yv)) * 100 for y in (y_float, y_sys, y_tf)]
    print("accuracy on the %d test images: float %.2f%%, systolic int8 %.2f%%, TFLiteConverter int8 %.2f%%" % (len(xv), *acc))
    if a.untrained:
        acc[0] = acc[1]
    check(abs(acc[1] - acc[0]) < 0.5, "systolic's int8 accuracy %.2f%% is not within 0.5 point of float %.2f%%" % (acc[1], acc[0]))
    check(abs(acc[1] - acc[2]) < 0.5, "systolic's int8 accuracy %.2f%% vs the converter's %.2f%%" % (acc[1], acc[2]))
    mean_diff = float(np.mean(np.abs(y_sys - y_float)))
    agree = float(np.mean(np.argmax(y_sys, 1) == np.argmax(y_tf, 1))) * 100
    print("outputs: mean |int8 - float| %.4f (%.2f steps of 1/256); same class as the converter's file on %.2f%%" % (
        mean_diff, mean_diff * 256, agree))
    check(mean_diff < 4 / 256, "mean |int8 - float| %.4f is over 4/256" % mean_diff)
    check(agree >= 99, "systolic's and the converter's files agree on %.2f%% of the classes" % agree)

    x = xv[:256]
    if a.int8_io:
        it = tf.lite.Interpreter(model_path=a.int8_io)
        inp, out = it.get_input_details()[0], it.get_output_details()[0]
        check(inp["dtype"] == np.int8 and out["dtype"] == np.int8, "--int8-io file: %s in, %s out" % (
            inp["dtype"], out["dtype"]))
        (si, zi), (so, zo) = inp["quantization"], out["quantization"]
        xq = np.clip(np.round(x / si) + zi, -128, 127).astype(np.int8)
        yq = run(a.int8_io, xq, reference=True)
        yf = run(a.systolic, x, reference=True)
        check(np.array_equal((yq.astype(np.float32) - zo) * so, yf), "the int8-I/O file's outputs are not the float-I/O "
              "file's quantized")
        print("int8 input and output: the same int8 outputs as the float-I/O file on %d images" % len(x))
    np.save(os.path.join(a.dir, "x.npy"), x)
    ys, yt = run(a.systolic, x, reference=True), run(tf_path, x, reference=True)
    np.save(os.path.join(a.dir, "systolic_y.npy"), ys)
    np.save(os.path.join(a.dir, "tensorflow_y.npy"), yt)
    same = float(np.mean(ys == yt)) * 100
    print("reference kernels: %.2f%% of the outputs on %d images identical to the converter's file's" % (same, len(x)))
    if failures:
        print("quantize_check: %d failures" % len(failures))
        return 1
    print("quantize_check: systolic's file matches TFLiteConverter's (TensorFlow %s)" % tf.__version__)
    return 0


if __name__ == "__main__":
    sys.exit(main())
