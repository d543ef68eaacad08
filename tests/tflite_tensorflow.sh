#!/bin/sh
# tflite_tensorflow.sh - .tflite files made by TensorFlow at test time, read
# by systolic (docs/design/tflite.md): tools/tflite_models.py has
# TensorFlow's converter write int8 models (the Fashion-MNIST tutorial CNN,
# a small ResNet-like model) and tf.lite.Interpreter list their operators
# and tensors; test_tflite reads them and checks that it finds the same.
#
# Python is the first of $SYSTOLIC_PYTHON, <root>/.venv/bin/python (make
# deps) and <root>/.gl/bin/python (make bench-deps) that has TensorFlow
# (tests/find_python.sh); skipped (77) when none does.
#
#   sh tests/tflite_tensorflow.sh build/tests/test_tflite .
test_tflite=$1
root=$2
. "$root/tests/find_python.sh"
# find_spec, not an import: TensorFlow's import alone takes seconds, and the tool imports it anyway
find_python 'import importlib.util as u, sys; sys.exit(not (u.find_spec("numpy") and u.find_spec("tensorflow")))'
dir=$(mktemp -d "${TMPDIR:-/tmp}/systolic-tflite-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
"$python" "$root/tools/tflite_models.py" "$dir" >"$dir/python.log" 2>&1 || {
    cat "$dir/python.log"
    echo "tflite_tensorflow: tools/tflite_models.py failed"
    exit 1
}
tail -n 1 "$dir/python.log"
"$test_tflite" "$root" "$dir"
