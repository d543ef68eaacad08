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
# MODELS: the directory the fixture tflite_models made (tests/tflite_models.sh);
# without it the models are made here.
#
#   sh tests/tflite_tensorflow.sh build/tests/test_tflite . [MODELS]
test_tflite=$1
root=$2
. "$root/tests/find_python.sh"
. "$root/tests/tflite_models_dir.sh"
# find_spec, not an import: TensorFlow's import alone takes seconds, and the tool imports it anyway
find_python 'import importlib.util as u, sys; sys.exit(not (u.find_spec("numpy") and u.find_spec("tensorflow")))'
dir=$(mktemp -d "${TMPDIR:-/tmp}/systolic-tflite-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
tflite_models_dir "$dir" "$3"
tail -n 1 "$dir/python.log"
"$test_tflite" "$root" "$dir"
