#!/bin/sh
# mnist_estimator_modes.sh - examples/mnist_estimator's two modes agree step by
# step (issue 19, point 4): --use_tpu --tpu cpu:8 (8 cores, CrossShardOptimizer
# averaging their gradients) and --use_tpu=false (the global batch on one
# replica) train the official model from the same initial weights on the same
# batches, so every step's loss -- a "loss = L, step = S" line each step
# (--log_step_count_steps 1 --iterations 1) -- and the evaluation's loss and
# accuracy must agree to float rounding: 1e-4 relative here (4 steps of sums
# in another order), the accuracy exactly. Batches of 16 (2 rows a core):
# small, as CI runs it on every commit. --dropout 0: dropout masks are
# drawn per core, so with dropout the two modes differ from the first step,
# in TensorFlow too.
#
#   sh tests/mnist_estimator_modes.sh build/examples/mnist_estimator
example=$1
dir=$(mktemp -d "${TMPDIR:-/tmp}/systolic-estimator-modes-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
fail() { echo "mnist_estimator_modes: $*"; exit 1; }
common="--dropout 0 --log_step_count_steps 1 --iterations 1 --train_steps 4 --batch_size 16 --eval_steps 2 --enable_predict=false"
for mode in tpu cpu; do
    if [ $mode = tpu ]; then flags="--use_tpu --tpu cpu:8"; else flags="--use_tpu=false"; fi
    # shellcheck disable=SC2086
    "$example" $flags $common >"$dir/$mode.txt" 2>&1
    rc=$?
    [ $rc -eq 0 ] || { cat "$dir/$mode.txt"; fail "$flags exited with status $rc"; }
    # "S L -" per step, then "eval L A"
    sed -n 's/.*:loss = \([^,]*\), step = \([0-9]*\).*/\2 \1 -/p; s/.*Saving dict for global step [0-9]*: accuracy = \([^,]*\), global_step = [0-9]*, loss = \(.*\)$/eval \2 \1/p' \
        "$dir/$mode.txt" >"$dir/$mode.values"
done
[ "$(wc -l <"$dir/tpu.values")" -eq 5 ] || { cat "$dir/tpu.txt"; fail "expected 4 loss lines and the evaluation"; }
paste -d ' ' "$dir/tpu.values" "$dir/cpu.values" | awk '
    $1 != $4 { print "mnist_estimator_modes: line " NR ": step " $1 " against " $4; bad = 1; next }
    { d = $2 - $5; if (d < 0) d = -d; r = d / ($5 < 0 ? -$5 : $5); if (r > worst) worst = r
      if (r > 1e-4) { print "mnist_estimator_modes: " $1 ": loss " $2 " (8 cores) against " $5 " (one)"; bad = 1 } }
    $1 == "eval" && $3 != $6 { print "mnist_estimator_modes: accuracy " $3 " (8 cores) against " $6 " (one)"; bad = 1 }
    END { if (bad) exit 1; printf "mnist_estimator_modes: 4 steps and the evaluation agree (largest relative difference %.2g)\n", worst }'
