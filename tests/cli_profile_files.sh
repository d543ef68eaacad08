#!/bin/sh
# cli_profile_files.sh SYSTOLIC WORK_DIR - what `systolic profile --trace
# FILE.json --roofline FILE.svg` writes (issue 16, point 5): a Chrome
# trace-event file that parses as JSON, with one complete event per op per
# replica on its core's track (never overlapping), the all-reduce on every
# chip's interconnect track and the host round trip; a roofline SVG that
# parses as XML, with one dot per op that has FLOPs and HBM bytes. Paths
# that cannot be written are refused before anything is computed, and
# nothing is written. Python (json, xml.etree: the standard library) reads
# the files: $SYSTOLIC_PYTHON, else python3; skipped (77) without one.
set -u
sy=$1 work=$2
python=
for py in "${SYSTOLIC_PYTHON:-}" python3; do
    if [ -n "$py" ] && "$py" -c 'import json, xml.etree.ElementTree' >/dev/null 2>&1; then
        python=$py
        break
    fi
done
if [ -z "$python" ]; then
    echo "no Python (\$SYSTOLIC_PYTHON, python3): skipped"
    exit 77
fi
rm -rf "$work" && mkdir -p "$work" || exit 1
failed=0
fail() {
    echo "FAIL: $*"
    failed=1
}

# A training step on a v2-8: 8 replicas on 4 chips.
"$sy" profile fashion_mnist_cnn --tpu sim:v2-8 --json --trace "$work/step.json" --roofline "$work/step.svg" \
    >"$work/profile.json" 2>"$work/err" || fail "profile --trace --roofline: exit status $? ($(cat "$work/err"))"
grep -q "^trace: $work/step.json (open it in https://ui.perfetto.dev)" "$work/err" ||
    fail "profile --json: no note of the trace on stderr: $(cat "$work/err")"
"$python" - "$work/profile.json" "$work/step.json" "$work/step.svg" 8 4 <<'EOF' || failed=1
import json, sys, xml.etree.ElementTree as ET
prof, trace_path, svg_path, replicas, chips = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
p = json.load(open(prof))
t = json.load(open(trace_path))
ops = p["ops"]
assert isinstance(t["traceEvents"], list) and t["displayTimeUnit"] == "ns", "not the JSON object format"
x = [e for e in t["traceEvents"] if e["ph"] == "X"]
for e in x:
    assert all(k in e for k in ("name", "cat", "pid", "tid", "ts", "dur", "args")), e
    assert e["dur"] >= 0 and e["ts"] >= 0, e
tracks = {}
for e in x:
    if e["cat"] in ("mxu", "vector", "memory"):
        tracks.setdefault((e["pid"], e["tid"]), []).append(e)
assert len(tracks) == replicas, f"{len(tracks)} core tracks, want one per replica ({replicas})"
for key, evs in tracks.items():
    assert len(evs) == len(ops), f"track {key}: {len(evs)} op events, want {len(ops)}"
    for e, o in zip(evs, ops):
        want = (o["layer"] + "/" if o["layer"] else "") + o["op"]
        assert e["name"] == want and e["args"]["flops"] == o["flops"] and e["cat"] == o["bound"], (e, o)
    for a, b in zip(evs, evs[1:]):
        assert a["ts"] + a["dur"] <= b["ts"] + 1e-9, f"overlapping events on {key}: {a['name']}, {b['name']}"
ar = [e for e in x if e["cat"] == "interconnect"]
assert len(ar) == chips and len({e["pid"] for e in ar}) == chips, f"{len(ar)} all-reduce events, want {chips}"
assert all(e["args"]["ring_of"] == replicas for e in ar)
host = [e for e in x if e["name"] == "host round trip"]
assert len(host) == 1 and abs(host[0]["dur"] - 1e6 * p["host_seconds"]) < 1e-2, host
step = [e for e in x if e["cat"] == "step"]
assert len(step) == 1 and abs(step[0]["dur"] - 1e6 * p["step_seconds"]) < 1e-2, step
names = {e["args"]["name"] for e in t["traceEvents"] if e["ph"] == "M" and e["name"] in ("process_name", "thread_name")}
for n in ("TPU v2 chip 3 (emulated, v2-8)", "core 1 (replica 7)", "interconnect (ICI)", "host round trip"):
    assert n in names, f"no track named {n!r}: {sorted(names)}"
