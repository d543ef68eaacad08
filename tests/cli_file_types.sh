#!/bin/sh
# cli_file_types.sh - what the command does with paths that are not plain
# files, on the way out and on the way in.
#
# Saving (--save-weights, --save-model: every writer goes through one
# atomic writer) writes through a symbolic link to its target, as h5py and
# Keras do: the link stays a link and the target gets the new file, also
# for a relative link into another directory and for a dangling link (the
# target is created). A FIFO, a directory, or a link to a device is refused
# with exit status 1 and a message naming it, and is left as it was.
#
# Reading never blocks or reads without end: a model JSON that is a FIFO, a
# directory or a link to /dev/zero, a .h5 model or --load-weights file that
# is a FIFO, a --data tfrecord: FIFO, and a FIFO in
# place of a dataset file under $SYSTOLIC_DATASETS are each refused at once
# (exit status 1, the message says what the path is); each command runs
# under a 60 s limit, so a hang fails the test instead of stalling it.
#
#   sh tests/cli_file_types.sh build/systolic
cli=$1
dir=$(mktemp -d "${TMPDIR:-/tmp}/systolic-file-types-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
fail() { echo "cli_file_types: $*"; exit 1; }

# run EXPECTED_STATUS REGEX ARGS...: the command's status and message
run() {
    want=$1 re=$2
    shift 2
    timeout 60 "$cli" "$@" >"$dir/out.txt" 2>&1
    rc=$?
    [ $rc -ne 124 ] || fail "'$*' hung (killed after 60 s)"
    [ $rc -eq "$want" ] || { cat "$dir/out.txt"; fail "'$*': exit status $rc, expected $want"; }
    grep -q -- "$re" "$dir/out.txt" || { cat "$dir/out.txt"; fail "'$*': no line matching '$re'"; }
}
train() { run "$@" --epochs 1 --steps-per-epoch 1 --batch-size 10 --validation-freq 100 --verbose 0; }
is_h5() { [ "$(head -c 8 "$1" | od -An -c | tr -d ' ')" = '211HDF\r\n032\n' ]; }

mkdir "$dir/a" "$dir/b"
echo old >"$dir/b/target.h5"
chmod 600 "$dir/b/target.h5"
ln -s ../b/target.h5 "$dir/a/link.h5"
train 0 "" train fashion_mnist_cnn --save-weights "$dir/a/link.h5"
[ -L "$dir/a/link.h5" ] || fail "--save-weights through a symbolic link replaced the link"
is_h5 "$dir/b/target.h5" || fail "--save-weights through a symbolic link did not write its target"
[ "$(stat -c %a "$dir/b/target.h5")" = 600 ] || fail "the target lost its permissions"
[ -z "$(ls -A "$dir/a" | grep -v '^link.h5$')$(ls -A "$dir/b" | grep -v '^target.h5$')" ] ||
    fail "temporary files left behind: $(ls -A "$dir/a" "$dir/b")"

ln -s "$dir/b/new.json" "$dir/a/dangling.json"
train 0 "" train fashion_mnist_cnn --save-model "$dir/a/dangling.json"
[ -L "$dir/a/dangling.json" ] && grep -q '"class_name": "Sequential"' "$dir/b/new.json" ||
    fail "--save-model through a dangling link did not create its target"

mkfifo "$dir/fifo.h5"
train 1 "cannot write '$dir/fifo.h5': it is a FIFO, not a regular file" \
    train fashion_mnist_cnn --save-weights "$dir/fifo.h5"
[ -p "$dir/fifo.h5" ] || fail "the FIFO was replaced"
ln -s /dev/null "$dir/null.h5"
train 1 "cannot write '$dir/null.h5': it links to '/dev/null', which is a character device" \
    train fashion_mnist_cnn --save-weights "$dir/null.h5"
[ -c /dev/null ] && [ -L "$dir/null.h5" ] || fail "/dev/null or the link to it was replaced"
mkdir "$dir/d.json"
train 1 "cannot write '$dir/d.json': it is a directory" train fashion_mnist_cnn --save-model "$dir/d.json"
echo "cli_file_types: writes go through links to their targets; FIFOs, devices and directories are refused"

mkfifo "$dir/m.json"
run 1 "cannot read '$dir/m.json': it is a FIFO, not a regular file" summary "$dir/m.json"
run 1 "cannot read '$dir/d.json': it is a directory" summary "$dir/d.json"
run 1 "^systolic summary: cannot read '$dir/fifo.h5': it is a FIFO, not a regular file" summary "$dir/fifo.h5"
run 1 "^systolic summary: --load-weights: cannot read '$dir/fifo.h5': it is a FIFO" \
    summary fashion_mnist_cnn --load-weights "$dir/fifo.h5"
ln -s /dev/zero "$dir/z.json"
run 1 "cannot read '$dir/z.json': it is a character device" summary "$dir/z.json"
run 1 "tfrecord: cannot read '$dir/fifo.h5': it is a FIFO" train fashion_mnist_cnn --data "tfrecord:$dir/fifo.h5" \
    --epochs 1 --steps-per-epoch 1 --batch-size 10
# the other three files from where the real ones are
real=
for d in "${SYSTOLIC_DATASETS:-}/fashion-mnist" "${SYSTOLIC_DATASETS:-}/fashion_mnist"; do
    [ -f "$d/train-images-idx3-ubyte.gz" ] && real=$d
done
if [ -n "$real" ]; then
    mkdir "$dir/ds" "$dir/ds/fashion_mnist"
    for f in train-images-idx3-ubyte.gz train-labels-idx1-ubyte.gz t10k-images-idx3-ubyte.gz; do
        ln -s "$real/$f" "$dir/ds/fashion_mnist/$f"
    done
    mkfifo "$dir/ds/fashion_mnist/t10k-labels-idx1-ubyte.gz"
    SYSTOLIC_DATASETS="$dir/ds" XDG_CACHE_HOME="$dir/cache" \
        run 1 "t10k-labels-idx1-ubyte.gz': it is a FIFO, not a regular file" evaluate fashion_mnist_cnn
else
    echo "cli_file_types: \$SYSTOLIC_DATASETS has no Fashion-MNIST: the FIFO among dataset files is not tried"
fi
echo "cli_file_types: FIFOs, directories and devices to be read are refused at once"
