#!/bin/sh
# cli_corrupt_tfrecord.sh - `systolic train --data tfrecord:...` on damaged
# files: one shard of `systolic convert fashion_mnist` (uncompressed, every
# record the same size) copied and damaged three ways -- a flipped byte in
# a record's data, a wrong length field, a truncated file. Each must stop
# the command with a non-zero status and a message naming the file, the
# record's index and its byte offset; with --skip-corrupt the command
# trains and reports how many records it skipped.
#
#   sh tests/cli_corrupt_tfrecord.sh build/systolic DIR_WITH_CONVERTED_SHARDS
systolic=$1
src=$2/train-00000-of-00006.tfrecord
dir=$(mktemp -d "${TMPDIR:-/tmp}/systolic-corrupt-XXXXXX") || exit 1
trap 'rm -rf "$dir"' EXIT
file=$dir/train-00000-of-00001.tfrecord
failures=0

fail() {
    echo "FAILED: $*"
    failures=$((failures + 1))
}

# Each record: u64 length, u32 its CRC, the data, u32 the data's CRC.
len=$(od -An -t u8 -N 8 "$src" | tr -d ' ')
rec=$((len + 16))
records=$(($(wc -c <"$src") / rec))
[ "$records" -eq 10000 ] || { echo "expected 10000 records of $rec bytes in $src"; exit 1; }

# Replace the byte at offset $1 of $file by its complement.
flip() {
    b=$(od -An -t u1 -j "$1" -N 1 "$file" | tr -d ' ')
    printf "\\$(printf %o $((b ^ 255)))" | dd of="$file" bs=1 seek="$1" conv=notrunc 2>/dev/null
}

# train [flags]: run a short training on $dir's file; output in $dir/out.
train() {
    "$systolic" train fashion_mnist_cnn --data "tfrecord:$dir/train-*.tfrecord" --epochs 1 --steps-per-epoch 2 \
        --verbose 0 "$@" >"$dir/out" 2>&1
}

# expect_error NAME INDEX REASON: the command failed naming the record.
expect_error() {
    status=$1
    name=$2
    shift 2
    if [ "$status" -eq 0 ]; then
        fail "$name: the command succeeded"
    fi
    for want in "$@"; do
        grep -qF -- "$want" "$dir/out" || fail "$name: no '$want' in: $(cat "$dir/out")"
    done
}

# expect_skipped NAME: with --skip-corrupt the command trains, counting
# one skipped record.
expect_skipped() {
    train --skip-corrupt
    status=$?
    [ $status -eq 0 ] || fail "$1, --skip-corrupt: status $status: $(cat "$dir/out")"
    grep -qF "skipped 1 corrupt record in '$file'" "$dir/out" || fail "$1, --skip-corrupt: no count in: $(cat "$dir/out")"
}

# 1. A flipped byte in record 5000's data.
cp "$src" "$file"
flip $((5000 * rec + 12 + 100))
train
expect_error $? "flipped byte" "$file: corrupt record 5000 at byte $((5000 * rec)): " "checksum"
expect_skipped "flipped byte"

# 2. A wrong length field (its checksum no longer matches) in record 7000.
cp "$src" "$file"
flip $((7000 * rec))
train
expect_error $? "wrong length" "$file: corrupt record 7000 at byte $((7000 * rec)): " "length field"

# 3. The file cut 100 bytes into its last record.
cp "$src" "$file"
truncate -s $((9999 * rec + 100)) "$file"
train
expect_error $? "truncated" "$file: corrupt record 9999 at byte $((9999 * rec)): " "truncated"
expect_skipped "truncated"

if [ $failures -ne 0 ]; then
    echo "$failures failure(s)"
    exit 1
fi
echo "corrupt TFRecord files: all checks passed"
