#!/bin/sh
# tpu1_tensorflow.sh - the TPU v1 on TensorFlow's own int8 models (issue 18;
# docs/design/tpu-v1.md): tools/tflite_models.py has TensorFlow's converter
# write the Fashion-MNIST tutorial CNN and a ResNet-like model with inputs
# and tf.lite.Interpreter's outputs; tests/tpu1_reference.py has TFLite's
# reference kernels give the int8 tensors at the program's boundary (the
# quantized input, the tensor before the host's SOFTMAX / DEQUANTIZE).
# `systolic profile MODEL --tpu sim:v1 --input` then runs the compiled
# program on the emulated TPU v1, from TFLite's int8 input and from the
# float input (quantized by systolic as QUANTIZE does), and every output
# must equal TFLite's bit for bit. `systolic predict MODEL --tpu sim:v1`
# runs the whole model (the host's QUANTIZE, the program, the host's
# SOFTMAX and DEQUANTIZE) on 16 images at batch 5, the last run padded: its
# float outputs must be TFLite's, bit for bit, and with $SYSTOLIC_DATASETS
# `systolic evaluate --tpu sim:v1` must print what the cpu backend prints.
# The ResNet-like model is refused by compile and by predict on sim:v1,
# naming the first op the TPU v1 does not run (PAD; ADD, DEPTHWISE_CONV_2D
# and MEAN follow it).
#
# Python is the first of $SYSTOLIC_PYTHON, <root>/.venv/bin/python and
# <root>/.gl/bin/python that has TensorFlow (tests/find_python.sh); skipped
# (77) when none does. MODELS: the directory the fixture tflite_models made
# (tests/tflite_models.sh); without it the models are made here.
#
#   sh tests/tpu1_tensorflow.sh build/systolic . [MODELS]
sy=$1
root=$2
. "$root/tests/find_python.sh"
. "$root/tests/tflite_models_dir.sh"
find_python 'import importlib.util as u, sys; sys.exit(not (u.find_spec("numpy") and u.find_spec("tensorflow")))'
dir=$(mktemp -d "${TMPDIR:-/tmp}/systolic-tpu1-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
tflite_models_dir "$dir" "$3"
m=fashion_mnist_cnn
"$python" "$root/tests/tpu1_reference.py" "$dir/$m.tflite" "$dir/${m}_x.npy" "$dir" || exit 1
"$sy" compile --target tpu-v1 "$dir/$m.tflite" -o "$dir/$m.bin" --batch-size 16 || exit 1
"$sy" profile "$dir/$m.bin" --tpu sim:v1 --input "$dir/xq.npy" --output "$dir/y_int8.npy" || exit 1
"$sy" profile "$dir/$m.tflite" --tpu sim:v1 --batch-size 16 --input "$dir/${m}_x.npy" --output "$dir/y_float.npy" >/dev/null || exit 1
"$sy" predict "$dir/$m.tflite" --tpu sim:v1 --batch-size 5 --input "$dir/${m}_x.npy" --output "$dir/y_predict.npy" || exit 1
"$python" - "$dir" "$m" <<'PY' || exit 1
import sys
import numpy as np
d, m = sys.argv[1:3]
want = np.load(d + "/yq.npy").astype(np.int64)
for name in ("y_int8", "y_float"):
    got = np.load(d + "/" + name + ".npy").astype(np.int64)
    if got.shape != want.shape or not np.array_equal(got, want):
        print("tpu1_tensorflow: %s (%s input): %s of %d outputs differ from TFLite's reference kernels" %
              (m, name[2:], "all" if got.shape != want.shape else int((got != want).sum()), want.size))
        sys.exit(1)
print("tpu1_tensorflow: %s: %d of %d outputs equal TFLite's reference kernels', from its int8 input and from the float "
      "input" % (m, want.size, want.size))
want, got = np.load(d + "/" + m + "_y.npy"), np.load(d + "/y_predict.npy")
if got.dtype != want.dtype or got.shape != want.shape or not np.array_equal(got, want):
    print("tpu1_tensorflow: predict --tpu sim:v1 gives %s %s, %s values differ from TFLite's" %
          (got.dtype, got.shape, (got != want).sum() if got.shape == want.shape else "all"))
    sys.exit(1)
print("tpu1_tensorflow: predict --tpu sim:v1: %s %s identical to TFLite's" % (got.dtype, got.shape))
PY
if [ -d "${SYSTOLIC_DATASETS:-}/fashion-mnist" ]; then
    cpu=$("$sy" evaluate "$dir/$m.tflite" --dataset fashion_mnist --steps 3 --batch-size 40 --tpu cpu) || exit 1
    v1=$("$sy" evaluate "$dir/$m.tflite" --dataset fashion_mnist --steps 3 --batch-size 40 --tpu sim:v1) || exit 1
    echo "$v1"
    if [ "$(echo "$v1" | head -n 1)" != "$cpu" ]; then
        echo "tpu1_tensorflow: evaluate --tpu sim:v1 printed '$v1', the cpu backend '$cpu'"
        exit 1
    fi
fi
for cmd in "compile --target tpu-v1 $dir/resnet_small.tflite -o $dir/r.bin" \
    "predict $dir/resnet_small.tflite --tpu sim:v1 --input $dir/resnet_small_x.npy --output $dir/r.npy"; do
    out=$("$sy" $cmd 2>&1)
    rc=$?
    echo "$out"
    if [ $rc != 1 ] || ! echo "$out" | grep -q "op 0 (PAD): not an op the TPU v1 runs"; then
        echo "tpu1_tensorflow: resnet_small should be refused naming PAD (exit 1), got $rc from systolic $cmd"
        exit 1
    fi
done
