#!/bin/sh
# cli_predict_input.sh - `systolic predict MODEL --input FILE --output OUT.npy`
# (issue 15): a user's samples through a model, the whole output written as
# float32 .npy; and each way the input can be wrong, with its exit status
# and message. Needs no Python: the inputs are Keras's fixtures
# (tests/data/keras/cnn.npz: x and Keras's predictions y) and .npy files
# written here with printf. With `keras` as the third argument it instead
# compares with Keras (exit 77 without a Python that imports TensorFlow):
# the output equals cnn.npz's y (Keras's model.predict when the fixture was
# made) and tf.keras's predict on the same .h5 now, to 1e-5, for float32,
# float64 and int16 inputs (Keras casts each to float32).
#
#   sh tests/cli_predict_input.sh build/systolic <repository root> [keras]
systolic=$1
root=$2
data=$root/tests/data/keras
dir=$(mktemp -d "${TMPDIR:-/tmp}/systolic-predict-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
fail() { echo "cli_predict_input: FAILED: $*"; exit 1; }

# expect STATUS REGEX command...: the exit status and a line of the output
expect() {
    want=$1 re=$2
    shift 2
    "$@" >"$dir/out" 2>&1
    got=$?
    [ "$got" = "$want" ] || { cat "$dir/out"; fail "$* exited $got, expected $want"; }
    grep -q -- "$re" "$dir/out" || { cat "$dir/out"; fail "$*: no line matching '$re'"; }
}

# npy DESCR SHAPE: an NPY 1.0 header (data to follow), padded to 64 bytes as numpy pads it
npy() {
    h="{'descr': '$1', 'fortran_order': False, 'shape': $2, }"
    pad=$((64 - (10 + ${#h} + 1) % 64))
    [ $pad = 64 ] && pad=0
    printf '\223NUMPY\001\000'
    n=$((${#h} + pad + 1))
    printf "\\$(printf %03o $((n % 256)))\\$(printf %03o $((n / 256)))"
    printf '%s%*s\n' "$h" $pad ''
}

if [ "$3" = keras ]; then
    python=
    for py in "$SYSTOLIC_PYTHON" "$root/.venv/bin/python" "$root/.gl/bin/python"; do
        if [ -n "$py" ] && "$py" -c 'import numpy, tensorflow' >/dev/null 2>&1; then python=$py; break; fi
    done
    [ -n "$python" ] || { echo "no Python with TensorFlow (\$SYSTOLIC_PYTHON, $root/.venv/bin/python): skipped"; exit 77; }
    "$python" - "$data" "$dir" <<'PY' || exit 1
import sys, numpy as np
data, d = sys.argv[1], sys.argv[2]
x = np.load(data + "/cnn.npz")["x"]
np.save(d + "/x32.npy", x)
np.save(d + "/x64.npy", x.astype(np.float64))
np.save(d + "/x16.npy", np.round(x * 100).astype(np.int16))
np.savez(d + "/xs.npz", images=x, other=np.zeros(3))
PY
    for f in x32.npy x64.npy x16.npy xs.npz:images; do
        expect 0 "^wrote $dir/p.npy: float32 (6, 10)$" "$systolic" predict "$data/cnn.h5" --input "$dir/$f" \
            --output "$dir/p.npy" --verbose 0
        cp "$dir/p.npy" "$dir/p_${f%%[.:]*}.npy"
    done
    TF_CPP_MIN_LOG_LEVEL=3 "$python" - "$data" "$dir" <<'PY' || exit 1
import sys, os, numpy as np, tensorflow as tf
data, d = sys.argv[1], sys.argv[2]
z = np.load(data + "/cnn.npz")
m = tf.keras.models.load_model(data + "/cnn.h5")
x = z["x"]
for name, xin in (("x32", x), ("x64", x.astype(np.float64)), ("x16", np.round(x * 100).astype(np.int16)),
                  ("xs", x)):
    p = np.load("%s/p_%s.npy" % (d, name))
    want = m.predict(xin, verbose=0)
    assert p.dtype == np.float32 and p.shape == want.shape, (name, p.dtype, p.shape)
    err = np.abs(p - want).max()
    assert err <= 1e-5, "%s: |systolic - keras| = %g" % (name, err)
    if name == "x32":
        assert np.abs(p - z["y"]).max() <= 1e-5
print("cli_predict_input: predict --input matches tf.keras's model.predict to 1e-5 (float32, float64, int16, npz)")
PY
    exit 0
fi

# a Keras .h5 on an archive's array: the whole output, as np.save writes float32 (6, 10)
expect 0 "^wrote $dir/p.npy: float32 (6, 10)$" "$systolic" predict "$data/cnn.h5" --input "$data/cnn.npz:x" \
    --output "$dir/p.npy" --verbose 0
head -c 128 "$dir/p.npy" | grep -q "{'descr': '<f4', 'fortran_order': False, 'shape': (6, 10), }" ||
    fail "p.npy's header is not numpy's for float32 (6, 10)"
[ "$(wc -c <"$dir/p.npy")" -eq $((128 + 6 * 10 * 4)) ] || fail "p.npy is not 128 + 240 bytes"
# the same samples read back from the .npy written here give the same bytes
"$systolic" predict "$data/cnn.h5" --input "$dir/p.npy" --output "$dir/bad.npy" >/dev/null 2>&1 &&
    fail "predictions (6, 10) accepted as images"
# a built-in model on uint8 images (cast to float32, as Keras does): zeros give what float32 zeros give
{ npy '|u1' '(2, 28, 28, 1)'; head -c 1568 /dev/zero; } >"$dir/u8.npy"
{ npy '<f4' '(2, 28, 28, 1)'; head -c 6272 /dev/zero; } >"$dir/f4.npy"
expect 0 "float32 (2, 10)" "$systolic" predict fashion_mnist_cnn --input "$dir/u8.npy" --output "$dir/u8_p.npy" --verbose 0
expect 0 "float32 (2, 10)" "$systolic" predict fashion_mnist_cnn --input "$dir/f4.npy" --output "$dir/f4_p.npy" --verbose 0
cmp -s "$dir/u8_p.npy" "$dir/f4_p.npy" || fail "uint8 zeros and float32 zeros predict differently"

# errors: each names what is wrong; nothing already at --output is lost
echo keep >"$dir/keep.npy"
expect 1 "lstm.npz:x: the array is (5, 12) int32, but model 'sequential' takes inputs of shape (None, 10, 10, 1)" \
    "$systolic" predict "$data/cnn.h5" --input "$data/lstm.npz:x" --output "$dir/keep.npy"
expect 1 "no array 'x_test' in the archive; it has 'x', 'y'" \
    "$systolic" predict "$data/cnn.h5" --input "$data/cnn.npz:x_test" --output "$dir/keep.npy"
{ npy '<U1' '(2, 10, 10, 1)'; head -c 800 /dev/zero; } >"$dir/str.npy"
expect 1 "NPY dtype '<U1' is not supported" \
    "$systolic" predict "$data/cnn.h5" --input "$dir/str.npy" --output "$dir/keep.npy"
head -c 300 "$dir/f4.npy" >"$dir/trunc.npy"
expect 1 "truncated NPY data" "$systolic" predict fashion_mnist_cnn --input "$dir/trunc.npy" --output "$dir/keep.npy"
expect 1 "cannot open '$dir/none.npy'" "$systolic" predict fashion_mnist_cnn --input "$dir/none.npy" --output "$dir/keep.npy"
{ npy '<f4' '(0, 28, 28, 1)'; } >"$dir/empty.npy"
expect 1 "holds no samples" "$systolic" predict fashion_mnist_cnn --input "$dir/empty.npy" --output "$dir/keep.npy"
[ "$(cat "$dir/keep.npy")" = keep ] || fail "a failed run changed --output's file"
expect 1 "output" "$systolic" predict fashion_mnist_cnn --input "$dir/f4.npy" --output "$dir/no/such/dir/p.npy" --verbose 0
# usage errors (exit status 2), before anything is loaded
expect 2 "--input FILE and --output FILE.npy go together" "$systolic" predict fashion_mnist_cnn --input "$dir/f4.npy"
expect 2 "--input FILE and --output FILE.npy go together" "$systolic" predict fashion_mnist_cnn --output "$dir/p.npy"
expect 2 "--output FILE must end in .npy" "$systolic" predict fashion_mnist_cnn --input "$dir/f4.npy" --output "$dir/p.txt"  # issue 17: .csv is taken now
expect 2 "needs the array's key: FILE.npz:KEY" "$systolic" predict "$data/cnn.h5" --input "$data/cnn.npz" --output "$dir/p.npy"
expect 2 "--input takes a NumPy file" "$systolic" predict fashion_mnist_cnn --input "$dir/x.csv" --output "$dir/p.npy"
expect 2 "--count is for the printed table" "$systolic" predict fashion_mnist_cnn --input "$dir/f4.npy" --output "$dir/p.npy" --count 3
expect 2 "--dataset and --input both give the data" "$systolic" predict "$data/cnn.h5" --dataset mnist --input "$dir/f4.npy" --output "$dir/p.npy"
echo "cli_predict_input: predict --input/--output and its errors as expected"
