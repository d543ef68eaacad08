#!/bin/sh
# cli_tpu1.sh SYSTOLIC SOURCE_DIR WORK_DIR - the TPU v1 on the command line
# (issue 18, points 4-5; docs/design/tpu-v1.md): `systolic devices --tpu
# sim:v1` gives the machine's figures; `systolic compile --target tpu-v1`
# lowers TensorFlow's tiny int8 model (tests/data/tflite) to a program that
# `--disassemble` prints and `systolic profile --tpu sim:v1` runs, with
# Table 3's counters; the paper's workloads run by name; bad flags are usage
# errors (2), bad files failures (1) naming what was wrong and where;
# training on the TPU v1 is refused. `systolic predict MODEL.tflite --tpu
# sim:v1` gives the cpu backend's outputs bit for bit, on any number of
# samples, then the program's emulated time; `--tpu cpu:N` the same;
# Cloud TPU slices and mpi are refused for a .tflite model.
set -u
sy=$1 src=$2 work=$3
mkdir -p "$work" || exit 1
failed=0

. "$src/tests/cli_expect.sh" # expect STATUS REGEX ARGS...

tiny=$src/tests/data/tflite/tiny_dense.tflite
prog=$work/tiny.bin
rm -f "$prog"
expect 0 "^sim:v1: 1 replica in sync~.*chip: TPU v1 \\(emulated\\), int8 inference.*matrix unit     256x256 int8 MACs \\(int8 x int8 -> int32\\), 700 MHz, 91.8 TeraOps/s~  on chip         24 MiB unified buffer, 4096 x 256 int32 accumulators \\(4 MiB\\)~  weights         8 GiB DDR3, 34 GB/s; weight FIFO 4 tiles of 64 KiB; 256 cycles to shift a tile in~  ridge           1349 MACs per weight byte" \
    devices --tpu sim:v1
expect 0 "^$prog: TPU v1 program for batch 4: input int8 \\(4, 1, 1, 8\\), output int8 \\(4, 1, 1, 4\\)~on the host after it: DEQUANTIZE" \
    compile --target tpu-v1 "$tiny" -o "$prog" --batch-size 4
expect 0 "^; TPU v1 program: 7 instructions, 1 weight tiles.*~[0-9a-f]{8}  Read_Weights      ddr_tile=0 tiles=1~[0-9a-f]{8}  Read_Host_Memory  ub=0 host=0 rows=4 bytes=8 stride=8~[0-9a-f]{8}  MatrixMultiply    ub=0 acc=0 rows=4 load~[0-9a-f]{8}  Activate.*Sync.*Write_Host_Memory ub=4 host=32 rows=4 bytes=4 stride=4~[0-9a-f]{8}  Halt" \
    compile --disassemble "$prog"
expect 0 "on TPU v1 \\(emulated\\), batch 4: 7 instructions, 1 weight tiles.*array active cycles.*useful MACs.*unused MACs.*weight stall cycles.*weight shift cycles.*non-matrix cycles.*RAW stalls.*input stalls.*TeraOps/s" \
    profile "$prog" --tpu sim:v1
expect 0 "^\\{\"model\": \"mlp1\", \"device\": \"sim:v1\", \"batch\": 168, \"cycles\": " profile mlp1 --tpu sim:v1 --json
expect 0 "^cnn0 on TPU v1 \\(emulated\\), batch 8: .*array active cycles +[0-9.]+%" profile cnn0 --tpu sim:v1

