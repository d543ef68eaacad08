#!/bin/sh
# tensorboard_reader.sh - TensorBoard's own event reader reads what
# `systolic train --logdir` writes: tests/tensorboard_reader.py trains, reads
# the event files with TensorBoard's EventAccumulator and checks every
# scalar's step and value. Skipped (77) only where no Python can import
# tensorboard: $SYSTOLIC_PYTHON, else the project's .venv/bin/python (make
# deps), else .gl/bin/python (make bench-deps). A third argument names
# another reader script in tests/ to run the same way, PROGRAM DIR
# (estimator_tensorboard.py: the estimator's summaries, issue 19).
#
#   sh tests/tensorboard_reader.sh build/systolic .
#   sh tests/tensorboard_reader.sh build/tests/test_estimator . estimator_tensorboard.py
program=$1
root=$2
script=${3:-tensorboard_reader.py}
python=
for py in "$SYSTOLIC_PYTHON" "$root/.venv/bin/python" "$root/.gl/bin/python"; do
    if [ -n "$py" ] && "$py" -c 'import tensorboard' >/dev/null 2>&1; then
        python=$py
        break
    fi
done
if [ -z "$python" ]; then
    echo "no Python with tensorboard (\$SYSTOLIC_PYTHON, $root/.venv/bin/python, $root/.gl/bin/python; make deps makes .venv): skipped"
    exit 77
fi
dir=$(mktemp -d "${TMPDIR:-/tmp}/systolic-tensorboard-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
"$python" "$root/tests/$script" "$program" "$dir"
