#!/bin/sh
# cli_dtype_policy.sh - --dtype-policy (issue 16, mixed_bfloat16) on the
# command line: a short run under mixed_bfloat16 trains and saves a model
# whose JSON carries Keras's Policy; a model file whose layers say "float32"
# evaluates under the flag's policy; a policy
# systolic does not run is refused with exit status 2 before anything runs.
#
#   sh tests/cli_dtype_policy.sh build/systolic
cli=$1
dir=$(mktemp -d "${TMPDIR:-/tmp}/systolic-cli-policy-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
fail() { echo "cli_dtype_policy: $*"; exit 1; }

"$cli" train fashion_mnist_cnn --epochs 1 --steps-per-epoch 2 --batch-size 200 --verbose 2 \
    --dtype-policy mixed_bfloat16 --save-model "$dir/m.json" --save-weights "$dir/w.h5" >"$dir/train.txt" 2>&1 ||
    { cat "$dir/train.txt"; fail "train --dtype-policy mixed_bfloat16 failed"; }
grep -q 'loss: [0-9.]* - sparse_categorical_accuracy' "$dir/train.txt" || { cat "$dir/train.txt"; fail "no loss"; }
grep -q '"name": "conv2d", "trainable": true, "dtype": {"module": "keras.mixed_precision", "class_name": "Policy", "config": {"name": "mixed_bfloat16"}' \
    "$dir/m.json" || { cat "$dir/m.json"; fail "the saved JSON has no mixed_bfloat16 Policy for conv2d"; }
grep -q '"class_name": "InputLayer", "config": {[^}]*"dtype": "float32"' "$dir/m.json" ||
    fail "the InputLayer's dtype is not float32"

# the JSON read back evaluates as it was saved, and the flag overrides a file's policy
for policy in "" float32; do
    "$cli" evaluate "$dir/m.json" --dataset fashion_mnist --load-weights "$dir/w.h5" --steps 1 --batch-size 200 \
        --verbose 0 ${policy:+--dtype-policy $policy} >"$dir/eval$policy.txt" 2>&1 ||
        { cat "$dir/eval$policy.txt"; fail "evaluate the saved model (policy '$policy') failed"; }
done
grep -q '^loss: ' "$dir/eval.txt" || { cat "$dir/eval.txt"; fail "no loss from evaluate"; }
cmp -s "$dir/eval.txt" "$dir/evalfloat32.txt" &&
    fail "evaluate under --dtype-policy float32 gave the mixed model's very numbers: $(cat "$dir/eval.txt")"

"$cli" train fashion_mnist_cnn --dtype-policy mixed_float16 >"$dir/out.txt" 2>&1
rc=$?
[ $rc -eq 2 ] || fail "--dtype-policy mixed_float16: exit status $rc, expected 2"
grep -q "^systolic train: --dtype-policy: dtype policy 'mixed_float16' is not supported (supported: \"float32\", \"mixed_bfloat16\")" \
    "$dir/out.txt" || { cat "$dir/out.txt"; fail "the refusal does not say what is supported"; }
echo "cli_dtype_policy: trained, saved and evaluated under mixed_bfloat16; mixed_float16 refused"
