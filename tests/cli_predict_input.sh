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
# Issue 17, any model: multiio.h5 (inputs in_a, in_b; outputs cls, reg)
# takes one --input per input (in order, or NAME=FILE) and writes OUT.npz
# (one array per output, named after it) or OUT.csv (columns named after
# the outputs); each wrong count, name, shape and output is refused. In the
# keras run the arrays are compared with tf.keras's predict on the same
# files (multiio.h5 on tests/golden/multiio.npz's inputs, given each way,
# a keyless .npz among them; functional_dag.json with weights Keras drew,
# saved as .h5).
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
    TF_CPP_MIN_LOG_LEVEL=3 "$python" - "$data" "$dir" "$root/tests/golden/multiio.npz" <<'PY' || exit 1
import sys, numpy as np, tensorflow as tf
data, d, golden = sys.argv[1], sys.argv[2], sys.argv[3]
x = np.load(data + "/cnn.npz")["x"]
np.save(d + "/x32.npy", x)
np.save(d + "/x64.npy", x.astype(np.float64))
np.save(d + "/x16.npy", np.round(x * 100).astype(np.int16))
np.savez(d + "/xs.npz", images=x, other=np.zeros(3))
g = np.load(golden)
np.savez(d + "/named.npz", in_b=g["x_b"], in_a=g["x_a"], other=np.zeros(2))  # keys in another order
np.save(d + "/x_b64.npy", g["x_b"].astype(np.float64))
# functional_dag.json with weights Keras draws, saved whole, and 5 samples
m = tf.keras.models.model_from_json(open(data + "/functional_dag.json").read())
rng = np.random.default_rng(7)
m.set_weights([rng.uniform(-0.5, 0.5, w.shape).astype(np.float32) for w in m.get_weights()])
m.save(d + "/dag.h5")
np.save(d + "/dag_x.npy", rng.uniform(-1, 1, (5, 8)).astype(np.float32))
PY
    for f in x32.npy x64.npy x16.npy xs.npz:images; do
        expect 0 "^wrote $dir/p.npy: float32 (6, 10)$" "$systolic" predict "$data/cnn.h5" --input "$dir/$f" \
            --output "$dir/p.npy" --verbose 0
        cp "$dir/p.npy" "$dir/p_${f%%[.:]*}.npy"
    done
    # issue 17: multiio.h5 given its inputs by position, by name (in another order, one float64) and as a keyless
    # .npz whose arrays are named after them; functional_dag as .h5, also to CSV
    g=$root/tests/golden/multiio.npz
    expect 0 "^wrote $dir/m1.npz: cls float32 (8, 3), reg float32 (8, 2)$" "$systolic" predict "$data/multiio.h5" \
        --input "$g:x_a" --input "$g:x_b" --output "$dir/m1.npz" --verbose 0
    expect 0 "^wrote $dir/m2.npz: cls float32 (8, 3), reg float32 (8, 2)$" "$systolic" predict "$data/multiio.h5" \
        --input "in_b=$dir/x_b64.npy" --input "in_a=$g:x_a" --output "$dir/m2.npz" --verbose 0
    expect 0 "^wrote $dir/m3.npz: " "$systolic" predict "$data/multiio.h5" --input "$dir/named.npz" --output "$dir/m3.npz" \
        --verbose 0
    expect 0 "^wrote $dir/m.csv: " "$systolic" predict "$data/multiio.h5" --input "$dir/named.npz" --output "$dir/m.csv" \
        --verbose 0
    expect 0 "^wrote $dir/dag.npy: float32 (5, 8)$" "$systolic" predict "$dir/dag.h5" --input "$dir/dag_x.npy" \
        --output "$dir/dag.npy" --verbose 0
    expect 0 "^wrote $dir/dag.csv: float32 (5, 8)$" "$systolic" predict "$dir/dag.h5" --input "$dir/dag_x.npy" \
        --output "$dir/dag.csv" --verbose 0
    TF_CPP_MIN_LOG_LEVEL=3 "$python" - "$data" "$dir" "$g" <<'PY' || exit 1
