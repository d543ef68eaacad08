#!/usr/bin/env python3
"""tflite_models.py - int8 TensorFlow Lite models made by TensorFlow's own
converter, and what tf.lite.Interpreter computes on them: the other side
of systolic's .tflite tests (tests/tflite_tensorflow.sh, docs/design/tflite.md).

  python tools/tflite_models.py DIR [--tiny]

Writes into DIR, for each model NAME:
  NAME.tflite       full-integer post-training quantization
                    (TFLiteConverter, Optimize.DEFAULT, a representative
                    dataset, TFLITE_BUILTINS_INT8), float or int8 input and output
  NAME_x.npy        inputs (float32, or int8 for an int8-input model)
  NAME_y.npy        tf.lite.Interpreter's outputs on them (the reference kernels:
                    OpResolverType.BUILTIN_REF, not XNNPACK or the optimized ones)
  tflite.json       each model's ops, tensor count and input/output types

The models:
  fashion_mnist_cnn  the tutorial CNN as src/cli/builtin.c builds it:
                     Conv2D(64, 3x3) -> MaxPooling2D(2x2) -> relu -> Flatten ->
                     Dense(10) -> softmax; float input and output
  resnet_small       a ResNet-like model: stem conv + BatchNormalization, two
                     residual blocks (conv-BN-relu-conv-BN + shortcut, ADD,
                     relu; the second strided with a 1x1 conv shortcut),
                     depthwise conv, PAD, average and max pooling, global
                     average pooling (MEAN), dense, softmax; int8 input and
                     output
  tiny_dense         (--tiny) Dense(4) on 8 floats: a few hundred bytes, the
                     fuzz seed and the checked-in fixture

Weights are Keras's seeded initializers (untrained; BatchNormalization's
statistics set from a seeded draw so that the converter's folding matters);
the calibration and test inputs are seeded too. Only the files' numbers
depend on TensorFlow's version (2.15.1 here).
"""

import json
import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402


def cnn():
    L = tf.keras.layers
    return tf.keras.Sequential([
        L.Conv2D(64, 3, input_shape=(28, 28, 1)),
        L.MaxPooling2D(2, strides=2),
        L.Activation("relu"),
        L.Flatten(),
        L.Dense(10),
        L.Activation("softmax"),
    ])


def resnet_small(shape=(16, 16, 3)):
    L = tf.keras.layers
    x0 = tf.keras.Input(shape)
    x = L.ZeroPadding2D(1)(x0)
    x = L.Conv2D(8, 3, use_bias=False)(x)
    x = L.BatchNormalization()(x)
    x = L.ReLU()(x)
    # block 1: identity shortcut
    y = L.Conv2D(8, 3, padding="same")(x)
    y = L.BatchNormalization()(y)
    y = L.ReLU()(y)
    y = L.Conv2D(8, 3, padding="same")(y)
    y = L.BatchNormalization()(y)
    x = L.ReLU()(L.Add()([x, y]))
    # block 2: strided, 1x1 projection shortcut
    y = L.Conv2D(16, 3, strides=2, padding="same")(x)
    y = L.BatchNormalization()(y)
    y = L.ReLU()(y)
    y = L.DepthwiseConv2D(3, padding="same")(y)
    y = L.BatchNormalization()(y)
    s = L.Conv2D(16, 1, strides=2)(x)
    x = L.ReLU()(L.Add()([s, y]))
    a = L.AveragePooling2D(2)(x)
    m = L.MaxPooling2D(2)(x)
    x = L.Add()([a, m])
    x = L.GlobalAveragePooling2D()(x)
    x = L.Dense(10)(x)
    out = L.Softmax()(x)
    return tf.keras.Model(x0, out)


def tiny_dense():
    return tf.keras.Sequential([tf.keras.layers.Dense(4, activation="relu", input_shape=(8,))])


def set_bn_statistics(model, rng):
    for layer in model.layers:
        if isinstance(layer, tf.keras.layers.BatchNormalization):
            g, b, mean, var = layer.get_weights()
            layer.set_weights([rng.uniform(0.5, 1.5, g.shape).astype("f4"), rng.normal(0, 0.1, b.shape).astype("f4"),
                               rng.normal(0, 0.1, mean.shape).astype("f4"), rng.uniform(0.5, 2, var.shape).astype("f4")])


def convert(model, calib, int8_io):
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    conv.optimizations = [tf.lite.Optimize.DEFAULT]
    conv.representative_dataset = lambda: ([c[None]] for c in calib)
    conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
    if int8_io:
        conv.inference_input_type = tf.int8
        conv.inference_output_type = tf.int8
    return conv.convert()


def run(path, x):
    interp = tf.lite.Interpreter(model_path=path,
                                 experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN_REF)
    inp, out = interp.get_input_details()[0], interp.get_output_details()[0]
    interp.resize_tensor_input(inp["index"], x.shape)
    interp.allocate_tensors()
    interp.set_tensor(inp["index"], x)
    interp.invoke()
    ops = sorted({d["op_name"] for d in interp._get_ops_details()})
    # the file's own tensors and operators: before allocate_tensors adds the kernels' scratch tensors
    fresh = tf.lite.Interpreter(model_path=path)
    counts = len(fresh.get_tensor_details()), len(fresh._get_ops_details())
    return interp.get_tensor(out["index"]), ops, counts, inp, out


def main():
    out_dir = sys.argv[1]
    tiny = "--tiny" in sys.argv[2:]
    os.makedirs(out_dir, exist_ok=True)
    tf.keras.utils.set_random_seed(18)
    rng = np.random.default_rng(18)
    specs = [("tiny_dense", tiny_dense, (8,), 1.0, False, 4)] if tiny else [
        ("fashion_mnist_cnn", cnn, (28, 28, 1), 255.0, False, 16),
        ("resnet_small", resnet_small, (16, 16, 3), 1.0, True, 16),
    ]
    info = {}
    for name, build, shape, scale, int8_io, n in specs:
        model = build()
        set_bn_statistics(model, rng)
        calib = (rng.random((32,) + shape) * scale).astype("f4")
        path = os.path.join(out_dir, name + ".tflite")
        with open(path, "wb") as f:
            f.write(convert(model, calib, int8_io))
        x = (rng.random((n,) + shape) * scale).astype("f4")
        interp = tf.lite.Interpreter(model_path=path)
        qs, qz = interp.get_input_details()[0]["quantization"]
        if int8_io:
            x = np.clip(np.round(x / qs) + qz, -128, 127).astype(np.int8)
        y, ops, n_tensors, inp, out = run(path, x)
        np.save(os.path.join(out_dir, name + "_x.npy"), x)
        np.save(os.path.join(out_dir, name + "_y.npy"), y)
        info[name] = {"ops": ops, "tensors": n_tensors[0], "operators": n_tensors[1], "input": np.dtype(inp["dtype"]).name,
                      "output": np.dtype(out["dtype"]).name, "output_quantization": list(out["quantization"])}
    with open(os.path.join(out_dir, "tflite.json"), "w") as f:
        json.dump({"tensorflow": tf.__version__, "models": info}, f, indent=1)
    print("tflite_models: %s written by TensorFlow %s" % (", ".join(info), tf.__version__))


if __name__ == "__main__":
    main()
