/*
 * systolic/lite.h - int8 models in TensorFlow Lite's format (issue 18): a
 * .tflite file run by systolic's int8 path, post-training quantization of
 * a Keras model into one, and the first TPU (TPU v1) that runs them.
 * docs/design/tflite.md says how.
 *
 * The module (src/lite/) sits above io (the .tflite reader and writer,
 * which know nothing of models), the compiler and the backends (the int8
 * ops and kernels, the sim backend's TPU v1), and keras (the float models
 * that quantization starts from).
 */
#ifndef SYSTOLIC_LITE_H
#define SYSTOLIC_LITE_H

#include "systolic/core.h"
#include "systolic/keras.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Running a .tflite model ----------------------------------------------
 * (loading, predict, evaluate) */

/* An int8 TFLite model (full-integer quantization, as TFLiteConverter writes it) made into a graph of
 * systolic's int8 ops, which compute TFLite's reference kernels' integers exactly (src/lite/lite_model.c,
 * docs/design/tflite.md); or a dynamic-range one (int8 weights, float32 activations: Embedding, LSTM, Dense)
 * made into systolic's hybrid ops, which follow TFLite's hybrid kernels. Operators outside the supported set,
 * float32 models and other tensor types are refused by name when loading. */
typedef struct sy_lite_model sy_lite_model;

sy_status sy_lite_model_load(const char *path, sy_lite_model **out);
void sy_lite_model_free(sy_lite_model *m);

/* The model's input or output as the file declares it: dtype SY_F32 or SY_I8, shape with the batch axis
 * -1, and the scale and zero point of an int8 one (0 for float32). */
typedef struct sy_lite_io {
    const char *name;
    sy_dtype dtype;
    sy_shape shape;
    float scale;
    int32_t zero_point;
} sy_lite_io;
void sy_lite_model_io(const sy_lite_model *m, bool output, sy_lite_io *io);
int32_t sy_lite_model_op_count(const sy_lite_model *m);
const char *sy_lite_model_ops(const sy_lite_model *m, int32_t i); /* "CONV_2D": operator i's name */
/* Rows of the embedding table (GATHER's params) the model's int32 input indexes, as --dataset imdb needs
 * for its vocabulary; 0 when the input indexes none. */
int64_t sy_lite_model_vocabulary(const sy_lite_model *m);

/* The outputs for x (N, input shape...), batch_size rows at a time (<= 0: 32): a tensor of the output's
 * dtype, (N, output shape...). x is of the input's dtype; for an int8 input an int32 tensor of values in
 * [-128, 127] too (NumPy's int8 files load so). Shapes and dtypes are checked, with both named. */
sy_status sy_lite_model_predict(sy_lite_model *m, const sy_tensor *x, int64_t batch_size, sy_tensor **out);

/* Where sy_lite_model_predict runs, a device spec in sy_cluster_resolve's forms (systolic/distribute.h;
 * NULL or "": $SYSTOLIC_TPU, else "local"):
 *   local, cpu   the cpu backend, a kernel thread per core
 *   cpu:N        the cpu backend on N threads (at most the cores)
 *   sim:v1       the emulated TPU v1: the model lowered as sy_tpu1_compile lowers it, compiled for
 *                predict's batch_size (the last partial batch padded, its outputs dropped) and run by
 *                sy_tpu1_run; the operators the lowering leaves to the host (a float input's QUANTIZE,
 *                a trailing SOFTMAX and DEQUANTIZE) on the cpu backend; sy_lite_model_tpu1_counters
 *                gives the program's counters
 * Until it is called the model runs on the cpu backend on the calling thread. The outputs are the same
 * bits on every device. A spec sy_cluster_resolve refuses is SY_ERR_INVALID_ARGUMENT; the emulated Cloud TPU slices
 * (sim:v2-8, ...) and mpi SY_ERR_UNSUPPORTED, as is on sim:v1 a model the TPU v1 lowering does not take
 * (naming its first operator that it does not run, as sy_tpu1_compile); the device is then unchanged. */
sy_status sy_lite_model_set_device(sy_lite_model *m, const char *spec);


/* ---- Post-training quantization --------------------------------------------
 * (a Keras model to an int8 .tflite file) */

/* What TFLiteConverter does with optimizations=[DEFAULT], a representative
 * dataset and TFLITE_BUILTINS_INT8 (docs/design/tflite.md, "Quantization"):
 * per-channel symmetric int8 weights, per-tensor asymmetric int8
 * activations from the float model's ranges on calibration batches, int32
 * biases, BatchNormalization folded, ReLU fused. */
typedef struct sy_lite_quantize_options {
    int64_t calibration_steps; /* batches of calibration samples run through the float model (100) */
    int64_t batch_size;        /* samples per calibration batch (32) */
    bool int8_input;           /* inference_input_type int8: the file takes int8 (no QUANTIZE op); false: float32 */
    bool int8_output;          /* inference_output_type int8 (no DEQUANTIZE op); false: float32 */
    /* Dynamic-range quantization (what TFLiteConverter does with optimizations=[DEFAULT] and no representative
     * dataset): int8 weights, float32 activations, no calibration. Taken whatever this says for a model with an
     * Embedding or an LSTM, which full-integer quantization does not take here; true forces it for others
     * (Dense layers). */
    bool dynamic_range;
} sy_lite_quantize_options;

sy_lite_quantize_options sy_lite_quantize_options_default(void);

