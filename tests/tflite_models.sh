#!/bin/sh
# tflite_models.sh ROOT DIR - the int8 models TensorFlow's converter writes
# for the interop tests (tools/tflite_models.py: the Fashion-MNIST CNN, a
# ResNet-like model, inputs and tf.lite.Interpreter's outputs), made once
# per build directory: CTest's fixture tflite_models (tests/CMakeLists.txt),
# which tflite_tensorflow, tflite_run and tpu1_tensorflow require and read
# from DIR. TensorFlow takes seconds to make them; three runs per build
# (release, asan, tsan) each was what the fixture saves.
#
# Skipped (77) without a Python with TensorFlow (tests/find_python.sh); the
# tests that read DIR find no Python either and skip too (a skipped setup
# is not a failed one: CTest runs them, and they skip themselves).
root=$1
dir=$2
. "$root/tests/find_python.sh"
# find_spec, not an import: TensorFlow's import alone takes seconds, and the tool imports it anyway
find_python 'import importlib.util as u, sys; sys.exit(not (u.find_spec("numpy") and u.find_spec("tensorflow")))'
rm -rf "$dir" && mkdir -p "$dir" || exit 1
"$python" "$root/tools/tflite_models.py" "$dir" >"$dir/python.log" 2>&1 || {
    cat "$dir/python.log"
    echo "tflite_models: tools/tflite_models.py failed"
    rm -f "$dir/tflite.json" # what the readers look for: not there unless every model was written
    exit 1
}
tail -n 1 "$dir/python.log"
