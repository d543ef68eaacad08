#!/bin/sh
# tpu1_evaluate.sh SYSTOLIC MODEL.tflite - an int8 CNN on the emulated TPU
# v1 without TensorFlow (issue 18; docs/design/tpu-v1.md): MODEL is the
# Fashion-MNIST tutorial CNN `systolic quantize` made (the fixture
# quantize_cnn: QUANTIZE, CONV_2D, MAX_POOL_2D with its fused RELU,
# RESHAPE, FULLY_CONNECTED, SOFTMAX, DEQUANTIZE). `systolic evaluate
# --tpu sim:v1` on the first 150 test images at batch 50 (three runs of
# the program) must print the loss and accuracy the cpu backend prints (on
# one thread and on two), then the program's emulated time.
sy=$1 model=$2
run() { "$sy" evaluate "$model" --dataset fashion_mnist --steps 3 --batch-size 50 --tpu "$@"; }
cpu=$(run cpu:1) || exit 1
cpu2=$(run cpu:2) || exit 1
v1=$(run sim:v1) || exit 1
echo "$v1"
if [ "$cpu2" != "$cpu" ] || [ "$(echo "$v1" | head -n 1)" != "$cpu" ]; then
    echo "tpu1_evaluate: sim:v1 printed '$v1', cpu:2 '$cpu2', cpu:1 '$cpu'"
    exit 1
fi
