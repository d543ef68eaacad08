/*
 * tpu1.c - the TPU v1 on the command line (issue 18; docs/design/tpu-v1.md):
 *
 *   systolic compile --target tpu-v1 MODEL.tflite -o prog.bin [--batch-size N]
 *   systolic compile --disassemble prog.bin
 *   systolic profile MODEL --tpu sim:v1 [--batch-size N] [--input X.npy --output Y.npy] [--json]
 *
 * compile lowers an int8 .tflite model to a TPU v1 program file (the
 * library's sy_tpu1_compile) or prints one as text. profile with --tpu
 * sim:v1 runs MODEL -- a .tflite file, a program file, or one of the
 * paper's workloads (mlp0, mlp1, cnn0, fc) -- on the emulated TPU v1 and
 * prints the counters of the paper's Table 3; with --input it also computes
 * the outputs (a float input is quantized with the program input's scale
 * and zero point, as TFLite's QUANTIZE; integers are taken as int8) and
 * --output writes them (int8 values as int32 .npy, before any host tail
 * such as SOFTMAX). cmd_profile hands itself over here for sim:v1.
 */
#include "cli_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static bool has_suffix(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcasecmp(s + n - k, suffix) == 0;
}

int cmd_compile(int argc, char **argv) {
    const char *target = NULL, *output = NULL, *disasm = NULL;
    int64_t batch = 1;
    enum { C_TARGET, C_OUT, C_BATCH, C_DIS, C_N };
    flag f[C_N] = {
        {"--target", FLAG_STRING, &target, "NAME", "what to compile for: tpu-v1 (the first TPU's programs)", .set = false},
        {"--output", FLAG_STRING, &output, "FILE", "the program file to write (also -o FILE)", .set = false},
        {"--batch-size", FLAG_INT, &batch, "N", "inputs the program takes at once (default 1)", .set = false, .min = 1,
         .max = 65536},
        {"--disassemble", FLAG_STRING, &disasm, "PROGRAM", "print a program file as text instead", .set = false},
    };
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: systolic compile --target tpu-v1 MODEL.tflite -o PROGRAM [--batch-size N]\n"
                   "       systolic compile --disassemble PROGRAM\n\n"
                   "Lower an int8 TensorFlow Lite model to a TPU v1 program (Read_Host_Memory, Read_Weights, "
                   "MatrixMultiply/Convolve, Activate, Write_Host_Memory, Sync, Halt; docs/design/tpu-v1.md), or "
                   "print one. Run it with: systolic profile PROGRAM --tpu sim:v1\n\nflags:\n");
            flags_help(stdout, f, C_N);
            return 0;
        }
    /* -o FILE, as compilers take it: the flag parser knows only --flags */
    char *args[64];
    if (argc > 64) {
        fprintf(stderr, "systolic compile: too many arguments\n");
        return 2;
    }
    for (int i = 0; i < argc; i++) args[i] = strcmp(argv[i], "-o") ? argv[i] : "--output";
    const char *pos[1];
    int n_pos;
    int rc = flags_parse(argc, args, f, C_N, pos, 1, &n_pos, "compile");
    if (rc) return rc;
    if (disasm) {
        if (n_pos || target || output || f[C_BATCH].set) {
            fprintf(stderr, "systolic compile: --disassemble PROGRAM takes nothing else\n");
            return 2;
        }
        sy_tpu1_program *p;
        if (sy_tpu1_program_read(disasm, &p)) {
            fprintf(stderr, "systolic compile: %s\n", sy_last_error());
            return 1;
        }
        sy_tpu1_program_disassemble(p, stdout);
        sy_tpu1_program_free(p);
        return 0;
    }
    if (!target || strcmp(target, "tpu-v1")) {
        fprintf(stderr, "systolic compile: --target %s: the target is tpu-v1 (the first TPU)\n", target ? target : "missing;");
        return 2;
    }
    if (n_pos != 1 || !output) {
        fprintf(stderr, "systolic compile: give MODEL.tflite and -o PROGRAM (see systolic compile --help)\n");
        return 2;
    }
    sy_tpu1_program *p;
    char tail[96] = "";
    if (sy_tpu1_compile(pos[0], (int32_t)batch, &p, tail, sizeof tail)) {
        fprintf(stderr, "systolic compile: %s\n", sy_last_error());
        return 1;
    }
    sy_status st = sy_tpu1_program_write(p, output);
    sy_tpu1_io in, out;
    sy_tpu1_program_io(p, &in, &out);
    sy_tpu1_program_free(p);
    if (st) {
        fprintf(stderr, "systolic compile: %s\n", sy_last_error());
        return 1;
    }
    printf("%s: TPU v1 program for batch %lld: input int8 (%lld, %lld, %lld, %lld), output int8 (%lld, %lld, %lld, %lld)\n",
           output, (long long)batch, (long long)in.shape[0], (long long)in.shape[1], (long long)in.shape[2],
           (long long)in.shape[3], (long long)out.shape[0], (long long)out.shape[1], (long long)out.shape[2],
           (long long)out.shape[3]);
    if (*tail) printf("on the host after it: %s (the program's output is their int8 input)\n", tail);
    return 0;
}