import sys, numpy as np, tensorflow as tf
data, d, golden = sys.argv[1], sys.argv[2], sys.argv[3]
g = np.load(golden)
m = tf.keras.models.load_model(data + "/multiio.h5")
want = dict(zip(m.output_names, m.predict([g["x_a"], g["x_b"]], verbose=0)))
assert list(want) == ["cls", "reg"], list(want)
for name in ("m1", "m2", "m3"):
    p = np.load("%s/%s.npz" % (d, name))
    assert sorted(p.files) == ["cls", "reg"], (name, p.files)  # what np.savez(OUT, **outputs) holds
    for k, v in want.items():
        assert p[k].dtype == np.float32 and p[k].shape == v.shape, (name, k, p[k].dtype, p[k].shape)
        err = np.abs(p[k] - v).max()
        assert err <= 1e-5, "%s %s: |systolic - keras| = %g" % (name, k, err)
rows = open(d + "/m.csv").read().splitlines()
assert rows[0] == "cls_0,cls_1,cls_2,reg_0,reg_1" and len(rows) == 9, rows[:2]
csv = np.array([[float(v) for v in r.split(",")] for r in rows[1:]], np.float32)
p = np.load(d + "/m1.npz")
assert np.array_equal(csv, np.concatenate([p["cls"], p["reg"]], axis=1)), "the CSV's values are the .npz's"
dag = tf.keras.models.load_model(d + "/dag.h5")
want = dag.predict(np.load(d + "/dag_x.npy"), verbose=0)
got = np.load(d + "/dag.npy")
assert got.shape == want.shape and np.abs(got - want).max() <= 1e-5, ("functional_dag", np.abs(got - want).max())
rows = open(d + "/dag.csv").read().splitlines()
assert rows[0] == ",".join("%s_%d" % (dag.output_names[0], k) for k in range(8)), (rows[0], dag.output_names)
print("cli_predict_input: multiio.h5 (3 ways) and functional_dag match tf.keras's predict to 1e-5")
PY
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
expect 1 "lstm.npz:x: the array is (5, 12) int32, but input 'conv2d_input' of model 'sequential' takes (None, 10, 10, 1)" \
    "$systolic" predict "$data/cnn.h5" --input "$data/lstm.npz:x" --output "$dir/keep.npy"
# issue 17: an archive without a key gives the input its array of the same name
expect 1 "cnn.npz: no array 'conv2d_input' in the archive; it has 'x', 'y' (for input 'conv2d_input'" \
    "$systolic" predict "$data/cnn.h5" --input "$data/cnn.npz" --output "$dir/keep.npy"
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
expect 2 "--input FILE.npz:KEY needs the KEY" "$systolic" predict "$data/cnn.h5" --input "$data/cnn.npz:" --output "$dir/p.npy"
expect 2 "--input takes a NumPy file" "$systolic" predict fashion_mnist_cnn --input "$dir/x.csv" --output "$dir/p.npy"
expect 2 "--count is for the printed table" "$systolic" predict fashion_mnist_cnn --input "$dir/f4.npy" --output "$dir/p.npy" --count 3
expect 2 "--dataset and --input both give the data" "$systolic" predict "$data/cnn.h5" --dataset mnist --input "$dir/f4.npy" --output "$dir/p.npy"

# issue 17: a model with two inputs and two outputs (multiio.h5: in_a (None, 4), in_b (None, 3); cls, reg)
g=$root/tests/golden/multiio.npz
m=$data/multiio.h5
expect 0 "^wrote $dir/m.npz: cls float32 (8, 3), reg float32 (8, 2)$" "$systolic" predict "$m" --input "$g:x_a" \
    --input "$g:x_b" --output "$dir/m.npz" --verbose 0
expect 0 "^wrote $dir/n.npz: cls float32 (8, 3), reg float32 (8, 2)$" "$systolic" predict "$m" --input "in_b=$g:x_b" \
    --input "in_a=$g:x_a" --output "$dir/n.npz" --verbose 0
cmp -s "$dir/m.npz" "$dir/n.npz" || fail "the inputs by name and by position predict differently"
head -c 200 "$dir/m.npz" | LC_ALL=C grep -aq "cls.npy.*{'descr': '<f4', 'fortran_order': False, 'shape': (8, 3), }" ||
    fail "m.npz does not start with cls.npy, float32 (8, 3)"
expect 0 "^wrote $dir/m.csv: cls float32 (8, 3), reg float32 (8, 2)$" "$systolic" predict "$m" --input "$g:x_a" \
    --input "$g:x_b" --output "$dir/m.csv" --verbose 0
