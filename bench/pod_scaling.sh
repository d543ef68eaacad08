#!/bin/sh
# pod_scaling.sh - issue 20, pods on paper: ResNet-50's training step on the
# emulated TPU's slices, from one host's -8 to the full pod, by the cost
# model (`systolic profile`, docs/design/tpu-cost-model.md section 6), at a
# fixed batch per core: step time, images/s, the all-reduce over the slice's
# 2-D torus, and the scaling against the -8 slice. docs/tpu-pods.md holds the
# table it prints beside the published pod figures.
#
#   sh bench/pod_scaling.sh [SYSTOLIC [MODEL.json]] [-- SERIES...]
#
# SYSTOLIC defaults to build/systolic. MODEL.json is Keras's own ResNet-50
# (224 x 224 x 3, 1,000 classes); without it the script writes one with the
# repository's TensorFlow (.venv, tests/find_python.sh):
# tf.keras.applications.ResNet50(weights=None).to_json(). Each SERIES is
# CHIP:BATCH_PER_CORE (default: v2:32 v3:16, the per-core batches of
# Google's MLPerf pod runs: v0.5 on a v2-512 at 16,384, v0.6 on a v3-2048 at
# 32,768); every slice Cloud TPU offers of the chip is profiled at that
# per-core batch. The model is profiled as MLPerf trained it: the network in
# bfloat16 (--dtype-policy mixed_bfloat16), one epoch's steps per host round
# trip. The cost model's figures are closed formulas of the model and the
# chip's published numbers: they do not depend on this machine or its load.
# Each profile compiles the plan at the per-core batch: about 1.5 GB of host
# memory and a few seconds at 16 a core, 11 GB and 20-40 s at 128.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
sy=${1:-$root/build/systolic}
[ $# -gt 0 ] && shift
model=
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
    model=$1
    shift
fi
[ $# -gt 0 ] && [ "$1" = "--" ] && shift
series=${*:-v2:32 v3:16}
[ -x "$sy" ] || { echo "pod_scaling: no systolic at $sy (build it: make)" >&2; exit 2; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [ -z "$model" ]; then
    SYSTOLIC_PYTHON=${SYSTOLIC_PYTHON:-}
    . "$root/tests/find_python.sh"
    find_python 'import tensorflow'
    model=$work/resnet50_224.json
    "$python" -c "
import sys, tensorflow as tf
open(sys.argv[1], 'w').write(tf.keras.applications.ResNet50(weights=None).to_json())
" "$model" 2>/dev/null || { echo "pod_scaling: could not write ResNet-50's JSON with $python" >&2; exit 1; }
fi

slices() {
    case $1 in
    v2) echo 8 32 128 256 512 ;;
    v3) echo 8 32 64 128 256 512 1024 2048 ;;
    v4) echo 8 32 128 512 2048 8192 ;;
    *) echo "pod_scaling: unknown chip '$1' (v2, v3, v4)" >&2; exit 2 ;;
    esac
}

for s in $series; do
    chip=${s%%:*} per_core=${s#*:}
    for cores in $(slices "$chip"); do
        # replicas: a core each on v2 and v3, a chip (2 cores) each on v4
        replicas=$cores
        [ "$chip" = v4 ] && replicas=$((cores / 2))
        global=$((replicas * per_core))
        [ "$chip" = v4 ] && global=$((replicas * per_core * 2))
        spe=$((1281167 / global))
        [ "$spe" -ge 1 ] || spe=1
        out=$work/$chip-$cores.json
        "$sy" profile "$model" --tpu "sim:$chip-$cores" --batch-size "$global" --dtype-policy mixed_bfloat16 \
            --steps-per-execution "$spe" --json >"$out" 2>"$work/err" ||
            { echo "pod_scaling: profile sim:$chip-$cores failed:" >&2; cat "$work/err" >&2; exit 1; }
    done
done

python3 - "$work" $series <<'EOF'
import json, sys, os
work, series = sys.argv[1], sys.argv[2:]
slices = {"v2": [8, 32, 128, 256, 512], "v3": [8, 32, 64, 128, 256, 512, 1024, 2048],
          "v4": [8, 32, 128, 512, 2048, 8192]}
print("| slice | replicas | chips | global batch | MXU-bound ms | memory-bound ms | vector-bound ms | infeed ms "
      "| all-reduce ms | host ms | step ms | images/s | per replica vs -8 | 90 epochs |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
for s in series:
    chip, per_core = s.split(":")
    base = None
    for cores in slices[chip]:
        p = json.load(open(os.path.join(work, f"{chip}-{cores}.json")))
        t = p["topology"]
        shape = "x".join(str(c) for c in t["chips"]) if len(t["chips"]) > 1 else f"{t['chips'][0]} (ring)"
        if len(t["chips"]) > 1:
            w = sum(t["wrap"])
            shape += " torus" if w == len(t["wrap"]) else " mesh" if w == 0 else " (part wrapped)"
        bound = {"mxu": 0.0, "memory": 0.0, "vector": 0.0}
        for o in p["ops"]:
            bound[o["bound"]] += o["seconds"]
        per_replica = p["samples_per_second"] / p["replicas"]
        if base is None:
            base = per_replica
        minutes = 90 * 1281167 / p["samples_per_second"] / 60
        print(f"| {chip}-{cores} | {p['replicas']} | {shape} | {p['replicas'] * p['batch_per_replica']:,} "
              f"| {1e3 * bound['mxu']:.2f} | {1e3 * bound['memory']:.2f} | {1e3 * bound['vector']:.2f} "
              f"| {1e3 * p['infeed_stall_seconds']:.2f} | {1e3 * p['allreduce_seconds']:.3f} "
              f"| {1e3 * p['host_seconds']:.3f} | {1e3 * p['step_seconds']:.2f} | {p['samples_per_second']:,.0f} "
              f"| {per_replica / base:.3f} | {minutes:.1f} min |")
EOF
