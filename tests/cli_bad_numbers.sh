#!/bin/sh
# cli_bad_numbers.sh SYSTOLIC SOURCE_DIR WORK_DIR - numbers past their type
# and other mistakes in flag values (issue 13, points 4 and 8): each command
# line must exit with status 2 (a usage error) and a message naming the flag
# and, for a number, its range, before any data is loaded or training
# starts. Then the failures that come later: a model file that is a
# directory, and a plan too large for memory, refused before allocating.
set -u
sy=$1 src=$2 work=$3
mkdir -p "$work" || exit 1
failed=0
I32=2147483647 I64=9223372036854775807

# expect STATUS REGEX ARGS...: the command exits with STATUS and its stderr matches REGEX.
expect() {
    want=$1 re=$2
    shift 2
    out=$("$sy" "$@" 2>&1 >/dev/null)
    rc=$?
    if [ "$rc" != "$want" ] || ! printf '%s\n' "$out" | grep -Eq -- "$re"; then
        echo "FAIL: systolic $*"
        echo "  exit status $rc (want $want); stderr: $out"
        echo "  wanted: $re"
        failed=1
    fi
}

# range CMD MODEL FLAG MIN MAX: the flag refuses values past either end, 2^32
# for an int32 field, 2^63, -1 and garbage, each naming the flag and range.
range() {
    cmd=$1 model=$2 flag=$3 min=$4 max=$5
    r="\\($min to $max\\)"
    expect 2 "^systolic $cmd: $flag: 9223372036854775808 is out of range $r\$" $cmd $model $flag 9223372036854775808
    expect 2 "^systolic $cmd: $flag: -9223372036854775809 is out of range $r\$" $cmd $model $flag=-9223372036854775809
    expect 2 "^systolic $cmd: $flag expects an integer from $min to $max, got '12x'\$" $cmd $model $flag 12x
    expect 2 "^systolic $cmd: $flag expects an integer from $min to $max, got ''\$" $cmd $model $flag ""
    [ "$min" -gt -1 ] && expect 2 "^systolic $cmd: $flag: -1 is out of range $r\$" $cmd $model $flag -1
    [ "$min" -gt 0 ] && expect 2 "^systolic $cmd: $flag: 0 is out of range $r\$" $cmd $model $flag 0
    if [ "$max" = $I32 ]; then
        expect 2 "^systolic $cmd: $flag: 4294967296 is out of range $r\$" $cmd $model $flag 4294967296
        expect 2 "^systolic $cmd: $flag: 4294967299 is out of range $r\$" $cmd $model $flag 4294967299
        expect 2 "^systolic $cmd: $flag: 2147483648 is out of range $r\$" $cmd $model $flag 2147483648
    elif [ "$max" != $I64 ]; then
        expect 2 "^systolic $cmd: $flag: $((max + 1)) is out of range $r\$" $cmd $model $flag $((max + 1))
    fi
}

m=fashion_mnist_cnn
# the command lines
expect 2 "^systolic train: --epochs: 4294967299 is out of range \\(0 to $I32\\)\$" train $m --epochs 4294967299
expect 2 "^systolic train: --steps-per-execution: 4294967296 is out of range \\(1 to $I32\\)\$" train $m --steps-per-execution 4294967296
expect 2 "^systolic train: --validation-freq: 4294967296 is out of range \\(1 to $I32\\)\$" train $m --validation-freq 4294967296
expect 2 "^systolic train: --keep-checkpoints: 4294967296 is out of range \\(1 to $I32\\)\$" train $m --model-dir "$work/ckpt" --keep-checkpoints 4294967296
expect 2 "^systolic train: --learning-rate: 1e39 is out of range \\(0 to 3.40282e\\+38\\)\$" train $m --learning-rate 1e39
expect 2 "^systolic train: --batch-size: 9223372036854775808 is out of range \\(1 to $I64\\)\$" train $m --batch-size 9223372036854775808

# every integer flag of every command
for f in "--epochs 0 $I32" "--steps-per-epoch 0 $I64" "--batch-size 1 $I64" "--validation-freq 1 $I32" \
         "--validation-steps 0 $I64" "--seed 0 $I64" "--verbose 0 2" "--steps-per-execution 1 $I32" \
         "--save-checkpoints-steps 0 $I64" "--keep-checkpoints 1 $I32" "--update-freq 0 $I64" \
         "--early-stopping 0 $I32"; do
    range train $m $f
done
for f in "--batch-size 1 $I64" "--steps 0 $I64" "--seed 0 $I64" "--verbose 0 2" "--steps-per-execution 1 $I32"; do
    range evaluate $m $f
done
for f in "--batch-size 1 $I64" "--seed 0 $I64" "--verbose 0 2" "--count 0 $I64" "--steps-per-execution 1 $I32"; do
    range predict $m $f
done
range summary $m --seed 0 $I64
range convert mnist --shards 0 99999

# floats: finite, within the destination's type, not negative where meaningless
for v in 1e39 inf -inf -1 1e-400; do
    expect 2 "^systolic train: --learning-rate: $v is out of range \\(0 to 3.40282e\\+38\\)\$" train $m --learning-rate $v