# predict on the TPU v1 (sy_lite_model_set_device): the model's QUANTIZE and DEQUANTIZE on the host, the
# program on the emulator, 10 samples at batch 4 (the last run padded): the cpu backend's outputs bit for bit
x=$src/tests/data/tflite/tiny_dense_x.npy
expect 0 "^wrote $work/y_cpu.npy: float32 \\(10, 4\\)~\$" predict "$tiny" --input "$x" --output "$work/y_cpu.npy" --tpu cpu:1
expect 0 "^wrote $work/y_cpu2.npy: float32 \\(10, 4\\)~\$" predict "$tiny" --input "$x" --output "$work/y_cpu2.npy" --tpu cpu:2 --batch-size 3
expect 0 "^wrote $work/y_v1.npy: float32 \\(10, 4\\)~TPU v1 \\(emulated\\): 3 runs of a batch-4 program: [0-9]+ cycles, [0-9.]+ [mu]s at 700 MHz, [0-9.e+-]+ TeraOps/s, [0-9.]+% array active, [0-9.]+% weight stall \\(Table 3's rows: systolic profile [^ ]*tiny_dense.tflite --tpu sim:v1 --batch-size 4\\)~\$" \
    predict "$tiny" --input "$x" --output "$work/y_v1.npy" --tpu sim:v1 --batch-size 4
expect 0 "^wrote $work/y_v1b.npy: float32 \\(10, 4\\)~\$" predict "$tiny" --input "$x" --output "$work/y_v1b.npy" --tpu sim:v1 --verbose 0
for y in y_cpu2 y_v1 y_v1b; do
    if ! cmp -s "$work/y_cpu.npy" "$work/$y.npy"; then
        echo "FAIL: predict: $y.npy differs from the cpu backend's y_cpu.npy"
        failed=1
    fi
done
expect 1 "^systolic predict: device spec 'sim:v3-8': a TFLite model runs on the cpu backend \\(local, cpu, cpu:N: N threads\\) or on the emulated TPU v1 \\(sim:v1\\)" \
    predict "$tiny" --input "$x" --output "$work/u.npy" --tpu sim:v3-8
expect 1 "^systolic evaluate: device spec 'mpi': a TFLite model runs in one process" evaluate "$tiny" --dataset mnist --tpu mpi
export SYSTOLIC_TPU=sim:v2-8 # the spec from the environment, as for the other commands
expect 1 "^systolic predict: device spec 'sim:v2-8' \\(from \\\$SYSTOLIC_TPU\\): a TFLite model runs on the cpu backend" \
    predict "$tiny" --input "$x" --output "$work/u.npy"
unset SYSTOLIC_TPU
expect 2 "^systolic predict: --tpu: device spec 'gpu:0'" predict "$tiny" --input "$x" --output "$work/u.npy" --tpu gpu:0

# refusals
expect 2 "^systolic compile: --target tpu-v2: the target is tpu-v1" compile --target tpu-v2 "$tiny" -o "$prog"
expect 2 "^systolic compile: give MODEL.tflite and -o PROGRAM" compile --target tpu-v1 "$tiny"
expect 2 "^systolic profile: mlp9: no such file, nor one of the paper's workloads \\(mlp0, mlp1, cnn0, fc\\)" profile mlp9 --tpu sim:v1
expect 2 "^systolic profile: --batch-size: a program's batch is fixed when it is compiled" profile "$prog" --tpu sim:v1 --batch-size 2
head -c 150 "$prog" >"$work/cut.bin"
expect 1 "^systolic compile: '$work/cut.bin' is not a valid TPU v1 program: at byte 12: truncated: the header's counts \\(88 bytes of instructions, 0 geometries, 1 descriptors, 1 tiles\\) need more than the 54 bytes left~\$" \
    compile --disassemble "$work/cut.bin"
cp "$tiny" "$work/not_a_program.bin"
expect 1 "^systolic profile: '$work/not_a_program.bin' is not a valid TPU v1 program: at byte 0: no TPU v1 program magic" \
    profile "$work/not_a_program.bin" --tpu sim:v1
expect 1 "^systolic compile: '$src/tests/fuzz/corpus/fuzz_tflite/tiny_dense_truncated.tflite' is not a valid TFLite model" \
    compile --target tpu-v1 "$src/tests/fuzz/corpus/fuzz_tflite/tiny_dense_truncated.tflite" -o "$work/t.bin"
expect 1 "^systolic train: device spec 'sim:v1': the TPU v1 runs int8 inference programs, not Keras models' steps" \
    train fashion_mnist_cnn --tpu sim:v1 --epochs 1
exit $failed
