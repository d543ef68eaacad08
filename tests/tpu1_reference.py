#!/usr/bin/env python3
"""tpu1_reference.py - what TFLite's reference kernels compute at the TPU v1
program's boundary (tests/tpu1_tensorflow.sh, docs/design/tpu-v1.md).

  python tests/tpu1_reference.py MODEL.tflite X.npy OUT_DIR

Runs MODEL on X with tf.lite.Interpreter (the reference kernels,
OpResolverType.BUILTIN_REF), with a trailing SOFTMAX / DEQUANTIZE cut off
the model first (TFLite's own flatbuffer_utils): TFLite's int8 SOFTMAX
writes over its input's buffer, even with experimental_preserve_all_tensors,
so the tensor before it is only observable as a model's output. Writes
into OUT_DIR:
  xq.npy   the int8 input the program takes: QUANTIZE's output, or X itself
  yq.npy   the int8 tensor the program writes: the input of a trailing
           SOFTMAX / DEQUANTIZE (which stay on the host), else the output
"""
import os
import sys

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402
from tensorflow.lite.tools import flatbuffer_utils  # noqa: E402


def run(path, x):
    it = tf.lite.Interpreter(model_path=path, experimental_preserve_all_tensors=True,
                             experimental_op_resolver_type=tf.lite.experimental.OpResolverType.BUILTIN_REF)
    inp = it.get_input_details()[0]
    it.resize_tensor_input(inp["index"], x.shape)
    it.allocate_tensors()
    it.set_tensor(inp["index"], x)
    it.invoke()
    return it


def main():
    path, x_path, out = sys.argv[1:4]
    x = np.load(x_path)
    ops = run(path, x)._get_ops_details()
    first = 1 if ops[0]["op_name"] == "QUANTIZE" else 0
    last = len(ops)
    while last > first and ops[last - 1]["op_name"] in ("SOFTMAX", "DEQUANTIZE"):
        last -= 1
    model = flatbuffer_utils.read_model(path)
    graph = model.subgraphs[0]
    graph.operators = graph.operators[:last]
    graph.outputs = np.array([ops[last - 1]["outputs"][0]], dtype=np.int32)
    cut = os.path.join(out, "cut.tflite")
    flatbuffer_utils.write_model(model, cut)
    it = run(cut, x)
    xq = it.get_tensor(ops[0]["outputs"][0]) if first else x
    yq = it.get_tensor(it.get_output_details()[0]["index"])
    assert xq.dtype == np.int8 and yq.dtype == np.int8, (xq.dtype, yq.dtype)
    np.save(os.path.join(out, "xq.npy"), xq)
    np.save(os.path.join(out, "yq.npy"), yq.reshape(yq.shape[0], -1))
    print("tpu1_reference: %s: %s -> %s, ops %s run on the TPU v1" %
          (os.path.basename(path), xq.shape, yq.shape, [o["op_name"] for o in ops[first:last]]))


if __name__ == "__main__":
    main()
