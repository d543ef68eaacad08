#!/bin/sh
# cli_mpi.sh - issue 20, TPU Pods: training across processes under mpirun,
# checked for what a user relies on, with the real Open MPI on this machine
# (every rank here shares its two cores, hence --oversubscribe):
#
#   devices   `systolic devices --tpu mpi:cpu:2` on 2 ranks: the chief lists
#             every host's replicas, once
#   same      2 ranks of 2 replicas and 4 ranks of 1 end with the very
#             checkpoint bytes, and print the very losses, of one process
#             with 4 replicas; each epoch's line printed once (the chief);
#             then the 2-rank run's mid-epoch checkpoint, resumed on 4 ranks
#             and on one process, ends with the uninterrupted run's bytes
#             (4 ranks and the resume in the release build only: the
#             sanitizer builds' time is short)
#   input     every example once: predict --data (records dealt to 3 hosts)
#             writes the bytes one process writes; evaluate --data and
#             evaluate and predict on the test arrays print what one
#             process prints; train --data (files dealt to 2 hosts) runs
#   writer    rank 0 alone writes: one CSV log, one event file per
#             TensorBoard directory, the checkpoints, weights and models
#   kill      rank 1 SIGKILLed mid-training: the job ends within 60 s with a
#             non-zero status naming rank 1, and the last checkpoint resumes
#             to the uninterrupted run's bytes
#   watchdog  the same kill under mpirun --enable-recovery, which leaves the
#             job running: systolic's heartbeat watchdog ends it, naming
#             rank 1 (the resume is kill's to check)
#   mismatch  ranks started with another model (its data), --seed,
#             --batch-size or build are refused at start-up, naming what
#             differs
#
#   sh tests/cli_mpi.sh MODE build/systolic MPIRUN [RECORDS_DIR [SANITIZER]]
# MPIRUN empty (MPI not built in) or not there: skipped (77). RECORDS_DIR:
# `systolic convert mnist --compression GZIP`'s files (input mode).
# SANITIZER: asan, tsan or none, what the build was instrumented with.
mode=$1
systolic=$2
mpirun=$3
records=$4
sanitizer=${5:-none}
[ -n "$mpirun" ] && [ -x "$mpirun" ] || { echo "cli_mpi: skipped: no mpirun (MPI not built in)"; exit 77; }
dir=$(mktemp -d "${TMPDIR:-/tmp}/systolic-mpi-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
# more ranks than cores; as root (CI's containers) mpirun wants it said; and
# no cross-memory attach between ranks, which containers without
# CAP_SYS_PTRACE refuse (Open MPI's shared-memory transport then copies)
flags="--oversubscribe --mca btl_vader_single_copy_mechanism none"
[ "$(id -u)" = 0 ] && flags="$flags --allow-run-as-root"
if [ "$sanitizer" = tsan ]; then
    # Open MPI is not built with TSan and its own atomics are invisible to
    # it: reports inside Open MPI are suppressed (tests/tsan_openmpi.supp)
    echo "cli_mpi: TSan reports inside Open MPI's own code suppressed (tests/tsan_openmpi.supp: its atomics are invisible to TSan)"
    TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}suppressions=$(dirname "$0")/tsan_openmpi.supp"
    export TSAN_OPTIONS
fi
if [ "$sanitizer" = asan ]; then
    # Open MPI 4.1 leaks memory of its own at MPI_Finalize, much of it from
    # its plugins (mca_*.so), which it has unloaded by then, so that
    # LeakSanitizer can neither name nor suppress it (no disable-dlclose
    # parameter in 4.1). The ranks keep every other ASan and UBSan check;
    # the single-process runs here, and the other tests, check leaks.
    echo "cli_mpi: leak checking off in the MPI ranks: Open MPI's own leaks at MPI_Finalize (unloaded plugins)"
    rank_asan="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
else
    rank_asan=$ASAN_OPTIONS