done
expect 2 "^systolic train: --learning-rate expects a number from 0 to 3.40282e\\+38, got 'nan'\$" train $m --learning-rate nan
expect 2 "^systolic train: --learning-rate expects a number from 0 to 3.40282e\\+38, got '0.1x'\$" train $m --learning-rate 0.1x
expect 2 "^systolic train: --min-delta: inf is not a finite number\$" train $m --early-stopping 1 --min-delta inf
expect 2 "^systolic train: --min-delta: 1e999 is not a finite number\$" train $m --early-stopping 1 --min-delta 1e999
expect 2 "^systolic train: --min-delta expects a number .*got 'nan'\$" train $m --early-stopping 1 --min-delta nan

# names the library looks up: usage errors too, naming the flag
json=$src/tests/data/keras/fashion_mnist_cnn.json
expect 2 "^systolic train: --optimizer: unknown optimizer 'adagradd'" train $m --optimizer adagradd
expect 2 "^systolic train: --tpu: unknown device spec 'v9'" train $m --tpu v9
expect 2 "^systolic evaluate: --tpu: " evaluate $m --tpu cpu:0
expect 2 "^systolic devices: --tpu: unknown device spec 'nope'" devices --tpu nope
expect 2 "^systolic train: --data: 'train-\\*.tfrecord': expected tfrecord:GLOB" train $m --data "train-*.tfrecord"
expect 2 "^systolic train: --data-compression: unknown compression 'LZMA'" train $m --data "tfrecord:$work/x" --data-compression LZMA
expect 2 "^systolic convert: --compression: unknown compression 'LZMA'" convert mnist "$work/out" --compression LZMA
expect 2 "^systolic train: --metrics: ',,' has an empty name" train "$json" --dataset fashion_mnist --metrics ,,
expect 2 "^systolic train: --metrics: 'accuracy,' has an empty name" train "$json" --dataset fashion_mnist --metrics accuracy,
expect 2 "^systolic train: --metrics: '' has an empty name" train "$json" --dataset fashion_mnist --metrics ""
expect 2 "^systolic train: --loss: '' is no loss's name" train "$json" --dataset fashion_mnist --loss ""
expect 2 "^systolic train: --loss: compile: unknown loss 'hinge_loss'" train "$json" --dataset fashion_mnist --loss hinge_loss --tpu cpu:1
expect 2 "^systolic train: --metrics: compile: unknown metric 'auc'" train "$json" --dataset fashion_mnist --metrics auc --tpu cpu:1

# a model file that is a directory says so
mkdir -p "$work/dir.json"
expect 1 "cannot read '[^']*/dir.json': it is a directory" train "$work/dir.json" --dataset fashion_mnist --tpu cpu:1

# TFRecord files of three 28x28 images (convert --images), for what needs data
printf '\000\000\010\001\000\000\000\003\001\002\003' >"$work/labels.idx"
"$sy" convert --images "$src/tests/fuzz/corpus/fuzz_idx/images.idx" --labels "$work/labels.idx" --overwrite \
    "$work/records" >/dev/null || { echo "FAIL: convert"; failed=1; }
data="tfrecord:$work/records/train-*.tfrecord"
expect 2 "^systolic train: --monitor: 'val_acc' is not in the logs; known: loss, sparse_categorical_accuracy, and each with val_\$" \
    train $m --data "$data" --batch-size 3 --tpu cpu:1 --early-stopping 1 --monitor val_acc --verbose 0
# A plan larger than any machine's memory is refused before allocating,
# naming the batch size and the bytes; the batch 60001 (26.2 GB
# with the conv and the pool unfused: fused, issue 21, it fits in about 4 GB)
# where this machine has less than that available.
expect 1 "compile: the plan at batch size 1000000000000 \\(per replica\\) does not fit: its activations and gradients need [0-9.]+ GB \\([0-9]+ bytes\\); this machine has [0-9.]+ GB available" \
    train $m --data "$data" --batch-size 1000000000000 --tpu cpu:1 --steps-per-epoch 1 --verbose 0
# past int64 bytes: refused where the graph is built, naming the layer and
# its shape (no overflow: UBSan aborts the asan build)
expect 1 "model 'sequential': conv2d \\(conv2d/conv2d\\): its output \\(100000000000000, 26, 26, 64\\) is too large: more than 2\\^63 bytes" \
    train $m --data "$data" --batch-size 100000000000000 --tpu cpu:1 --steps-per-epoch 1 --verbose 0
expect 1 "model 'sequential': input \\(input\\): its output \\($I64, 28, 28, 1\\) is too large: more than 2\\^63 bytes" \
    train $m --data "$data" --batch-size $I64 --tpu cpu:1 --steps-per-epoch 1 --verbose 0
expect 1 "the dataset's batch size $I64 does not divide among the 2 replicas in sync; batch by a multiple of 2\$" \
    train $m --data "$data" --batch-size $I64 --tpu cpu:2 --steps-per-epoch 1 --verbose 0
avail=$(awk '/^MemAvailable:/ {print $2}' /proc/meminfo 2>/dev/null)
if [ -n "$avail" ] && [ "$avail" -lt 25000000 ]; then
    export SYSTOLIC_CONV_POOL=0
    expect 1 "compile: the plan at batch size 60001 \\(per replica\\) does not fit: its activations and gradients need 26.2 GB \\(26[0-9]{9} bytes\\)" \
        train $m --data "$data" --batch-size 60001 --tpu cpu:1 --steps-per-epoch 1 --verbose 0
    unset SYSTOLIC_CONV_POOL
fi
exit $failed