/* What a quantization did, for a report. */
typedef struct sy_lite_quantize_report {
    int32_t n_ops;            /* operators in the file */
    char ops[512];            /* their kinds in order of first use: "QUANTIZE CONV_2D MAX_POOL_2D ..." */
    int64_t samples;          /* calibration samples run */
    int64_t float_bytes;      /* the float model's weights: its parameters as float32 */
    int64_t file_bytes;       /* the .tflite file */
    bool dynamic_range;       /* the file is dynamic-range (int8 weights, float activations; samples 0) */
} sy_lite_quantize_report;

/* Quantize the float model m (built, one input and one output) into
 * the .tflite file at path (written atomically: on any failure path keeps
 * what it held). Full-integer: calibration holds samples (N, the input's
 * shape...), float32: the first calibration_steps * batch_size of them
 * (all, when fewer) are run through m to find each tensor's range.
 * Dynamic-range (sy_lite_quantize_dynamic): calibration is not used and may
 * be NULL. A layer outside the supported set is refused
 * (SY_ERR_UNSUPPORTED) naming it and why. o and report may be NULL. */
sy_status sy_lite_quantize(sy_model *m, const sy_tensor *calibration, const sy_lite_quantize_options *o,
                           const char *path, sy_lite_quantize_report *report);
/* Whether sy_lite_quantize takes m's layers (SY_OK), or the refusal it would give: a check that needs no data.
 * o may be NULL (the defaults). */
sy_status sy_lite_quantize_check(const sy_model *m, const sy_lite_quantize_options *o);
/* Whether sy_lite_quantize(m, ..., o, ...) does dynamic-range quantization (no calibration data needed). */
bool sy_lite_quantize_dynamic(const sy_model *m, const sy_lite_quantize_options *o);


/* ---- TPU v1 ----------------------------------------------------------------
 * (lowering an int8 model to TPU v1 programs, running them) */
#include <stdio.h>
#include "systolic/tpu.h" /* the machine's figures and the counters */

/* A TPU v1 program (docs/design/tpu-v1.md): instructions, the weight image
 * for DDR3, the host buffers of its input and output, Activate's constants. */
typedef struct sy_tpu1_prog sy_tpu1_program;

/* Lower the int8 model in a .tflite file to a TPU v1 program for a batch of
 * `batch` (>= 1) inputs: FULLY_CONNECTED and CONV_2D as MatrixMultiply and
 * Convolve over 256x256 weight tiles, MAX_POOL_2D, AVERAGE_POOL_2D, RELU and
 * RELU6 in Activate, RESHAPE as a view; a leading QUANTIZE and a trailing
 * SOFTMAX / DEQUANTIZE stay on the host, named in host_tail (a buffer of
 * tail_size bytes, may be NULL). Another op is refused by name
 * (SY_ERR_UNSUPPORTED), as is a program the 24 MiB unified buffer cannot
 * hold (with both sizes). */
sy_status sy_tpu1_compile(const char *tflite_path, int32_t batch, sy_tpu1_program **out, char *host_tail,
                          size_t tail_size);
/* The paper's workloads built directly, random int8 weights (seeded): "mlp0"
 * and "mlp1" (Table 1's layers, weights and batch; widths chosen in
 * docs/design/tpu-v1.md), "cnn0" (16 3x3 convolutions on a 19x19 board),
 * "fc" (one 2048x2048 fully connected layer, for the roofline). batch 0
 * takes the paper's. */
sy_status sy_tpu1_paper_model(const char *name, int32_t batch, uint64_t seed, sy_tpu1_program **out);
/* The names sy_tpu1_paper_model knows, for messages: "mlp0, mlp1, cnn0, fc". */
const char *sy_tpu1_paper_models(void);

/* Read and check a program file (a malformed one is SY_ERR_CORRUPT naming the
 * byte offset and what was wrong); write one atomically. */
sy_status sy_tpu1_program_read(const char *path, sy_tpu1_program **out);
sy_status sy_tpu1_program_write(const sy_tpu1_program *p, const char *path);
void sy_tpu1_program_free(sy_tpu1_program *p);
/* The program as text, an instruction a line. */
void sy_tpu1_program_disassemble(const sy_tpu1_program *p, FILE *out);
/* Its input and output: int8 (n, h, w, c) with their scale and zero point. */
typedef struct sy_tpu1_io {
    int64_t shape[4];
    float scale;
    int32_t zero_point;
} sy_tpu1_io;
void sy_tpu1_program_io(const sy_tpu1_program *p, sy_tpu1_io *input, sy_tpu1_io *output);

/* Run p on the emulated TPU v1 (`--tpu sim:v1`): input (the input's
 * n*h*w*c int8 values) in, output out, bit for bit TFLite's reference
 * kernels; the Table 3 counters (systolic/tpu.h) in counters (may be NULL).
 * input and output both NULL times the program alone. */
sy_status sy_tpu1_run(const sy_tpu1_program *p, const int8_t *input, int8_t *output, sy_tpu1_counters *counters);

/* A .tflite model on sim:v1 (sy_lite_model_set_device): the counters summed over the program's runs since
 * the device was set (cycles, MACs, stalls, seconds and bytes added; tops over the sum), the runs (one a
 * batch) and the batch the program was last compiled for (0 before the first predict). Each may be NULL;
 * false, and nothing set, on another device. */
bool sy_lite_model_tpu1_counters(const sy_lite_model *m, sy_tpu1_counters *counters, int64_t *runs, int64_t *batch);


#ifdef __cplusplus
}
#endif

#endif
