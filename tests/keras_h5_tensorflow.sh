#!/bin/sh
# keras_h5_tensorflow.sh - Keras's HDF5 files between systolic and the real
# tools (tests/keras_h5_tensorflow.py does the Python side):
#
#   1. test_saving writes the fixture models' weights and full model files
#      (weights from its own seed) and its predictions into a directory;
#   2. with h5py: the layout of those files is checked attribute by
#      attribute against what Keras 2.15 writes;
#   3. with TensorFlow: tf.keras loads them into the same architectures
#      (and keras.models.load_model the full files, compiled) and predicts
#      what systolic predicted; Keras saves weights of its own, which
#      test_saving loads, and systolic's predictions match Keras's.
#
# Python is the first of $SYSTOLIC_PYTHON, <root>/.venv/bin/python (make
# deps: TensorFlow, h5py) and <root>/.gl/bin/python (make bench-deps) that
# imports TensorFlow and h5py, else the first that imports h5py. Skipped
# (77) when none does; without TensorFlow step 2 runs and the test is then
# reported skipped (77), so that a run without Keras's side is never counted
# as a pass.
#
#   sh tests/keras_h5_tensorflow.sh build/tests/test_saving .
test_saving=$1
root=$2
python=
# the first with TensorFlow, so the round trips run wherever they can; else
# the first with h5py alone, for the layout
for need in 'import h5py, numpy, tensorflow' 'import h5py, numpy'; do
    for py in "$SYSTOLIC_PYTHON" "$root/.venv/bin/python" "$root/.gl/bin/python"; do
        if [ -n "$py" ] && "$py" -c "$need" >/dev/null 2>&1; then
            python=$py
            break 2
        fi
    done
done
if [ -z "$python" ]; then
    echo "no Python with h5py (\$SYSTOLIC_PYTHON, $root/.venv/bin/python, $root/.gl/bin/python): skipped"
    exit 77
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/systolic-keras-h5-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
script="$root/tests/keras_h5_tensorflow.py"
SYSTOLIC_SAVE_DIR=$dir "$test_saving" || exit 1
"$python" "$script" layout "$dir" "$root" || exit 1
if ! "$python" -c 'import tensorflow' >/dev/null 2>&1; then
    echo "keras_h5_tensorflow: $python has h5py but not TensorFlow: the layout was checked, Keras's side skipped"
    exit 77
fi
"$python" "$script" keras-save "$dir" "$root" || exit 1
SYSTOLIC_SAVE_DIR=$dir "$test_saving" || exit 1
"$python" "$script" keras-check "$dir" "$root"