fi
fail() {
    echo "cli_mpi $mode: FAILED: $*"
    exit 1
}
# run NAME COMMAND...: its output in $dir/NAME.txt (and on ours); fail unless it exits 0
run() {
    name=$1
    shift
    "$@" >"$dir/$name.txt" 2>&1
    rc=$?
    cat "$dir/$name.txt"
    [ $rc -eq 0 ] || fail "$* exited with status $rc"
}
# mpi N ARGS...: systolic's ARGS on N ranks
mpi() {
    n=$1
    shift
    # shellcheck disable=SC2086
    ASAN_OPTIONS=$rank_asan "$mpirun" $flags -np "$n" "$systolic" "$@"
}
# logs FILE: the epochs' lines and the summary, without their timings
logs() { sed -n 's/^\([0-9]*\/[0-9]*\) - [0-9]*s - \(.*\) - [0-9]*m\{0,1\}s\/epoch.*/\1 \2/p; s/ in [0-9.]* s ([0-9]* samples\/s)//p' "$1"; }
# pid_of_rank MPIRUN_PID RANK: the pid of that rank's process (a child of mpirun here)
pid_of_rank() {
    for s in /proc/[0-9]*/status; do
        p=${s#/proc/}
        p=${p%/status}
        [ "$(sed -n 's/^PPid:[[:space:]]*//p' "$s" 2>/dev/null)" = "$1" ] || continue
        tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2" && echo "$p" && return
    done
}
now() { date +%s; }

train="train fashion_mnist_cnn --epochs 2 --steps-per-epoch 3 --batch-size 64 --validation-freq 1
       --validation-steps 1 --seed 3"

case $mode in
devices)
    run d mpi 2 devices --tpu mpi:cpu:2
    grep -q '^mpi:cpu:2: 4 replicas in sync on 2 hosts (MPI ranks)$' "$dir/d.txt" || fail "not 4 replicas on 2 hosts"
    grep -Eq '^ +3 CPU +1 /job:worker/replica:0/task:1/device:CPU:1$' "$dir/d.txt" || fail "replica 3 is not host 1's"
    [ "$(grep -c '^host [01]: ' "$dir/d.txt")" = 2 ] || fail "the hosts were not listed once each"
    echo "devices on 2 ranks: the chief lists both hosts' replicas"
    ;;
same)
    # shellcheck disable=SC2086
    run one "$systolic" $train --verbose 2 --tpu cpu:4 --save-checkpoints-steps 2 --model-dir "$dir/one"
    # shellcheck disable=SC2086
    run two mpi 2 $train --verbose 2 --tpu mpi:cpu:2 --save-checkpoints-steps 2 --model-dir "$dir/two"
    ranks=two
    if [ "$sanitizer" = none ]; then
        ranks="two four"
        # shellcheck disable=SC2086
        run four mpi 4 $train --verbose 2 --tpu mpi:cpu:1 --save-checkpoints-steps 2 --model-dir "$dir/four"
    fi
    logs "$dir/one.txt" >"$dir/one.logs"
    [ "$(grep -c '^3/3 loss: ' "$dir/one.logs")" = 2 ] || fail "one process printed no two epochs"
    for n in $ranks; do
        logs "$dir/$n.txt" >"$dir/$n.logs"
        cmp -s "$dir/one.logs" "$dir/$n.logs" || { diff "$dir/one.logs" "$dir/$n.logs"; fail "$n ranks' logs differ"; }
        cmp "$dir/one/ckpt-6.syckpt" "$dir/$n/ckpt-6.syckpt" || fail "$n ranks' last checkpoint differs"
    done
    if [ "$sanitizer" != none ]; then
        echo "2 ranks x 2 replicas: the losses, and the checkpoint bytes, of one process x 4"
        echo "cli_mpi same: 4 ranks, and resuming on another rank count, are left to the release build (CI's time)"
        exit 0
    fi
    echo "2 ranks x 2 replicas and 4 ranks x 1: the losses, and the checkpoint bytes, of one process x 4"
    # the newest left is ckpt-4, one step into epoch 2: resumed on another rank count, the same end
    cp -r "$dir/two" "$dir/two1"
    rm "$dir/two/ckpt-6.syckpt" "$dir/two1/ckpt-6.syckpt"
    # shellcheck disable=SC2086
    run r4 mpi 4 $train --verbose 1 --tpu mpi:cpu:1 --save-checkpoints-steps 2 --model-dir "$dir/two" --resume
    grep -q "resumed from '[^']*ckpt-4.syckpt': epoch 2, step 1" "$dir/r4.txt" || fail "4 ranks did not resume at ckpt-4"
    cmp "$dir/one/ckpt-6.syckpt" "$dir/two/ckpt-6.syckpt" || fail "resumed on 4 ranks, the last checkpoint differs"
    # shellcheck disable=SC2086
    run r1 "$systolic" $train --verbose 0 --tpu cpu:4 --save-checkpoints-steps 2 --model-dir "$dir/two1" --resume
    cmp "$dir/one/ckpt-6.syckpt" "$dir/two1/ckpt-6.syckpt" || fail "resumed in one process, the last checkpoint differs"
    echo "a 2-rank checkpoint resumed on 4 ranks and on one process: the uninterrupted run's last checkpoint"
    ;;