/* ---- profile --tpu sim:v1 ---------------------------------------------------------------------- */

static void print_counters(FILE *o, const char *model, int64_t batch, const sy_tpu1_counters *c, bool json) {
    double t = c->cycles > 0 ? c->cycles : 1, peak = t * 65536;
    if (json) {
        fprintf(o, "{\"model\": ");
        cli_json_string(o, model);
        fprintf(o,
                ", \"device\": \"sim:v1\", \"batch\": %lld, \"cycles\": %.17g, \"seconds\": %.9g, "
                "\"array_active_cycles\": %.17g, \"useful_macs\": %.17g, \"unused_macs\": %.17g, "
                "\"weight_stall_cycles\": %.17g, \"weight_shift_cycles\": %.17g, \"non_matrix_cycles\": %.17g, "
                "\"raw_stall_cycles\": %.17g, \"input_stall_cycles\": %.17g, \"tops\": %.9g, \"instructions\": %lld, "
                "\"weight_tiles\": %lld, \"weight_bytes\": %.17g, \"host_bytes\": %.17g}\n",
                (long long)batch, c->cycles, c->seconds, c->array_active_cycles, c->useful_macs, c->unused_macs,
                c->weight_stall_cycles, c->weight_shift_cycles, c->non_matrix_cycles, c->raw_stall_cycles,
                c->input_stall_cycles, c->tops, (long long)c->instructions, (long long)c->weight_tiles, c->weight_bytes,
                c->host_bytes);
        return;
    }
    fprintf(o, "%s on TPU v1 (emulated), batch %lld: %lld instructions, %lld weight tiles (%.2f MB from DDR3), %.2f MB over PCIe\n",
            model, (long long)batch, (long long)c->instructions, (long long)c->weight_tiles, c->weight_bytes / 1e6,
            c->host_bytes / 1e6);
    fprintf(o, "%-26s %14.0f  %.1f us\n", "cycles (700 MHz)", c->cycles, c->seconds * 1e6);
    fprintf(o, "%-26s %13.1f%%\n", "array active cycles", 100 * c->array_active_cycles / t);
    fprintf(o, "%-26s %13.1f%%\n", "useful MACs (% of peak)", 100 * c->useful_macs / peak);
    fprintf(o, "%-26s %13.1f%%\n", "unused MACs", 100 * c->unused_macs / peak);
    fprintf(o, "%-26s %13.1f%%\n", "weight stall cycles", 100 * c->weight_stall_cycles / t);
    fprintf(o, "%-26s %13.1f%%\n", "weight shift cycles", 100 * c->weight_shift_cycles / t);
    fprintf(o, "%-26s %13.1f%%\n", "non-matrix cycles", 100 * c->non_matrix_cycles / t);
    fprintf(o, "%-26s %13.1f%%\n", "RAW stalls", 100 * c->raw_stall_cycles / t);
    fprintf(o, "%-26s %13.1f%%\n", "input stalls", 100 * c->input_stall_cycles / t);
    fprintf(o, "%-26s %14.1f  (peak 92)\n", "TeraOps/s", c->tops);
}

