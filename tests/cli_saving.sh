#!/bin/sh
# cli_saving.sh - --save-weights, --save-model and --load-weights on the
# command line: a short training run saves its weights and the full model;
# evaluate with --load-weights (either file) gives the loss the run's last
# validation gave on the same batches; files of another architecture are
# refused with exit status 1 and the reason, before any training.
#
#   sh tests/cli_saving.sh build/systolic tests/data/keras
cli=$1
fixtures=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/systolic-cli-saving-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
fail() { echo "cli_saving: $*"; exit 1; }

"$cli" train fashion_mnist_cnn --epochs 1 --steps-per-epoch 2 --batch-size 500 --validation-freq 1 \
    --validation-steps 2 --verbose 2 --save-weights "$dir/w.h5" --save-model "$dir/m.h5" >"$dir/train.txt" 2>&1 ||
    { cat "$dir/train.txt"; fail "train failed"; }
val=$(sed -n 's/.*val_loss: \([0-9.]*\).*/\1/p' "$dir/train.txt" | tail -n 1)
[ -n "$val" ] || { cat "$dir/train.txt"; fail "no val_loss in the training output"; }
for file in w.h5 m.h5; do
    "$cli" evaluate fashion_mnist_cnn --batch-size 500 --steps 2 --verbose 0 --load-weights "$dir/$file" \
        >"$dir/eval.txt" 2>&1 || { cat "$dir/eval.txt"; fail "evaluate --load-weights $file failed"; }
    loss=$(sed -n 's/^loss: \([0-9.]*\).*/\1/p' "$dir/eval.txt")
    [ "$loss" = "$val" ] || fail "evaluate with $file: loss $loss, the trained model's val_loss $val"
done
echo "cli_saving: evaluate --load-weights gives the trained model's loss ($val)"

# another architecture: the IMDB model's 3 layers with weights against 2
"$cli" summary imdb_lstm --load-weights "$dir/w.h5" >"$dir/out.txt" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "summary imdb_lstm --load-weights of the CNN's file: exit status $rc, expected 1"
grep -q "systolic summary: --load-weights: .*w.h5: layer count mismatch .*expected 3 layers .*found 2 saved layers" \
    "$dir/out.txt" || { cat "$dir/out.txt"; fail "the layer count mismatch is not explained"; }
# the same layers with other shapes: the layer and both shapes
"$cli" evaluate fashion_mnist_cnn --load-weights "$fixtures/cnn_weights.h5" >"$dir/out.txt" 2>&1
rc=$?
[ $rc -eq 1 ] || fail "evaluate --load-weights of a smaller CNN: exit status $rc, expected 1"
grep -q "shape mismatch in layer #0 (named conv2d .*expects shape (3, 3, 1, 64), .*with shape (3, 3, 1, 4)" \
    "$dir/out.txt" || { cat "$dir/out.txt"; fail "the shape mismatch is not explained"; }
# a --save-model name that is neither .h5 nor .json is refused before training
"$cli" train fashion_mnist_cnn --save-model "$dir/model.keras" >"$dir/out.txt" 2>&1
rc=$?
[ $rc -eq 2 ] && grep -q "save-model" "$dir/out.txt" || { cat "$dir/out.txt"; fail "--save-model model.keras: $rc"; }
echo "cli_saving: mismatched files and names refused"
