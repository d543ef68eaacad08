#!/bin/sh
# cli_nan_loss.sh - a run whose loss becomes NaN (--learning-rate 1e30
# makes the weights overflow within two steps) says so: the progress line
# shows "loss: nan" as Keras's does (never C's "-nan"), a warning names the
# epoch and step, and the run goes on to the end with exit status 0, as
# Keras's fit does. With --terminate-on-nan it stops after that batch with
# Keras's "Batch N: Invalid loss, terminating training", exits 1, and
# writes no --save-weights (a file already there keeps its bytes).
#
#   sh tests/cli_nan_loss.sh build/systolic
cli=$1
dir=$(mktemp -d "${TMPDIR:-/tmp}/systolic-nan-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
fail() { cat "$dir/out.txt"; echo "cli_nan_loss: $*"; exit 1; }
args="fashion_mnist_cnn --epochs 2 --steps-per-epoch 3 --batch-size 50 --learning-rate 1e30 --validation-freq 1
      --validation-steps 1 --verbose 2"

"$cli" train $args >"$dir/out.txt" 2>&1
rc=$?
[ $rc -eq 0 ] || fail "a run gone NaN: exit status $rc, expected 0 (Keras trains on)"
grep -q ": -nan" "$dir/out.txt" && fail "'-nan' printed"
grep -q "^3/3 - .* - loss: nan - sparse_categorical_accuracy: [0-9.]* - val_loss: nan" "$dir/out.txt" ||
    fail "no progress line with loss: nan"
[ "$(grep -c "warning: fit: epoch 1, step [0-9]*: the loss is nan; training goes on" "$dir/out.txt")" -eq 1 ] ||
    fail "not exactly one warning that the loss is nan"
grep -q "^Epoch 2/2" "$dir/out.txt" || fail "training did not go on to epoch 2"
echo "cli_nan_loss: the loss shows as nan, one warning, training goes on"

echo keep >"$dir/w.h5"
"$cli" train $args --terminate-on-nan --save-weights "$dir/w.h5" >"$dir/out.txt" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "--terminate-on-nan: exit status $rc, expected 1"
grep -q "^Batch [0-9]*: Invalid loss, terminating training$" "$dir/out.txt" || fail "no TerminateOnNaN message"
grep -q "training stopped in epoch 1: the loss is not a finite number; nothing was saved" "$dir/out.txt" ||
    fail "no message that training stopped and nothing was saved"
grep -q "^Epoch 2/2" "$dir/out.txt" && fail "training went on to epoch 2"
grep -q "training goes on" "$dir/out.txt" && fail "the warning says training goes on, but it stopped"
[ "$(cat "$dir/w.h5")" = keep ] || fail "--save-weights replaced the file with NaN weights"
echo "cli_nan_loss: --terminate-on-nan stops after the batch, exit status 1, nothing saved"