input)
    [ -f "$records/test-00000-of-00001.tfrecord" ] || fail "no converted MNIST in '$records'"
    data="--data tfrecord:$records/test-*.tfrecord --data-compression GZIP --verbose 0"
    # shellcheck disable=SC2086
    run p1 "$systolic" predict mnist_cnn $data --batch-size 300 --tpu cpu:3 --output "$dir/one.npy"
    # shellcheck disable=SC2086
    run p3 mpi 3 predict mnist_cnn $data --batch-size 300 --tpu mpi:cpu:1 --output "$dir/three.npy"
    grep -q "three.npy: float32 (10000, 10)" "$dir/p3.txt" || fail "predict on 3 ranks did not write 10000 rows"
    cmp "$dir/one.npy" "$dir/three.npy" || fail "predict --data on 3 ranks wrote other predictions than one process"
    # shellcheck disable=SC2086
    run e1 "$systolic" evaluate mnist_cnn $data --batch-size 300 --tpu cpu:3
    # shellcheck disable=SC2086
    run e3 mpi 3 evaluate mnist_cnn $data --batch-size 300 --tpu mpi:cpu:1
    cmp -s "$dir/e1.txt" "$dir/e3.txt" || fail "evaluate --data on 3 ranks printed other results than one process"
    run a1 "$systolic" evaluate mnist_cnn --batch-size 500 --verbose 0 --tpu cpu:2
    run a2 mpi 2 evaluate mnist_cnn --batch-size 500 --verbose 0 --tpu mpi:cpu:1
    cmp -s "$dir/a1.txt" "$dir/a2.txt" || fail "evaluate on 2 ranks printed other results than one process"
    run q1 "$systolic" predict mnist_cnn --batch-size 50 --count 203 --verbose 0 --tpu cpu:3
    run q3 mpi 3 predict mnist_cnn --batch-size 50 --count 203 --verbose 0 --tpu mpi:cpu:1
    [ "$(wc -l <"$dir/q3.txt")" -eq 204 ] && cmp -s "$dir/q1.txt" "$dir/q3.txt" ||
        fail "predict on 3 ranks printed other rows than one process"
    run t2 mpi 2 train mnist_cnn --data "tfrecord:$records/train-*.tfrecord" --data-compression GZIP --epochs 1 \
        --steps-per-epoch 2 --batch-size 64 --validation-freq 1 --validation-steps 1 --verbose 2 --tpu mpi:cpu:2
    grep -q "^mnist_cnn: 1 epoch of 2 steps .*val_sparse_categorical_accuracy: [0-9.]*$" "$dir/t2.txt" ||
        fail "train --data on 2 ranks did not train and validate"
    # a global batch that does not divide among the hosts' replicas (2 ranks x 2: 4): refused, saying so
    mpi 2 train mnist_cnn --data "tfrecord:$records/train-*.tfrecord" --data-compression GZIP --epochs 1 \
        --steps-per-epoch 2 --batch-size 63 --verbose 0 --tpu mpi:cpu:2 >"$dir/b63.txt" 2>&1 &&
        fail "a batch of 63 on 4 replicas was not refused"
    grep -q "batch-size 63 does not divide among the 4 replicas in sync on 2 hosts: use a multiple of 4" "$dir/b63.txt" ||
        { cat "$dir/b63.txt"; fail "the refusal of a batch of 63 on 4 replicas does not say why"; }
    echo "every example once on 2 and 3 ranks: evaluate and predict print and write what one process does"
    ;;
