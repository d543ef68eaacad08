#!/bin/sh
# tflite_run.sh - int8 .tflite models made by TensorFlow at test time, run by
# systolic (issue 18, docs/design/tflite.md): tools/tflite_models.py has
# TensorFlow's converter write the Fashion-MNIST tutorial CNN (float input and
# output) and a ResNet-like model (int8 input and output) with the reference
# kernels' outputs on seeded inputs; `systolic predict` must give them
# exactly (bit-identical int8, identical float32). `systolic evaluate
# --dataset fashion_mnist` must print the accuracy TFLite's interpreter gets
# on the same 10,000 test images (tests/tflite_run.py); an unsupported
# operator is refused by name; inputs of the wrong shape or dtype are refused.
# Skipped (77) without a Python with TensorFlow (tests/find_python.sh).
# MODELS: the directory the fixture tflite_models made (tests/tflite_models.sh);
# without it the models are made here.
#
#   sh tests/tflite_run.sh SYSTOLIC ROOT [MODELS]
systolic=$1
root=$2
. "$root/tests/find_python.sh"
. "$root/tests/tflite_models_dir.sh"
find_python 'import importlib.util as u, sys; sys.exit(not (u.find_spec("numpy") and u.find_spec("tensorflow")))'
: "${SYSTOLIC_DATASETS:?}"
dir=$(mktemp -d "${TMPDIR:-/tmp}/systolic-tflite-run-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
fail() { echo "tflite_run: $*"; exit 1; }
tflite_models_dir "$dir" "$3"
"$python" "$root/tests/tflite_run.py" "$dir" "$SYSTOLIC_DATASETS/fashion-mnist" >"$dir/log" 2>&1 ||
    { cat "$dir/log"; fail "tests/tflite_run.py failed"; }
for m in fashion_mnist_cnn resnet_small; do
    "$systolic" predict "$dir/$m.tflite" --input "$dir/${m}_x.npy" --output "$dir/${m}_sy.npy" --batch-size 5 ||
        fail "predict $m failed"
done
"$python" -c "
import numpy as np, sys
for m in ['fashion_mnist_cnn', 'resnet_small']:
    a, b = np.load('$dir/%s_y.npy' % m), np.load('$dir/%s_sy.npy' % m)
    if a.dtype != b.dtype or a.shape != b.shape or not np.array_equal(a, b):
        sys.exit('%s: systolic gives %s %s, %d values differ from TFLite' % (m, b.dtype, b.shape, (a != b).sum()))
    print('%s: %s %s identical to TFLite' % (m, b.dtype, b.shape))
" || fail "outputs differ"
want=$(cat "$dir/cnn_eval.txt")
got=$("$systolic" evaluate "$dir/fashion_mnist_cnn.tflite" --dataset fashion_mnist --batch-size 500) || fail "evaluate failed"
case "$got" in *"$want"*) echo "evaluate: $want, as TFLite's interpreter" ;; *) fail "evaluate printed '$got', TFLite: $want" ;; esac
msg=$("$systolic" predict "$dir/unsupported.tflite" --input "$dir/bad_shape.npy" --output "$dir/u.npy" 2>&1) && fail "TANH model ran"
case "$msg" in *"is TANH (builtin 28)"*"runs QUANTIZE"*) echo "refused: TANH named" ;; *) fail "unsupported op: $msg" ;; esac
msg=$("$systolic" evaluate "$dir/float.tflite" --dataset fashion_mnist 2>&1) && fail "float model ran"
case "$msg" in *"is a float TFLite model"*) echo "refused: float32 model" ;; *) fail "float model: $msg" ;; esac
msg=$("$systolic" predict "$dir/fashion_mnist_cnn.tflite" --input "$dir/bad_shape.npy" --output "$dir/u.npy" 2>&1) && fail "bad shape ran"
case "$msg" in *"takes inputs of shape (-1, 28, 28, 1)"*"not (2, 28, 27, 1)"*) echo "refused: wrong shape" ;; *) fail "bad shape: $msg" ;; esac
msg=$("$systolic" predict "$dir/fashion_mnist_cnn.tflite" --input "$dir/bad_dtype.npy" --output "$dir/u.npy" 2>&1) && fail "bad dtype ran"
case "$msg" in *"takes float32 inputs"*"not float64"*) echo "refused: wrong dtype" ;; *) fail "bad dtype: $msg" ;; esac
msg=$("$systolic" predict "$dir/resnet_small.tflite" --input "$dir/fashion_mnist_cnn_x.npy" --output "$dir/u.npy" 2>&1) && fail "float input to an int8 model ran"
case "$msg" in *"takes inputs of shape (-1, 16, 16, 3)"*) echo "refused: float images for the int8 model" ;; *) fail "int8 model: $msg" ;; esac
