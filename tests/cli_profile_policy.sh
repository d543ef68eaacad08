#!/bin/sh
# cli_profile_policy.sh SYSTOLIC WORK_DIR - the emulated TPU's clock under
# Keras's mixed_bfloat16 policy (issue 16, points 1 and 5): `systolic profile
# --dtype-policy mixed_bfloat16` costs the values Keras computes in bfloat16
# at 2 bytes -- the ops that write bfloat16 are named, the convolutions' and
# pooling's bytes halve, the gradients the replicas all-reduce stay float32 --
# and `systolic train --tpu sim:... --dtype-policy mixed_bfloat16` shows the
# same time per step beside the host's as the profile gives; a model file
# written by tf.keras under the policy is costed as the flag costs it.
set -u
sy=$1 work=$2
rm -rf "$work" && mkdir -p "$work" || exit 1
failed=0
fail() {
    echo "FAIL: $*"
    failed=1
}

# profile POLICY: the table of a training step on a v2-8, in $work/POLICY.txt
profile() {
    "$sy" profile fashion_mnist_cnn --tpu sim:v2-8 --batch-size 80 --dtype-policy "$1" >"$work/$1.txt" 2>&1 ||
        fail "profile --dtype-policy $1: exit status $? ($(cat "$work/$1.txt"))"
}
profile float32
profile mixed_bfloat16

# a row's MB: the first row of layer $2 running op $3 in table $1
mb() { awk -v l="$2" -v o="$3" '$1 == l && $2 == o { print $5; exit }' "$1"; }
# the table's summary values
step_ms() { sed -n 's/^step: \([0-9.]*\) ms.*/\1/p' "$1"; }
grad_mb() { sed -n 's/^all-reduce: .*(\([0-9.]*\) MB of gradients.*/\1/p' "$1"; }
bf16_ops() { sed -n 's/.*steps_per_execution 1, \([0-9]*\) of [0-9]* ops write bfloat16$/\1/p' "$1"; }

f=$work/float32.txt m=$work/mixed_bfloat16.txt
[ "$(bf16_ops "$f")" = 0 ] || fail "float32: $(bf16_ops "$f") ops write bfloat16, want 0"
[ "${n:=$(bf16_ops "$m")}" -gt 10 ] 2>/dev/null || fail "mixed_bfloat16: '$n' ops write bfloat16, want most of them"
grep -Eq '^conv2d +conv2d +bf16 ' "$m" || fail "mixed_bfloat16: the convolution does not write bfloat16"
grep -Eq '^conv2d +conv2d_backprop_filter +f32 ' "$m" || fail "mixed_bfloat16: the kernel's gradient is not float32"
# max-pooling reads the convolution's output and writes a quarter of it: all bfloat16, half the bytes
# (to the table's three decimals)
awk -v a="$(mb "$f" max_pooling2d max_pool2d)" -v b="$(mb "$m" max_pooling2d max_pool2d)" \
    'BEGIN { d = 2 * b - a; exit !(a > 0 && d < 0.002 && d > -0.002) }' || fail "max_pool2d: $(mb "$m" max_pooling2d max_pool2d) MB under the policy, want half of $(mb "$f" max_pooling2d max_pool2d)"
[ "$(grad_mb "$m")" = "$(grad_mb "$f")" ] || fail "the all-reduce moves $(grad_mb "$m") MB under the policy, $(grad_mb "$f") in float32: the gradients are float32 in both"
awk -v a="$(step_ms "$f")" -v b="$(step_ms "$m")" 'BEGIN { exit !(b > 0 && b < a) }' ||
    fail "the step takes $(step_ms "$m") ms under the policy, not less than float32's $(step_ms "$f")"

# train's progress line shows the profile's step time, three significant figures
for policy in float32 mixed_bfloat16; do
    want=$(awk -v t="$(step_ms "$work/$policy.txt")" 'BEGIN { printf "%.3g", t }')
    out=$("$sy" train fashion_mnist_cnn --tpu sim:v2-8 --batch-size 80 --epochs 1 --steps-per-epoch 2 --dtype-policy "$policy" 2>&1) ||
        fail "train --dtype-policy $policy: exit status $? ($out)"
    printf '%s\n' "$out" | grep -Fq "(TPU v2-8: ${want}ms/step)" ||
        fail "train --dtype-policy $policy shows no '(TPU v2-8: ${want}ms/step)': $out"
done

# A model file under the policy (its layers' Policy objects in the JSON, as tf.keras writes them) is
# costed as --dtype-policy costs the float32 file.
for policy in float32 mixed_bfloat16; do
    "$sy" train fashion_mnist_cnn --batch-size 80 --epochs 1 --steps-per-epoch 1 --dtype-policy $policy \
        --save-model "$work/$policy.json" >/dev/null 2>&1 || fail "train --save-model $policy.json: exit status $?"
done
"$sy" profile "$work/mixed_bfloat16.json" --tpu sim:v2-8 --batch-size 1000 >"$work/file.txt" 2>&1 ||
    fail "profile mixed_bfloat16.json: exit status $? ($(cat "$work/file.txt"))"
"$sy" profile "$work/float32.json" --tpu sim:v2-8 --batch-size 1000 --dtype-policy mixed_bfloat16 >"$work/flag.txt" 2>&1 ||
    fail "profile float32.json --dtype-policy mixed_bfloat16: exit status $? ($(cat "$work/flag.txt"))"
[ "$(bf16_ops "$work/file.txt")" = "$n" ] && [ "$(step_ms "$work/file.txt")" = "$(step_ms "$work/flag.txt")" ] ||
    fail "the model file under its own policy: $(tail -1 "$work/file.txt"), the float32 file under the flag: $(tail -1 "$work/flag.txt")"
[ $failed = 0 ] && echo "profile under mixed_bfloat16: ok"
exit $failed
