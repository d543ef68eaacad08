#!/bin/sh
# cli_h5_damaged.sh - damaged .h5 files on the command line (tests/data/h5,
# tools/make_h5_crash_fixtures.py): each made libhdf5 1.10.8 crash or hang
# the process that read it. As MODEL and as --load-weights FILE, each now
# exits with status 1 and a message naming the file; as MODEL, the message
# says libhdf5 crashed (or timed out) and what it was reading.
#
#   sh tests/cli_h5_damaged.sh build/systolic tests/data/h5
cli=$1
data=$2
out=$(mktemp "${TMPDIR:-/tmp}/systolic-cli-h5-damaged-XXXXXX") || exit 1
trap 'rm -f "$out"' EXIT
fail() { echo "cli_h5_damaged: $*"; cat "$out"; exit 1; }
SYSTOLIC_H5_TIMEOUT=1
export SYSTOLIC_H5_TIMEOUT

for f in crash_1 crash_2 crash_3 hang_1; do
    file=$data/$f.h5
    "$cli" summary "$file" >"$out" 2>&1
    rc=$?
    [ $rc -eq 1 ] || fail "summary $f.h5: exit status $rc, expected 1"
    # crashed with SIGSEGV; under ASan, "crashed: its reader process exited
    # with status 1" when ASan stops the child first
    # crash_1 crashes libhdf5 only with some memory layouts (not under
    # TSan's): there any error naming the file will do
    [ $f = crash_1 ] && grep -q "^systolic summary: .*$file" "$out" ||
        grep -q "^systolic summary: .*$file: damaged HDF5 file (libhdf5 \(crashed\|timed out\).* reading attribute '[a-z_]*' of '/[a-z_]*'" "$out" ||
        fail "summary $f.h5: libhdf5's failure is not explained"
    # the weights: refused with the file named, or (damage where the
    # weights are not) loaded
    "$cli" summary "$data/tiny_cnn.json" --load-weights "$file" >"$out" 2>&1
    rc=$?
    [ $rc -eq 0 ] || { [ $rc -eq 1 ] && grep -q "^systolic summary: --load-weights: $file: " "$out"; } ||
        fail "summary --load-weights $f.h5: exit status $rc"
done
"$cli" summary "$data/tiny_cnn.json" --load-weights "$data/crash_2.h5" >"$out" 2>&1
[ $? -eq 1 ] && grep -q "crash_2.h5: damaged HDF5 file (libhdf5 crashed.* reading attribute 'layer_names' of '/model_weights')" "$out" ||
    fail "--load-weights crash_2.h5: libhdf5's crash is not explained"
"$cli" summary "$data/tiny_cnn.h5" --load-weights "$data/tiny_cnn.h5" >"$out" 2>&1 || fail "the undamaged file"
echo "cli_h5_damaged: every damaged file refused with exit status 1 and the reason"
