#!/bin/sh
# tpu1_paper.sh - the emulated TPU v1 against the paper (issue 18, point 5;
# docs/design/tpu-v1.md): Table 3's counters for the MLP0, MLP1 and CNN0
# shaped workloads beside Jouppi et al.'s (ISCA 2017), then the roofline:
# TeraOps/s against batch (= MACs per weight byte) on a stack of fully
# connected layers, rising on DDR3's 34 GB/s roof up to the ridge at
# 65,536 x 700 MHz / 34 GB/s = 1,349 MACs per weight byte, flat past it.
#
# These are the emulator's cycle counts, deterministic: the machine's load
# does not change them (unlike bench/'s timings).
#
#   sh bench/tpu1_paper.sh [SYSTOLIC]     (default build/systolic)
sy=${1:-build/systolic}
python=${PYTHON:-python3}
{
    for m in mlp0 mlp1 cnn0; do "$sy" profile $m --tpu sim:v1 --json || exit 1; done
    for b in 64 128 256 512 768 1024 1200 1350 1536 2000; do "$sy" profile fc --tpu sim:v1 --batch-size $b --json || exit 1; done
} | "$python" -c '
import json, sys
rows = [json.loads(l) for l in sys.stdin]
paper = {  # Table 3: array active, useful MACs, unused MACs, weight stall, weight shift, non-matrix, RAW, input, TOPS
    "mlp0": (12.7, 12.5, 0.3, 53.9, 15.9, 17.5, 3.3, 6.1, 12.3),
    "mlp1": (10.6, 9.4, 1.2, 44.2, 13.4, 31.9, 8.4, 8.8, 9.7),
    "cnn0": (78.2, 78.2, 0.0, 0.0, 0.0, 21.8, 3.5, 3.4, 86.0),
}
names = ["array active cycles", "useful MACs (% of peak)", "unused MACs", "weight stall cycles", "weight shift cycles",
         "non-matrix cycles", "RAW stalls", "input stalls", "TeraOps/s (92 peak)"]
apps = [r for r in rows if r["model"] in paper]
print("| Table 3 row | " + " | ".join("%s emulated | paper" % r["model"].upper() for r in apps) + " |")
print("|---|" + "---:|---:|" * len(apps))
for i, n in enumerate(names):
    cells = []
    for r in apps:
        c = r["cycles"]
        v = [r["array_active_cycles"] / c, r["useful_macs"] / (c * 65536), r["unused_macs"] / (c * 65536),
             r["weight_stall_cycles"] / c, r["weight_shift_cycles"] / c, r["non_matrix_cycles"] / c,
             r["raw_stall_cycles"] / c, r["input_stall_cycles"] / c, r["tops"] / 100][i] * 100
        cells.append(("%.1f" if i == 8 else "%.1f%%") % v + " | " + (("%.1f" if i == 8 else "%.1f%%") % paper[r["model"]][i]))
    print("| %s | %s |" % (n, " | ".join(cells)))
print()
print("| batch (MACs per weight byte) | TeraOps/s | DDR3 roof (2 x batch x 34 GB/s) | weight stall | weight shift | array active |")
print("|---:|---:|---:|---:|---:|---:|")
for r in rows:
    if r["model"] != "fc":
        continue
    c, b = r["cycles"], r["batch"]
    print("| %d | %.1f | %.1f | %.1f%% | %.1f%% | %.1f%% |" % (b, r["tops"], min(2 * b * 34e9, 2 * 65536 * 700e6) / 1e12,
          100 * r["weight_stall_cycles"] / c, 100 * r["weight_shift_cycles"] / c, 100 * r["array_active_cycles"] / c))
'
