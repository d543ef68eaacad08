#!/bin/sh
# dynamic_range_tensorflow.sh - dynamic-range quantization beside
# TensorFlow's converter and interpreter (issue 18; docs/design/tflite.md,
# "Dynamic-range quantization"). A small IMDB-shaped Keras model
# (Embedding(1000, 32) -> LSTM(32) -> Dense(1, sigmoid), seeded weights) is
# quantized by `systolic quantize` and by TFLiteConverter
# (optimizations=[DEFAULT], no representative dataset);
# tools/dynamic_range_check.py checks the two files hold the same operators
# with the same options and the same int8 weights and scales, and that
# tf.lite.Interpreter gives the same outputs on both. Then `systolic predict`
# runs both files and gives the interpreter's outputs on each within 5e-3 at
# most and 5e-4 on average (measured: 9e-4 and 1e-4; most rows within 1e-6):
# sigmoid outputs of an int8 LSTM whose float gates TFLite evaluates with
# Eigen's rational sigmoid and tanh and systolic with expf and tanhf, a few
# ulps apart, which now and then moves one element of the next step's int8
# hidden state by one step (docs/design/tflite.md, "Dynamic-range
# quantization"); the float model is 1.7e-3 from either. An LSTM too small
# for the converter to quantize is refused by name.
#
# Python is the first of $SYSTOLIC_PYTHON, <root>/.venv/bin/python and
# <root>/.gl/bin/python with TensorFlow (tests/find_python.sh); skipped (77)
# without one.
#
#   sh tests/dynamic_range_tensorflow.sh build/systolic .
systolic=$1
root=$2
. "$root/tests/find_python.sh"
find_python 'import importlib.util as u, sys; sys.exit(not (u.find_spec("numpy") and u.find_spec("tensorflow")))'
dir=$(mktemp -d "${TMPDIR:-/tmp}/systolic-dynamic-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
fail() {
    echo "dynamic_range_tensorflow: $*"
    exit 1
}
# two models: Keras's default float32 input (word ids cast to int32 by a CAST, as the tutorial's model has)
# and an Input(dtype="int32") one (no CAST)
for v in float int; do
    mkdir "$dir/$v"
    # shellcheck disable=SC2046
    "$python" "$root/tools/dynamic_range_check.py" --make "$dir/$v/m.h5" "$dir/$v/x.npy" $([ $v = int ] && echo --int-input) \
        >"$dir/make.log" 2>&1 || {
        cat "$dir/make.log"
        exit 1
    }
    "$systolic" quantize "$dir/$v/m.h5" --dataset imdb -o "$dir/$v/systolic.tflite" >"$dir/q.log" 2>&1 || {
        cat "$dir/q.log"
        exit 1
    }
    echo "$v input: $(grep "^operators" "$dir/q.log")"
    "$python" "$root/tools/dynamic_range_check.py" "$dir/$v/m.h5" "$dir/$v/systolic.tflite" "$dir/$v" --x "$dir/$v/x.npy" \
        >"$dir/check.log" 2>&1
    rc=$?
    grep "^dynamic_range_check\|^FAIL\|^interpreter" "$dir/check.log"
    [ $rc -eq 0 ] || exit 1
    # systolic's hybrid kernels on both files against the interpreter's outputs on each
    for f in systolic tensorflow; do
        "$systolic" predict "$dir/$v/$f.tflite" --input "$dir/$v/x.npy" --output "$dir/$v/predict_$f.npy" >"$dir/p.log" 2>&1 || {
            cat "$dir/p.log"
            exit 1
        }
        "$python" -c 'import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
d = np.abs(a - b) if a.shape == b.shape else np.array([np.inf])
print("systolic predict %s.tflite: %d outputs within %.2g of tf.lite.Interpreter%ss (mean %.2g; %d within 1e-6)" % (
    sys.argv[3], a.size, d.max(), chr(39), d.mean(), int(np.sum(d <= 1e-6))))
sys.exit(not (d.max() <= 5e-3 and d.mean() <= 5e-4))' "$dir/$v/predict_$f.npy" "$dir/$v/${f}_y.npy" "$f" || fail "systolic predict $f.tflite differs from the interpreter"
    done
done
# refused: an LSTM whose gate matrices the converter leaves float32
"$python" "$root/tools/dynamic_range_check.py" --make "$dir/small.h5" "$dir/xs.npy" --units 8 --dim 8 >"$dir/make.log" 2>&1 || {
    cat "$dir/make.log"
    exit 1
}
msg=$("$systolic" quantize "$dir/small.h5" --dataset imdb -o "$dir/small.tflite" 2>&1) && fail "a small LSTM was quantized"
case "$msg" in *"(LSTM) has gate matrices"*"under 1,024 elements"*) echo "refused: a float LSTM named" ;;
*) fail "small LSTM: $msg" ;; esac
[ ! -e "$dir/small.tflite" ] || fail "the refused model left a file"