writer)
    # shellcheck disable=SC2086
    run w mpi 2 $train --verbose 1 --tpu mpi:cpu:2 --model-dir "$dir/m" --csv-log "$dir/log.csv" \
        --logdir "$dir/tb" --save-weights "$dir/w.h5" --save-model "$dir/model.h5" \
        --checkpoint-filepath "$dir/mc-{epoch:02d}.h5"
    [ "$(grep -c '^Epoch 1/2$' "$dir/w.txt")" = 1 ] || fail "the progress was not printed once"
    [ "$(grep -c '^fashion_mnist_cnn: 2 epochs' "$dir/w.txt")" = 1 ] || fail "the summary was not printed once"
    [ "$(wc -l <"$dir/log.csv")" -eq 3 ] || { cat "$dir/log.csv"; fail "the CSV log is not one header and 2 rows"; }
    for d in train validation; do
        [ "$(ls "$dir/tb/$d" | wc -l)" -eq 1 ] || { ls -l "$dir/tb/$d"; fail "not one event file in $d"; }
    done
    for f in m/ckpt-3.syckpt m/ckpt-6.syckpt w.h5 model.h5 mc-01.h5 mc-02.h5; do
        [ -s "$dir/$f" ] || fail "$f was not written"
    done
    [ "$(ls "$dir/m" | wc -l)" -eq 2 ] || { ls -la "$dir/m"; fail "other files in the model directory"; }
    run ev "$systolic" evaluate fashion_mnist_cnn --load-weights "$dir/w.h5" --batch-size 500 --steps 1 --verbose 0
    echo "one writer on 2 ranks: one CSV log, one event file per directory, the checkpoints and models"
    ;;
