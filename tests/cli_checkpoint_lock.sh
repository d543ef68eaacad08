#!/bin/sh
# cli_checkpoint_lock.sh - one --model-dir, one run at a time, and a resume
# past a damaged checkpoint:
#   1. while a run holds DIR (stopped with SIGSTOP after two checkpoints, so
#      the timing cannot decide), a second `systolic train --model-dir DIR
#      --resume` is refused at once, exit status != 0, naming the first's pid,
#      and leaves DIR as it was;
#   2. the first run killed with SIGKILL leaves no lock: a resume then runs;
#   3. that resume, with the newest checkpoint truncated, says it skips that
#      file and why, goes on from the one before, and ends with the final
#      checkpoint of an uninterrupted run, byte for byte.
#
#   sh tests/cli_checkpoint_lock.sh build/systolic
# Needs the Fashion-MNIST files ($SYSTOLIC_DATASETS or the cache).
systolic=$1
dir=$(mktemp -d "${TMPDIR:-/tmp}/systolic-lock-XXXXXX") || exit 1
pid=
trap 'if [ -n "$pid" ]; then kill -KILL "$pid" 2>/dev/null; fi; rm -rf "$dir"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}
run="train fashion_mnist_cnn --epochs 2 --steps-per-epoch 10 --batch-size 100 --validation-steps 1
     --verbose 0 --seed 7 --save-checkpoints-steps 2 --keep-checkpoints 3"
last=ckpt-20.syckpt

# shellcheck disable=SC2086
"$systolic" $run --model-dir "$dir/whole" || fail "the uninterrupted run failed"
test -f "$dir/whole/$last" || fail "the uninterrupted run left no $last"

# shellcheck disable=SC2086
"$systolic" $run --model-dir "$dir/held" &
pid=$!
# stop it once it has written two checkpoints (steps 2 and 4, or later)
while kill -0 "$pid" 2>/dev/null; do
    if ls "$dir/held" 2>/dev/null | grep -Eq '^ckpt-([4-9]|1[0-9])\.syckpt$'; then
        kill -STOP "$pid"
        break
    fi
    sleep 0.01
done
kill -0 "$pid" 2>/dev/null || fail "the first run ended before its fourth step's checkpoint was seen"
test -f "$dir/held/$last" && fail "the first run had already finished"
before=$(ls -A "$dir/held" | tr '\n' ' ')

# shellcheck disable=SC2086
"$systolic" $run --model-dir "$dir/held" --resume >"$dir/second.out" 2>"$dir/second.err"
status=$?
cat "$dir/second.err"
[ "$status" -ne 0 ] || fail "a second run on a model dir in use exited 0"
grep -q "is in use by another run (pid $pid)" "$dir/second.err" ||
    fail "the second run's refusal does not name the first run's pid $pid"
[ "$(ls -A "$dir/held" | tr '\n' ' ')" = "$before" ] || fail "the refused run changed the model dir: $before"
echo "a second run on the model dir is refused (exit status $status), naming pid $pid"

kill -KILL "$pid"
wait "$pid"
pid=
newest=$(ls "$dir/held" | grep -E '^ckpt-[0-9]+\.syckpt$' | sed 's/ckpt-\([0-9]*\).*/\1/' | sort -n | tail -1)
echo "killed after: $(ls -A "$dir/held" | tr '\n' ' ')"
# damage the newest checkpoint: its first 1000 bytes only
head -c 1000 "$dir/held/ckpt-$newest.syckpt" >"$dir/cut" && mv "$dir/cut" "$dir/held/ckpt-$newest.syckpt"

# shellcheck disable=SC2086
"$systolic" $run --model-dir "$dir/held" --resume 2>"$dir/resume.err"
status=$?
cat "$dir/resume.err"
[ "$status" -eq 0 ] || fail "the resume after SIGKILL failed (exit status $status): a stale lock?"
grep -q "skips the damaged checkpoint '[^']*/ckpt-$newest.syckpt': .*truncated" "$dir/resume.err" ||
    fail "the resume does not say that it skipped the truncated ckpt-$newest.syckpt, and why"
test -f "$dir/held/ckpt-$newest.syckpt.damaged" || fail "the damaged checkpoint was not kept aside as .damaged"
cmp "$dir/whole/$last" "$dir/held/$last" ||
    fail "resumed past the damaged ckpt-$newest, the final checkpoint differs from the uninterrupted run's"
echo "resumed past the damaged ckpt-$newest after SIGKILL: $last is identical to the uninterrupted run's"
