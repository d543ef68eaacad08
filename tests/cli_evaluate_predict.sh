#!/bin/sh
# cli_evaluate_predict.sh - evaluate and predict give what a user would check
# them against. A short seeded run of the tutorial CNN saves its weights
# (--save-weights) after validating on the first 200 test images; then
#
#   evaluate  evaluate --load-weights on those 200 images prints the loss and
#             accuracy the run's validation printed, on 2 replicas (as the
#             run) and on 1 (results do not depend on the replica count
#             beyond float rounding: within 1e-5 relative here, and the
#             4 printed decimals' rounding);
#   predict   predict --load-weights prints, for those 200 images, classes
#             that are right exactly as often as evaluate's accuracy says.
#
#   sh tests/cli_evaluate_predict.sh build/systolic evaluate|predict
cli=$1
what=$2
dir=$(mktemp -d "${TMPDIR:-/tmp}/systolic-cli-evaluate-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
fail() { echo "cli_evaluate_predict: $*"; exit 1; }
# run NAME ARGS...: the command's output in $dir/NAME.txt; fail unless it exits 0
run() {
    name=$1
    shift
    "$cli" "$@" >"$dir/$name.txt" 2>&1
    rc=$?
    [ $rc -eq 0 ] || { cat "$dir/$name.txt"; fail "$* exited with status $rc"; }
}
# metric NAME FILE: the last value printed for NAME (as "NAME: 0.1234")
metric() { sed -n "s/.*[^_a-z]$1: \([0-9.]*\).*/\1/p; s/^$1: \([0-9.]*\).*/\1/p" "$2" | tail -n 1; }

run train train fashion_mnist_cnn --tpu cpu:2 --epochs 1 --steps-per-epoch 3 --batch-size 200 --validation-freq 1 \
    --validation-steps 1 --seed 3 --verbose 2 --save-weights "$dir/w.h5"
val_loss=$(metric val_loss "$dir/train.txt")
val_acc=$(metric val_sparse_categorical_accuracy "$dir/train.txt")
[ -n "$val_loss" ] && [ -n "$val_acc" ] || { cat "$dir/train.txt"; fail "no validation in the run's output"; }
run evaluate evaluate fashion_mnist_cnn --tpu cpu:2 --batch-size 200 --steps 1 --verbose 0 --load-weights "$dir/w.h5"
loss=$(metric loss "$dir/evaluate.txt")
acc=$(metric sparse_categorical_accuracy "$dir/evaluate.txt")

case $what in
evaluate)
    [ "$loss" = "$val_loss" ] && [ "$acc" = "$val_acc" ] ||
        fail "evaluate: loss $loss - accuracy $acc; the run validated at val_loss $val_loss - val_accuracy $val_acc"
    run evaluate1 evaluate fashion_mnist_cnn --tpu cpu:1 --batch-size 200 --steps 1 --verbose 0 --load-weights "$dir/w.h5"
    loss1=$(metric loss "$dir/evaluate1.txt")
    acc1=$(metric sparse_categorical_accuracy "$dir/evaluate1.txt")
    awk -v a="$loss" -v b="$loss1" 'BEGIN { d = a - b; t = 1e-5 * a + 1.5e-4; exit !(a > 0 && d <= t && d >= -t) }' &&
        [ "$acc1" = "$acc" ] || fail "evaluate on 1 replica: loss $loss1 - accuracy $acc1; on 2: $loss - $acc"
    echo "evaluate: loss $loss - sparse_categorical_accuracy $acc, as the run's validation, on 1 and 2 replicas"
    ;;
predict)
    run predict predict fashion_mnist_cnn --tpu cpu:2 --batch-size 200 --count 200 --verbose 0 --load-weights "$dir/w.h5"
    # rows: sample label predicted probability; the class's probability is in (0, 1]
    right=$(awk 'NR > 1 && NF == 4 { n++; if ($3 < 0 || $3 > 9 || !($4 > 0 && $4 <= 1)) bad++; if ($2 == $3) r++ }
                 END { if (n != 200 || bad) print "bad"; else print r + 0 }' "$dir/predict.txt")
    [ "$right" != bad ] || { cat "$dir/predict.txt"; fail "predict: not 200 rows of a class 0-9 and its probability"; }
    [ "$(awk -v r="$right" 'BEGIN { printf "%.4f", r / 200 }')" = "$acc" ] ||
        fail "predict: $right of 200 classes right; evaluate's accuracy on them is $acc"
    echo "predict: $right of 200 classes right, evaluate's sparse_categorical_accuracy $acc"
    ;;
*) fail "usage: sh tests/cli_evaluate_predict.sh SYSTOLIC evaluate|predict" ;;
esac
