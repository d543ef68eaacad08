#!/bin/sh
# cli_checkpoint_kill.sh - a training run killed with SIGKILL part way and
# resumed with --resume ends with exactly the weights, bit for bit, of the
# same run never interrupted: their last checkpoints (weights, optimizer
# slots, step, position) are the same bytes.
#
#   sh tests/cli_checkpoint_kill.sh build/systolic
# Needs the Fashion-MNIST files ($SYSTOLIC_DATASETS or the cache).
systolic=$1
dir=$(mktemp -d "${TMPDIR:-/tmp}/systolic-kill-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
run="train fashion_mnist_cnn --epochs 3 --steps-per-epoch 40 --batch-size 50 --validation-freq 1
     --validation-steps 2 --verbose 0 --seed 7 --save-checkpoints-steps 5 --keep-checkpoints 3"
last=ckpt-120.syckpt

# shellcheck disable=SC2086
"$systolic" $run --model-dir "$dir/whole" || exit 1
test -f "$dir/whole/$last" || { echo "the uninterrupted run left no $last"; exit 1; }

# shellcheck disable=SC2086
"$systolic" $run --model-dir "$dir/killed" &
pid=$!
# kill it once it has checkpointed step 15 or later (and before it ends)
while kill -0 "$pid" 2>/dev/null; do
    if ls "$dir/killed" 2>/dev/null | grep -Eq '^ckpt-([2-9][0-9]|1[5-9])\.syckpt$'; then
        kill -KILL "$pid"
        break
    fi
    sleep 0.01
done
wait "$pid"
status=$?
if [ "$status" -ne 137 ]; then
    echo "the run was not killed (exit status $status): it ended before step 15's checkpoint was seen"
    exit 1
fi
if [ -f "$dir/killed/$last" ]; then
    echo "the killed run had already finished"
    exit 1
fi
echo "killed after: $(ls "$dir/killed" | tr '\n' ' ')"

# shellcheck disable=SC2086
"$systolic" $run --model-dir "$dir/killed" --resume || exit 1
if ! cmp "$dir/whole/$last" "$dir/killed/$last"; then
    echo "resumed after SIGKILL, the final checkpoint differs from the uninterrupted run's"
    exit 1
fi
echo "resumed after SIGKILL: $last is identical to the uninterrupted run's"