kill | watchdog)
    long="train fashion_mnist_cnn --epochs 2 --steps-per-epoch 40 --batch-size 32 --seed 5 --verbose 0
          --save-checkpoints-steps 4"
    # shellcheck disable=SC2086
    [ "$mode" = kill ] && run one "$systolic" $long --tpu cpu:2 --model-dir "$dir/one"
    extra=
    if [ "$mode" = watchdog ]; then
        SYSTOLIC_MPI_TIMEOUT=3
        export SYSTOLIC_MPI_TIMEOUT
        extra="--enable-recovery"
    fi
    # shellcheck disable=SC2086
    ASAN_OPTIONS=$rank_asan "$mpirun" $flags $extra -np 2 "$systolic" $long --tpu mpi:cpu:1 --model-dir "$dir/two" >"$dir/killed.txt" 2>&1 &
    job=$!
    victim=
    for _ in $(seq 600); do
        if ls "$dir/two" 2>/dev/null | grep -Eq '^ckpt-(8|[1-9][0-9])\.syckpt$'; then
            victim=$(pid_of_rank "$job" 1)
            break
        fi
        sleep 0.05
    done
    [ -n "$victim" ] || { kill "$job"; cat "$dir/killed.txt"; fail "no checkpoint, or no rank 1 under mpirun $job"; }
    kill -KILL "$victim"
    killed=$(now)
    wait "$job"
    status=$?
    took=$(($(now) - killed))
    unset SYSTOLIC_MPI_TIMEOUT
    cat "$dir/killed.txt"
    [ -f "$dir/two/ckpt-80.syckpt" ] && fail "the job had finished before rank 1 was killed"
    [ "$took" -le 60 ] || fail "the job went on $took s after rank 1 was killed"
    if [ "$mode" = kill ]; then
        [ "$status" -ne 0 ] || fail "mpirun exited 0 after rank 1 was killed"
        grep -Eq "rank 1 .*(signal 9|Killed)" "$dir/killed.txt" || fail "nothing names rank 1 and its signal"
    else
        # Open MPI's mpirun --enable-recovery exits 0 even after MPI_Abort: the message is the check
        grep -q "rank 1 of 2 (host [^,]*, pid $victim) is lost: nothing heard from it for 3 s" "$dir/killed.txt" ||
            fail "systolic's watchdog did not name rank 1 (pid $victim)"
    fi
    echo "rank 1 (pid $victim) killed: the job ended $took s later; checkpoints left: $(ls "$dir/two" | tr '\n' ' ')"
    [ "$mode" = watchdog ] && exit 0
    # shellcheck disable=SC2086
    run resumed mpi 2 $long --tpu mpi:cpu:1 --model-dir "$dir/two" --resume
    cmp "$dir/one/ckpt-80.syckpt" "$dir/two/ckpt-80.syckpt" || fail "resumed after the kill, the last checkpoint differs"
    echo "resumed on 2 ranks from the last checkpoint: the uninterrupted run's last checkpoint"
    ;;
mismatch)
    short="--epochs 1 --steps-per-epoch 2 --batch-size 64 --verbose 0 --tpu mpi:cpu:2"
    # refused RUN1 RUN2 PATTERN: rank 0 runs RUN1, rank 1 RUN2 (MPMD); they must stop, non-zero, saying PATTERN
    refused() {
        start=$(now)
        # shellcheck disable=SC2086
        ASAN_OPTIONS=$rank_asan "$mpirun" $flags -np 1 $1 : -np 1 $2 >"$dir/out.txt" 2>&1
        status=$?
        cat "$dir/out.txt"
        [ "$status" -ne 0 ] || fail "ranks started with $3 were not refused"
        [ $(($(now) - start)) -le 60 ] || fail "refusing $3 took more than 60 s"
        grep -q "$4" "$dir/out.txt" || fail "the refusal does not say: $4"
    }
    # one launch for three differences, every one named: mnist_cnn is fashion_mnist_cnn's very model on other data
    refused "$systolic train fashion_mnist_cnn $short --seed 1" "$systolic train mnist_cnn $short --seed 2 --batch-size 32" \
        "another model, seed and batch size" \
        "fit: the ranks were not started alike: rank 1 (host [^)]*) has seed 2 where rank 0 has 1; "
    grep -q "; batch_size 32 where rank 0 has 64; " "$dir/out.txt" || fail "the refusal does not name the batch size"
    grep -q "; data [0-9a-f]* (a hash of the arrays) where rank 0 has [0-9a-f]* " "$dir/out.txt" ||
        fail "the refusal does not name the data"
    cp "$systolic" "$dir/other"
    printf x >>"$dir/other"
    refused "$systolic train fashion_mnist_cnn $short" "$dir/other train fashion_mnist_cnn $short" "other builds" \
        "the ranks run different builds of systolic [0-9.]*: rank 1 (host [^)]*) runs build [0-9a-f]*, rank 0"
    echo "ranks with another model's data, seed, batch size or build: refused at start-up, naming it"
    ;;
*)
    fail "unknown mode (devices, same, input, writer, resume, kill, watchdog, mismatch)"
    ;;
esac
