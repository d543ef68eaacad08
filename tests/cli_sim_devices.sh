#!/bin/sh
# cli_sim_devices.sh SYSTOLIC SOURCE_DIR WORK_DIR - the emulated TPU slices
# on the command line (issue 16, point 1): `systolic devices --tpu sim:...`
# lists a replica per core (per chip on v4) and the chip's figures; unknown
# chips and slices Cloud TPU does not offer are usage errors (2) naming what
# there is; a model that does not fit in a core's HBM is refused (1) when
# compiled, naming each size, before anything is allocated.
set -u
sy=$1 src=$2 work=$3
mkdir -p "$work" || exit 1
failed=0

. "$src/tests/cli_expect.sh" # expect STATUS REGEX ARGS...

expect 0 "^sim:v3-8: 8 replicas in sync~  replica kind chip core name~        0 SIM     0    0 /job:worker/replica:0/task:0/device:TPU:0~.*        7 SIM     3    1 /job:worker/replica:0/task:0/device:TPU:7~chip: TPU v3 \\(emulated\\), 4 chips, 8 TensorCores, 1 host~  TensorCores     2 per chip, a replica each~  MXUs            2 per core, each a 128x128 systolic array \\(bfloat16 x bfloat16 -> float32\\)~  clock           940 MHz~  peak            123 TFLOPS bf16 per chip \\(61.5 per core\\), 492 the slice~  HBM             32 GiB per chip \\(16 GiB a replica\\), 900 GB/s~  interconnect    4 links per chip, 82 GB/s each way" devices --tpu sim:v3-8
expect 0 "^sim:v2-8: 8 replicas in sync.*MXUs            1 per core, each a 128x128.*clock           700 MHz.*HBM             16 GiB per chip \\(8 GiB a replica\\), 700 GB/s" \
    devices --tpu sim:v2-8
# v4: the two cores of a chip are one device (megacore)
expect 0 "^sim:v4-8: 4 replicas in sync.*        3 SIM     3  0-1 /job:worker/replica:0/task:0/device:TPU:3~chip: TPU v4 \\(emulated\\), 4 chips, 8 TensorCores, 1 host.*MXUs            4 per core.*peak            275 TFLOPS bf16 per chip" \
    devices --tpu sim:v4-8
expect 0 "^sim:v3-32: 32 replicas in sync.*       31 SIM    15    1 /job:worker/replica:0/task:3/device:TPU:7~chip: TPU v3 \\(emulated\\), 16 chips, 32 TensorCores, 4 hosts" devices --tpu sim:v3-32
export SYSTOLIC_TPU=sim:v2-32 # the spec from the environment, as for cpu:N
expect 0 "^sim:v2-32: 32 replicas in sync" devices
unset SYSTOLIC_TPU

# issue 20, pods on paper: each slice's chips as Cloud TPU lays them out, and the all-reduce the cost
# model runs over them; `profile` of a pod slice runs and names its torus
expect 0 "topology        one host's 4 chips: the gradients go round a ring of 8 replicas" devices --tpu sim:v3-8
expect 0 "topology        4x4 chips, 2-D mesh;" devices --tpu sim:v3-32
expect 0 "topology        16x32 chips, 2-D mesh, wrapped along the 32;" devices --tpu sim:v3-1024
expect 0 "topology        16x16 chips, 2-D torus;" devices --tpu sim:v2-512
expect 0 "topology        4x4x4 chips, 3-D torus;" devices --tpu sim:v4-128
expect 0 "^fashion_mnist_cnn on TPU v3: 2048 replicas, batch 8 per replica \\(16384 global\\).*all-reduce: .*\\(0.435 MB of gradients, 32x32 chips, 2-D torus\\)~.*step: [0-9.]+ ms" \
    profile fashion_mnist_cnn --tpu sim:v3-2048 --batch-size 16384
expect 0 "all-reduce: .*\\(0.435 MB of gradients, ring of 8\\)" profile fashion_mnist_cnn --tpu sim:v2-8 --batch-size 1024
expect 0 "\"topology\": \\{\"chips\": \\[16, 32\\], \"wrap\": \\[false, true\\]\\}" \
    profile fashion_mnist_cnn --tpu sim:v3-1024 --batch-size 8192 --json
expect 2 "^systolic profile: --tpu: device spec 'sim:v3-4096': a TPU v3 slice has no '4096' TensorCores; the v3 slices have \\(cores\\): 8, 32, 64, 128, 256, 512, 1024, 2048~\$" \
    profile fashion_mnist_cnn --tpu sim:v3-4096
expect 2 "^systolic profile: --tpu: device spec 'sim:v2-64': a TPU v2 slice has no '64' TensorCores; the v2 slices have \\(cores\\): 8, 32, 128, 256, 512~\$" \
    profile fashion_mnist_cnn --tpu sim:v2-64

expect 2 "^systolic devices: --tpu: device spec 'sim:v3-7': a TPU v3 slice has no '7' TensorCores; the v3 slices have \\(cores\\): 8, 32, 64, 128, 256, 512, 1024, 2048~\$" devices --tpu sim:v3-7
expect 2 "^systolic devices: --tpu: device spec 'sim:v5-8': unknown TPU chip 'v5'; the emulated chips are: v2, v3, v4~\$" devices --tpu sim:v5-8
expect 2 "^systolic train: --tpu: device spec 'sim:v4-6': a TPU v4 slice has no '6' TensorCores" train fashion_mnist_cnn --tpu sim:v4-6
expect 2 "^systolic train: --tpu: device spec 'tpu:v3-8': systolic runs TPU semantics on CPU cores and has no TPU device; use sim:v2-8 \\(an emulated TPU v2-8\\)" \
    train fashion_mnist_cnn --tpu tpu:v3-8

# A batch of 30,000 per replica needs 12 GiB of activations: more than a
# TPU v2 core's 8 GiB (16 per chip), refused before allocating anything.
printf '\000\000\010\001\000\000\000\003\001\002\003' >"$work/labels.idx"
"$sy" convert --images "$src/tests/fuzz/corpus/fuzz_idx/images.idx" --labels "$work/labels.idx" --overwrite \
    "$work/records" >/dev/null || { echo "FAIL: convert"; failed=1; }
expect 1 "systolic train: fashion_mnist_cnn: compile: the plan at batch size 30000 \\(per replica\\) does not fit in a TPU v2 core's HBM \\(8.0 GiB\\): it needs 12.2 GiB -- weights 425.1 KiB, optimizer slots 850.1 KiB, gradients 425.1 KiB, activations 12.2 GiB; use a smaller batch size" \
    train fashion_mnist_cnn --data "tfrecord:$work/records/train-*.tfrecord" --batch-size 240000 --tpu sim:v2-8 \
    --steps-per-epoch 1 --verbose 0
# Under mixed_bfloat16 the chip stores the activations Keras computes in bfloat16 at 2 bytes: 45,000 a
# replica need 9.3 GiB of them (18.3 in float32), still past 8 GiB; the weights and their slots and
# gradients stay float32.
expect 1 "systolic train: fashion_mnist_cnn: compile: the plan at batch size 45000 \\(per replica\\) does not fit in a TPU v2 core's HBM \\(8.0 GiB\\): it needs 9.3 GiB -- weights 425.1 KiB, optimizer slots 850.1 KiB, gradients 425.1 KiB, activations 9.3 GiB; use a smaller batch size" \
    train fashion_mnist_cnn --data "tfrecord:$work/records/train-*.tfrecord" --batch-size 360000 --tpu sim:v2-8 \
    --steps-per-epoch 1 --verbose 0 --dtype-policy mixed_bfloat16
exit $failed