/* The int8 input from X.npy: a float array quantized as TFLite's QUANTIZE, integers taken as they are. */
static int read_input(const char *path, const sy_tpu1_io *in, int8_t **x) {
    sy_tensor *t;
    if (sy_npy_read(path, &t)) {
        fprintf(stderr, "systolic profile: --input: %s\n", sy_last_error());
        return 1;
    }
    int64_t want = in->shape[0] * in->shape[1] * in->shape[2] * in->shape[3], n = sy_tensor_count(t);
    sy_dtype dt = sy_tensor_dtype(t);
    int rc = 0;
    if (n != want || (dt != SY_F32 && dt != SY_I32)) {
        fprintf(stderr,
                "systolic profile: --input %s: %lld values of %s; the program takes %lld (%lld, %lld, %lld, %lld) as "
                "float32 or int8\n",
                path, (long long)n, sy_dtype_name(dt), (long long)want, (long long)in->shape[0], (long long)in->shape[1],
                (long long)in->shape[2], (long long)in->shape[3]);
        rc = 2;
    } else if (!(*x = malloc((size_t)want))) {
        fprintf(stderr, "systolic profile: out of memory\n");
        rc = 1;
    } else {
        for (int64_t i = 0; i < n && !rc; i++) {
            int32_t v;
            if (dt == SY_F32) {
                float f = ((const float *)sy_tensor_data(t))[i];
                v = (int32_t)lrintf(roundf(f / in->scale)) + in->zero_point; /* TfLiteRound: half away from zero */
            } else {
                v = ((const int32_t *)sy_tensor_data(t))[i];
                if (v < -128 || v > 127) {
                    fprintf(stderr, "systolic profile: --input %s: value %d at %lld is not int8\n", path, v, (long long)i);
                    rc = 2;
                }
            }
            (*x)[i] = (int8_t)(v < -128 ? -128 : v > 127 ? 127 : v);
        }
    }
    sy_tensor_free(t);
    return rc;
}

static int write_output(const char *path, const sy_tpu1_io *out, const int8_t *y) {
    sy_tensor *t;
    sy_shape s = out->shape[1] == 1 && out->shape[2] == 1 ? sy_shape_of(2, out->shape[0], out->shape[3])
                                                         : sy_shape_of(4, out->shape[0], out->shape[1], out->shape[2], out->shape[3]);
    if (sy_tensor_new(SY_I32, s, &t)) {
        fprintf(stderr, "systolic profile: %s\n", sy_last_error());
        return 1;
    }
    int32_t *d = sy_tensor_data(t);
    for (int64_t i = 0; i < sy_tensor_count(t); i++) d[i] = y[i];
    int rc = 0;
    if (sy_npy_write(path, t)) {
        fprintf(stderr, "systolic profile: --output: %s\n", sy_last_error());
        rc = 1;
    }
    sy_tensor_free(t);
    return rc;
}

