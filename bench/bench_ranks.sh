#!/bin/sh
# bench_ranks.sh - issue 20, point 6: training throughput against MPI ranks on
# this machine, told honestly. Trains the Fashion-MNIST tutorial CNN
# (fashion_mnist_cnn) for a fixed number of steps at a fixed global batch
# under `mpirun -np R ... --tpu mpi:cpu:1` (R ranks, one replica each: the
# gradients all-reduced across processes, docs/tpu-pods.md) for R = 1, 2, 4,
# and beside each the same R replicas as threads of one process
# (`--tpu cpu:R`), and prints samples/s for each, from rank 0's summary line
# ("1 epoch of S steps in T s (N samples/s)", the training steps alone).
#
#   sh bench/bench_ranks.sh [SYSTOLIC [MPIRUN]]
#
# Environment: RANKS (default "1 2 4"), STEPS (default 60), BATCH (global,
# default 512), SYSTOLIC_DATASETS (where fashion_mnist lives).
#
# What it measures: the same work -- STEPS steps of BATCH samples -- split
# among R replicas. On a machine with C cores, ranks beyond C share cores:
# with R = 4 on 2 cores each rank gets half a core at best, so samples/s can
# only fall from R = 2 to R = 4, and what the R = 4 row shows is the cost of
# the extra processes (the all-reduce's messages, their context switches),
# not scaling. Threads and processes at equal R show what crossing processes
# costs over sharing memory. The numbers depend on the machine's load: run it
# on a quiet machine (nothing else running), and report the core count it
# prints with them.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
sy=${1:-$root/build/systolic}
mpirun=${2:-$(command -v mpirun || true)}
ranks=${RANKS:-1 2 4}
steps=${STEPS:-60}
batch=${BATCH:-512}
[ -x "$sy" ] || { echo "bench_ranks: no systolic at $sy (build it: make)" >&2; exit 2; }
[ -n "$mpirun" ] && [ -x "$mpirun" ] || { echo "bench_ranks: no mpirun (apt-get install openmpi-bin)" >&2; exit 2; }
# as cli_mpi.sh: more ranks than cores need --oversubscribe, root --allow-run-as-root; containers
# without CAP_SYS_PTRACE refuse cross-memory attach
flags="--oversubscribe --mca btl_vader_single_copy_mechanism none"
[ "$(id -u)" = 0 ] && flags="$flags --allow-run-as-root"
train="train fashion_mnist_cnn --epochs 1 --steps-per-epoch $steps --batch-size $batch --validation-steps 1 --verbose 2 --seed 1"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# samples/s of rank 0's summary line in FILE
rate() { sed -n 's/.* epoch[s]* of [0-9]* steps in [0-9.]* s (\([0-9.]*\) samples\/s).*/\1/p' "$1" | tail -1; }

cores=$(nproc)
echo "bench_ranks: fashion_mnist_cnn, $steps steps of $batch samples; $cores cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-6s %-28s %12s %10s\n' ranks how "samples/s" "vs 1"
base=
for r in $ranks; do
    for how in mpi threads; do
        if [ "$how" = mpi ]; then
            # shellcheck disable=SC2086
            "$mpirun" $flags -np "$r" "$sy" $train --tpu mpi:cpu:1 >"$work/out" 2>&1 ||
                { echo "bench_ranks: mpirun -np $r failed:" >&2; cat "$work/out" >&2; exit 1; }
            label="mpirun -np $r, 1 replica each"
        else
            # shellcheck disable=SC2086
            "$sy" $train --tpu "cpu:$r" >"$work/out" 2>&1 ||
                { echo "bench_ranks: --tpu cpu:$r failed:" >&2; cat "$work/out" >&2; exit 1; }
            label="1 process, $r replica threads"
        fi
        s=$(rate "$work/out")
        [ -n "$s" ] || { echo "bench_ranks: no samples/s in the output:" >&2; cat "$work/out" >&2; exit 1; }
        [ -n "$base" ] || base=$s
        printf '%-6s %-28s %12s %10s\n' "$r" "$label" "$s" "$(awk -v a="$s" -v b="$base" 'BEGIN { printf "%.2fx", a / b }')"
    done
    [ "$r" -le "$cores" ] || oversub=$r
done
if [ -n "${oversub:-}" ]; then
    echo "note: $oversub ranks on $cores cores share them (--oversubscribe): past $cores ranks the rows show the cost of more processes on the same cores, not scaling"
fi
