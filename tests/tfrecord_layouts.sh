#!/bin/sh
# tfrecord_layouts.sh - TFRecord files in several layouts written by
# TensorFlow (float lists, the ImageNet tools' PNG and JPEG layout, varlen
# int64s), read by systolic through record specs and compared with what
# TensorFlow's own parsing and decoding gives; then trained on, evaluated
# and predicted by the command (tests/tfrecord_layouts.py; issue 17).
# Skipped (77) where no Python can import tensorflow: $SYSTOLIC_PYTHON,
# else the project's .venv/bin/python (make deps), else .gl/bin/python.
#
# With `multiio` as the fourth argument it runs tests/tfrecord_multiio.py
# instead: a model with two inputs and two outputs, with sample weights,
# from records (needs no image decoder).
#
#   sh tests/tfrecord_layouts.sh build/tests/test_features build/systolic . [multiio]
test_features=$1
systolic=$2
root=$3
python=
for py in "$SYSTOLIC_PYTHON" "$root/.venv/bin/python" "$root/.gl/bin/python"; do
    if [ -n "$py" ] && "$py" -c 'import tensorflow' >/dev/null 2>&1; then
        python=$py
        break
    fi
done
if [ -z "$python" ]; then
    echo "no Python with TensorFlow (\$SYSTOLIC_PYTHON, $root/.venv/bin/python, $root/.gl/bin/python; make deps puts it in .venv): skipped"
    exit 77
fi
if [ "$4" = multiio ]; then
    dir=$(mktemp -d "${TMPDIR:-/tmp}/systolic-multiio-XXXXXX") || exit 1
    trap 'rm -rf "$dir"' EXIT
    "$python" "$root/tests/tfrecord_multiio.py" "$systolic" "$dir" "$root/tests/data/keras/multiio.h5"
    exit
fi
if ! "$test_features" --have-images; then
    echo "systolic was built without libpng or libjpeg (install libpng-dev and libjpeg62-turbo-dev): skipped"
    exit 77
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/systolic-layouts-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
"$python" "$root/tests/tfrecord_layouts.py" "$test_features" "$systolic" "$dir"