int cmd_profile_tpu1(int argc, char **argv) {
    const char *tpu = NULL, *input = NULL, *output = NULL;
    int64_t batch = 0, seed = 0;
    bool json = false;
    enum { T_TPU, T_BATCH, T_IN, T_OUT, T_SEED, T_JSON, T_N };
    flag f[T_N] = {
        {"--tpu", FLAG_STRING, &tpu, "SPEC", "sim:v1, the emulated TPU v1", .set = false},
        {"--batch-size", FLAG_INT, &batch, "N",
         "inputs at once: a .tflite model's program batch (default 1), a paper workload's (default the paper's)",
         .set = false, .min = 1, .max = 65536},
        {"--input", FLAG_STRING, &input, "X.npy", "run on these inputs (float32: quantized as QUANTIZE; or int8 values)",
         .set = false},
        {"--output", FLAG_STRING, &output, "Y.npy", "with --input: write the program's int8 outputs (as int32)", .set = false},
        {"--seed", FLAG_INT, &seed, "N", "a paper workload's random weights (default 0)", .set = false, .min = 0,
         .max = INT64_MAX},
        {"--json", FLAG_BOOL, &json, "", "print the counters as JSON", .set = false},
    };
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            printf("usage: systolic profile MODEL --tpu sim:v1 [flags]\n\n"
                   "Run MODEL on the emulated TPU v1 and print the counters of Table 3 of Jouppi et al. (ISCA 2017): "
                   "array active cycles, useful and unused MACs, weight stall and shift cycles, non-matrix cycles, RAW "
                   "and input stalls, TeraOps/s. MODEL: an int8 .tflite file, a TPU v1 program (systolic compile), or "
                   "one of the paper's workloads: %s.\n\nflags:\n",
                   sy_tpu1_paper_models());
            flags_help(stdout, f, T_N);
            return 0;
        }
    const char *pos[1];
    int n_pos;
    int rc = flags_parse(argc, argv, f, T_N, pos, 1, &n_pos, "profile");
    if (rc) return rc;
    if (n_pos != 1) {
        fprintf(stderr, "systolic profile: which model? (see systolic profile --tpu sim:v1 --help)\n");
        return 2;
    }
    if (output && !input) {
        fprintf(stderr, "systolic profile: --output needs --input\n");
        return 2;
    }
    sy_tpu1_program *p = NULL;
    sy_status st;
    FILE *probe = fopen(pos[0], "rb");
    if (has_suffix(pos[0], ".tflite")) {
        st = sy_tpu1_compile(pos[0], f[T_BATCH].set ? (int32_t)batch : 1, &p, NULL, 0);
    } else if (probe) {
        if (f[T_BATCH].set) {
            fclose(probe);
            fprintf(stderr, "systolic profile: --batch-size: a program's batch is fixed when it is compiled\n");
            return 2;
        }
        st = sy_tpu1_program_read(pos[0], &p);
    } else {
        st = sy_tpu1_paper_model(pos[0], f[T_BATCH].set ? (int32_t)batch : 0, (uint64_t)seed, &p);
        if (st == SY_ERR_NOT_FOUND) {
            fprintf(stderr, "systolic profile: %s: no such file, nor one of the paper's workloads (%s)\n", pos[0],
                    sy_tpu1_paper_models());
            return 2;
        }
    }
    if (probe) fclose(probe);
    if (st) {
        fprintf(stderr, "systolic profile: %s\n", sy_last_error());
        return 1;
    }
    sy_tpu1_io in, out;
    sy_tpu1_program_io(p, &in, &out);
    int8_t *x = NULL, *y = NULL;
    if (input && (rc = read_input(input, &in, &x))) goto done;
    if (x && !(y = malloc((size_t)(out.shape[0] * out.shape[1] * out.shape[2] * out.shape[3])))) {
        fprintf(stderr, "systolic profile: out of memory\n");
        rc = 1;
        goto done;
    }
    sy_tpu1_counters c;
    if (sy_tpu1_run(p, x, y, &c)) {
        fprintf(stderr, "systolic profile: %s\n", sy_last_error());
        rc = 1;
        goto done;
    }
    print_counters(stdout, pos[0], in.shape[0], &c, json);
    if (output) rc = write_output(output, &out, y);
done:
    free(x);
    free(y);
    sy_tpu1_program_free(p);
    return rc;
}
