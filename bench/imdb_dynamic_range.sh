#!/bin/sh
# imdb_dynamic_range.sh - issue 18 point 3 for IMDB: the tutorial LSTM
# (imdb_lstm: Embedding(15000, 32) -> LSTM(100) -> Dense(1, sigmoid)) trained
# in float, quantized dynamic-range, its test accuracy before and after
# (docs/benchmarks.md, docs/design/tflite.md "Dynamic-range quantization").
#
#   SYSTOLIC_DATASETS=... sh bench/imdb_dynamic_range.sh build/systolic [EPOCHS] [DIR]
#
# 1. systolic train imdb_lstm --epochs EPOCHS (default 2) --save-model DIR/imdb_lstm.h5
# 2. systolic evaluate DIR/imdb_lstm.h5 --dataset imdb           the float model
# 3. systolic quantize DIR/imdb_lstm.h5 -o DIR/systolic.tflite   dynamic-range
# 4. systolic evaluate DIR/systolic.tflite --dataset imdb        systolic's hybrid kernels
# 5. tools/imdb_dynamic_range.py: Keras's float accuracy, tf.lite.Interpreter's
#    on systolic's file and on TFLiteConverter's own dynamic-range file of the
#    same .h5 (written to DIR/converter.tflite), which step 6 runs too:
# 6. systolic evaluate DIR/converter.tflite --dataset imdb
# Each step's wall time is printed; they mean something on a quiet machine only.
# Python: $SYSTOLIC_PYTHON or <root>/.venv/bin/python (TensorFlow 2.15).
systolic=${1:-build/systolic}
epochs=${2:-2}
dir=${3:-$(mktemp -d "${TMPDIR:-/tmp}/systolic-imdb-dr-XXXXXX")}
root=$(cd "$(dirname "$0")/.." && pwd)
python=${SYSTOLIC_PYTHON:-$root/.venv/bin/python}
mkdir -p "$dir"
step() {
    t0=$(date +%s.%N)
    "$@" || { echo "imdb_dynamic_range: failed: $*"; exit 1; }
    echo "  ($(echo "$(date +%s.%N) - $t0" | bc) s)"
}
echo "== float: systolic train imdb_lstm --epochs $epochs"
step "$systolic" train imdb_lstm --epochs "$epochs" --verbose 2 --save-model "$dir/imdb_lstm.h5"
echo "== float: systolic evaluate"
step "$systolic" evaluate "$dir/imdb_lstm.h5" --dataset imdb
echo "== systolic quantize (dynamic-range)"
step "$systolic" quantize "$dir/imdb_lstm.h5" --dataset imdb -o "$dir/systolic.tflite"
echo "== dynamic-range: systolic evaluate systolic.tflite"
step "$systolic" evaluate "$dir/systolic.tflite" --dataset imdb
echo "== TensorFlow: Keras float, tf.lite.Interpreter on systolic's and the converter's files"
step "$python" "$root/tools/imdb_dynamic_range.py" "$dir/imdb_lstm.h5" "$dir/systolic.tflite" --converter "$dir/converter.tflite"
echo "== dynamic-range: systolic evaluate converter.tflite"
step "$systolic" evaluate "$dir/converter.tflite" --dataset imdb
echo "files in $dir"
