#!/bin/sh
# keras_optimizer_h5.sh - issue 17, point 3: a training run moves between
# tf.keras 2.15 and systolic with its optimizer state, through .h5 files with
# optimizer_weights, both ways, for every optimizer
# (tests/keras_optimizer_h5.py says what is compared; test_optimizer_h5.c is
# systolic's side). Skipped (77) without a Python that imports TensorFlow
# and h5py ($SYSTOLIC_PYTHON, <root>/.venv/bin/python).
#
#   sh tests/keras_optimizer_h5.sh build/tests/test_optimizer_h5 .
prog=$1
root=$2
python=
for py in "$SYSTOLIC_PYTHON" "$root/.venv/bin/python"; do
    if [ -n "$py" ] && "$py" -c 'import h5py, numpy, tensorflow' >/dev/null 2>&1; then
        python=$py
        break
    fi
done
if [ -z "$python" ]; then
    echo "no Python with TensorFlow and h5py (\$SYSTOLIC_PYTHON, $root/.venv/bin/python): skipped"
    exit 77
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/systolic-optimizer-h5-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
names="adam adamw nadam adagrad ftrl lion sgd rmsprop adadelta adamax adafactor"
# issue 17, learning-rate schedules
names="$names sgd_exponential adam_cosine_warmup rmsprop_piecewise adagrad_restarts adamax_polynomial lion_inverse_time"
"$python" "$root/tests/keras_optimizer_h5.py" keras-write "$dir" || exit 1
# shellcheck disable=SC2086
"$prog" resume "$dir" $names || exit 1
# shellcheck disable=SC2086
"$prog" train "$dir" $names || exit 1
"$python" "$root/tests/keras_optimizer_h5.py" check "$dir"