[ "$(head -1 "$dir/m.csv")" = "cls_0,cls_1,cls_2,reg_0,reg_1" ] || fail "m.csv's header: $(head -1 "$dir/m.csv")"
[ "$(wc -l <"$dir/m.csv")" -eq 9 ] || fail "m.csv has not a header and 8 rows"
[ "$(awk -F, '{ print NF }' "$dir/m.csv" | sort -u)" = 5 ] || fail "m.csv's rows are not 5 values each"
# a Functional model with one output: the CSV's columns take the output layer's name
{ npy '<f4' '(3, 8)'; head -c 96 /dev/zero; } >"$dir/f4_8.npy"
expect 0 "^wrote $dir/dag.csv: float32 (3, 8)$" "$systolic" predict "$data/functional_dag.json" --input "$dir/f4_8.npy" \
    --output "$dir/dag.csv" --verbose 0
[ "$(head -1 "$dir/dag.csv")" = "concatenate_0,concatenate_1,concatenate_2,concatenate_3,concatenate_4,concatenate_5,concatenate_6,concatenate_7" ] ||
    fail "dag.csv's header: $(head -1 "$dir/dag.csv")"
# refused: a usage error (2) names the model's inputs or outputs; a wrong array (1) names the file and the input
expect 2 "--output: $dir/keep.npy: model 'multiio' has 2 outputs (cls, reg) and an .npy file holds one array: give FILE.npz" \
    "$systolic" predict "$m" --input "$g:x_a" --input "$g:x_b" --output "$dir/keep.npy"
expect 2 "--input: model 'multiio' takes 2 inputs, in this order: in_a (None, 4), in_b (None, 3); 1 --input given" \
    "$systolic" predict "$m" --input "$g:x_a" --output "$dir/keep.npz"
expect 2 "model 'multiio' takes 2 inputs, in this order: in_a (None, 4), in_b (None, 3); 3 --input given" \
    "$systolic" predict "$m" --input "$g:x_a" --input "$g:x_b" --input "$g:x_b" --output "$dir/keep.npz"
expect 2 "--input: in_c=$g:x_b: model 'multiio' has no input 'in_c'; its inputs: in_a (None, 4), in_b (None, 3)" \
    "$systolic" predict "$m" --input "in_a=$g:x_a" --input "in_c=$g:x_b" --output "$dir/keep.npz"
expect 2 "--input: no array for input 'in_b' of model 'multiio': give in_b=FILE" \
    "$systolic" predict "$m" --input "in_a=$g:x_a" --output "$dir/keep.npz"
expect 2 "give every --input as NAME=FILE (naming the model's input layers) or none" \
    "$systolic" predict "$m" --input "in_a=$g:x_a" --input "$g:x_b" --output "$dir/keep.npz"
expect 2 "--input: input 'in_a' is given twice" \
    "$systolic" predict "$m" --input "in_a=$g:x_a" --input "in_a=$g:x_a" --output "$dir/keep.npz"
expect 2 "--input FILE.npz without a key gives each model input the array named after it: give it alone" \
    "$systolic" predict "$m" --input "$g" --input "$g:x_b" --output "$dir/keep.npz"
expect 1 "$g:x_b: the array is (8, 3) float32, but input 'in_a' of model 'multiio' takes (None, 4) (samples first)" \
    "$systolic" predict "$m" --input "$g:x_b" --input "$g:x_a" --output "$dir/keep.npz"
expect 1 "$g: no array 'in_a' in the archive; it has 'x_a', 'x_b', [^(]*(for input 'in_a' of model 'multiio'; its inputs: in_a (None, 4), in_b (None, 3))" \
    "$systolic" predict "$m" --input "$g" --output "$dir/keep.npz"
{ npy '<f4' '(7, 3)'; head -c 84 /dev/zero; } >"$dir/b7.npy"
expect 1 "input 'in_b' has 7 samples but input 'in_a' has 8; every input needs one row per sample" \
    "$systolic" predict "$m" --input "$g:x_a" --input "$dir/b7.npy" --output "$dir/keep.npz"
echo keep >"$dir/keep.npz"
expect 1 "NPY dtype '<U1' is not supported.*(for input 'in_b' of model 'multiio'" \
    "$systolic" predict "$m" --input "$g:x_a" --input "$dir/str.npy" --output "$dir/keep.npz"
[ "$(cat "$dir/keep.npz")" = keep ] || fail "a failed run changed --output's .npz"
i=0 many=
while [ $i -lt 17 ]; do many="$many --input $g:x_a"; i=$((i + 1)); done
expect 2 "--input is given more than 16 times" "$systolic" predict "$m" $many --output "$dir/keep.npz"
echo "cli_predict_input: predict --input/--output and its errors as expected"
