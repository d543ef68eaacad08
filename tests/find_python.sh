# find_python.sh - sourced by the interop test scripts: find_python IMPORTS
# sets $python to the first of $SYSTOLIC_PYTHON, $root/.venv/bin/python
# (make deps) and $root/.gl/bin/python (make bench-deps) that runs
# `IMPORTS` (e.g. 'import numpy, tensorflow'), or else says so and exits
# 77 (skipped). $root is the repository root.
find_python() {
    python=
    for py in "$SYSTOLIC_PYTHON" "$root/.venv/bin/python" "$root/.gl/bin/python"; do
        if [ -n "$py" ] && "$py" -c "$1" >/dev/null 2>&1; then
            python=$py
            return 0
        fi
    done
    echo "no Python that can '$1' (\$SYSTOLIC_PYTHON, $root/.venv/bin/python, $root/.gl/bin/python): skipped"
    exit 77
}
