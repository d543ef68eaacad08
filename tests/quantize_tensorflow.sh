#!/bin/sh
# quantize_tensorflow.sh - systolic quantize beside TensorFlow's own
# converter (issue 18; docs/design/tflite.md, "Quantization"): systolic
# trains the Fashion-MNIST CNN for a few seconds and saves it as .h5,
# quantizes it (float and int8 input/output) calibrated on the first 1,000
# training images; tools/quantize_check.py has TFLiteConverter quantize the
# same .h5 on the same images and tf.lite.Interpreter run both files: the
# same operators, weight scales and activation ranges, accuracy within 0.5
# point of the float model. Then the same for a ResNet-like model with seeded
# weights (BatchNormalization folded, depthwise convolution, residual ADDs,
# PAD, pooling, MEAN). test_tflite_write then reads and re-encodes every
# file (the writer as the reader's inverse).
#
# Python is the first of $SYSTOLIC_PYTHON, <root>/.venv/bin/python (make
# deps) and <root>/.gl/bin/python (make bench-deps) with TensorFlow
# (tests/find_python.sh); skipped (77) without one.
#
#   sh tests/quantize_tensorflow.sh build/systolic build/tests/test_tflite_write .
systolic=$1
test_write=$2
root=$3
. "$root/tests/find_python.sh"
find_python 'import importlib.util as u, sys; sys.exit(not (u.find_spec("numpy") and u.find_spec("tensorflow")))'
dir=$(mktemp -d "${TMPDIR:-/tmp}/systolic-quantize-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
# issue 18 point 1: systolic's own int8 path runs the file systolic wrote and
# gives tf.lite.Interpreter's reference-kernel outputs on it bit for bit
same_as_interpreter() {
    "$systolic" predict "$1" --input "$2/x.npy" --output "$2/predict_y.npy" >"$2/p.log" 2>&1 || {
        cat "$2/p.log"
        exit 1
    }
    "$python" -c 'import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
if a.shape != b.shape or not np.array_equal(a, b):
    print("systolic predict differs from tf.lite.Interpreter: shapes %s %s, %d values" % (a.shape, b.shape, np.sum(a != b) if a.shape == b.shape else -1))
    sys.exit(1)
print("systolic predict %s: the interpreter%ss %d outputs bit for bit" % (sys.argv[3], chr(39), a.size))' \
        "$2/predict_y.npy" "$2/systolic_y.npy" "$(basename "$1")" || exit 1
}
"$systolic" train fashion_mnist_cnn --epochs 2 --verbose 0 --save-model "$dir/cnn.h5" >"$dir/train.log" 2>&1 || {
    cat "$dir/train.log"
    exit 1
}
q="--dataset fashion_mnist --batch-size 100 --calibration-steps 10"
# shellcheck disable=SC2086
"$systolic" quantize "$dir/cnn.h5" $q -o "$dir/systolic.tflite" >"$dir/q.log" 2>&1 || {
    cat "$dir/q.log"
    exit 1
}
cat "$dir/q.log"
grep -q "^operators: 7 (QUANTIZE CONV_2D MAX_POOL_2D RESHAPE FULLY_CONNECTED SOFTMAX DEQUANTIZE)$" "$dir/q.log" || {
    echo "quantize_tensorflow: unexpected operators"
    exit 1
}
# shellcheck disable=SC2086
"$systolic" quantize "$dir/cnn.h5" $q --inference-input-type int8 --inference-output-type int8 \
    -o "$dir/int8.tflite" >"$dir/q8.log" 2>&1 || {
    cat "$dir/q8.log"
    exit 1
}
"$python" "$root/tools/quantize_check.py" "$dir/cnn.h5" "$dir/systolic.tflite" "$dir" --calibration-samples 1000 \
    --int8-io "$dir/int8.tflite" >"$dir/check.log" 2>&1
rc=$?
grep -v "^ \|^$\|[Ww]arn\|Summary\|^---\|Accepted\|Non-Converted\|arith\|fully_quantize\|^INFO" "$dir/check.log"
[ $rc -eq 0 ] || exit 1
cp "$dir/tensorflow.tflite" "$dir/tensorflow_cnn.tflite"
same_as_interpreter "$dir/systolic.tflite" "$dir"
# the ResNet-like model (BatchNormalization folded, DEPTHWISE_CONV_2D, ADD, PAD, pooling, MEAN): seeded weights
"$python" "$root/tools/quantize_check.py" --make-resnet "$dir/resnet.h5" >"$dir/resnet.log" 2>&1 || {
    cat "$dir/resnet.log"
    exit 1
}
# shellcheck disable=SC2086
"$systolic" quantize "$dir/resnet.h5" $q -o "$dir/resnet.tflite" >"$dir/qr.log" 2>&1 || {
    cat "$dir/qr.log"
    exit 1
}
grep "^operators" "$dir/qr.log"
mkdir "$dir/resnet"
"$python" "$root/tools/quantize_check.py" "$dir/resnet.h5" "$dir/resnet.tflite" "$dir/resnet" --calibration-samples 1000 \
    --untrained >"$dir/check.log" 2>&1
rc=$?
grep -v "^ \|^$\|[Ww]arn\|Summary\|^---\|Accepted\|Non-Converted\|arith\|fully_quantize\|^INFO" "$dir/check.log"
[ $rc -eq 0 ] || exit 1
same_as_interpreter "$dir/resnet.tflite" "$dir/resnet"
"$test_write" "$root" "$dir/tensorflow_cnn.tflite" "$dir/systolic.tflite" "$dir/int8.tflite" "$dir/resnet.tflite" \
    "$dir/resnet/tensorflow.tflite"