svg = ET.parse(svg_path).getroot()
ns = "{http://www.w3.org/2000/svg}"
dots = [c for c in svg.iter(ns + "circle") if c.get("class") == "op"]
want = sum(1 for o in ops if o["flops"] > 0 and o["bytes"] > 0 and o["seconds"] > 0)
assert want > 0 and len(dots) == want, f"{len(dots)} dots, want {want}"
text = " ".join("".join(e.itertext()) for e in svg.iter(ns + "text"))
for s in ("fashion_mnist_cnn: training step on TPU v2-8", "arithmetic intensity (FLOP/byte", "attainable FLOP/s",
          "MXU bfloat16 peak 22.9 TFLOP/s", "HBM 350 GB/s", "bound by the MXUs"):
    assert s in text, f"the plot has no {s!r}"
print("trace and roofline: ok")
EOF

# A predict step on a v4-8 (4 replicas, one per chip): no gradients, no all-reduce.
"$sy" profile fashion_mnist_cnn --tpu sim:v4-8 --predict --trace "$work/predict.json" >"$work/out" 2>&1 ||
    fail "profile --predict --trace: exit status $? ($(cat "$work/out"))"
"$python" - "$work/predict.json" <<'EOF' || failed=1
import json, sys
t = json.load(open(sys.argv[1]))
x = [e for e in t["traceEvents"] if e["ph"] == "X"]
assert not [e for e in x if e["cat"] == "interconnect"], "a predict step has no all-reduce"
assert len({(e["pid"], e["tid"]) for e in x if e["cat"] in ("mxu", "vector", "memory")}) == 4
assert [e for e in x if e["cat"] == "step"][0]["name"] == "predict step"
EOF

# expect STATUS REGEX ARGS...: exits with STATUS, its output matches REGEX
expect() {
    want=$1 re=$2
    shift 2
    out=$("$sy" "$@" 2>&1)
    rc=$?
    if [ "$rc" != "$want" ] || ! printf '%s' "$out" | grep -Eq -- "$re"; then
        fail "systolic $*: exit status $rc (want $want); output: $out; wanted: $re"
    fi
}
expect 1 "^systolic profile: --trace: cannot write '$work/no/such/dir/t.json': the directory '$work/no/such/dir' does not exist \\(nothing was written\\)" \
    profile fashion_mnist_cnn --tpu sim:v2-8 --roofline "$work/first.svg" --trace "$work/no/such/dir/t.json"
[ -e "$work/first.svg" ] && fail "a refused --trace left the roofline written"
mkdir -p "$work/dir.svg"
expect 1 "^systolic profile: --roofline: cannot write '$work/dir.svg': it is a directory, not a regular file \\(nothing was written\\)" \
    profile fashion_mnist_cnn --roofline "$work/dir.svg" --chip v2
expect 2 "^systolic profile: --trace FILE must end in .json \\(a Chrome trace-event file\\), got '$work/t.txt'" \
    profile fashion_mnist_cnn --trace "$work/t.txt"
expect 2 "^systolic profile: --roofline FILE must end in .svg \\(an SVG image\\), got 'plot.png'" \
    profile fashion_mnist_cnn --roofline plot.png
[ -e "$work/t.txt" ] && fail "a refused --trace wrote its file"
[ "$(ls -A "$work" | grep -v -e '^step\.' -e '^profile\.json$' -e '^err$' -e '^predict\.json$' -e '^out$' -e '^dir\.svg$')" = "" ] ||
    fail "refused runs left files behind: $(ls -A "$work")"
[ $failed = 0 ] && echo "profile files: ok"
exit $failed
