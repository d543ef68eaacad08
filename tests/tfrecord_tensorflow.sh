#!/bin/sh
# tfrecord_tensorflow.sh - TensorFlow reads what systolic writes: test_tfrecord
# writes Examples into TFRecord files (plain, ZLIB, GZIP) with what they hold,
# and tests/tfrecord_tensorflow.py reads them with tf.data.TFRecordDataset and
# tf.io.parse_example. Skipped (77) where no Python can import tensorflow:
# $SYSTOLIC_PYTHON, else the project's .venv/bin/python (make deps), else
# .gl/bin/python (make bench-deps).
#
#   sh tests/tfrecord_tensorflow.sh build/tests/test_tfrecord .
test_tfrecord=$1
root=$2
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
dir=$(mktemp -d "${TMPDIR:-/tmp}/systolic-tfrecord-tf-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
"$test_tfrecord" --write-for-tensorflow "$dir" || exit 1
"$python" "$root/tests/tfrecord_tensorflow.py" "$dir"
