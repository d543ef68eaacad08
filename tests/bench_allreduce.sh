#!/bin/sh
# bench_allreduce.sh - issue 20: bench/bench_allreduce on 2 ranks at small
# sizes (several chain blocks, one short block), a smoke test of the
# benchmark and its checks -- systolic's all-reduce across hosts bitwise the
# same on every rank and bitwise one process's sum, MPI_Allreduce's within
# float rounding of it -- not a measurement (a second or so).
#
#   sh tests/bench_allreduce.sh build/bench/bench_allreduce MPIRUN [SANITIZER]
# MPIRUN empty or not there (MPI not built in): skipped (77). SANITIZER as
# in cli_mpi.sh: under asan the ranks run without leak checking (Open MPI's
# own leaks at MPI_Finalize, cli_mpi.sh says more), under tsan with reports
# inside Open MPI suppressed.
bench=$1
mpirun=$2
[ -n "$mpirun" ] && [ -x "$mpirun" ] || { echo "bench_allreduce: skipped: no mpirun (MPI not built in)"; exit 77; }
flags="--oversubscribe --mca btl_vader_single_copy_mechanism none" # as cli_mpi.sh
[ "$(id -u)" = 0 ] && flags="$flags --allow-run-as-root"
[ "$3" = asan ] && ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" && export ASAN_OPTIONS
if [ "$3" = tsan ]; then # as cli_mpi.sh: Open MPI's own atomics are invisible to TSan
    echo "bench_allreduce: TSan reports inside Open MPI's own code suppressed (tests/tsan_openmpi.supp)"
    TSAN_OPTIONS="${TSAN_OPTIONS:+$TSAN_OPTIONS:}suppressions=$(dirname "$0")/tsan_openmpi.supp"
    export TSAN_OPTIONS
fi
# shellcheck disable=SC2086
out=$("$mpirun" $flags -np 2 "$bench" --floats 1000,150001 --block 65536 --reps 2 --warmup 1 2>&1)
rc=$?
echo "$out"
[ $rc = 0 ] || { echo "bench_allreduce: FAILED: exit status $rc"; exit 1; }
[ "$(echo "$out" | grep -c -- '-- ok$')" = 2 ] || { echo "bench_allreduce: FAILED: not both sizes checked ok"; exit 1; }
echo "bench_allreduce: 2 ranks, 2 sizes: systolic's all-reduce identical on every rank and bitwise one process's sum; MPI_Allreduce within rounding"
