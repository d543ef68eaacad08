/*
 * fuzz_tpu1.c - libFuzzer target for the TPU v1 program loader
 * (src/io/tpu1_program.c): the input is read as a program file and, where
 * it is one, disassembled and run on the emulator (src/backend/sim/tpu1.c)
 * -- its timing always, its values too when its buffers are small, so
 * that a hostile program the loader accepts cannot make the emulator read
 * or write out of bounds. Any bytes must give a program or an error, never
 * a crash, a leak or undefined behaviour.
 *
 *   make fuzz
 *   build-fuzz/fuzz_tpu1 CORPUS_DIR tests/fuzz/corpus/fuzz_tpu1
 */
#include "io/io_internal.h"
#include "io/tpu1_program.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sy_tpu1_prog *p = NULL;
    if (io_tpu1_parse(data, size, "fuzz.bin", &p) != SY_OK) {
        SY_ASSERT(p == NULL);
        return 0;
    }
    FILE *null = fopen("/dev/null", "w");
    if (null) {
        io_tpu1_disassemble(p, null);
        fclose(null);
    }
    sy_tpu1_counters c;
    SY_ASSERT(sy_tpu1_execute(p, NULL, NULL, &c) == SY_OK);
    if (p->ub_rows <= 4096 && p->host_bytes <= (1u << 20)) {
        size_t in = (size_t)p->input.n * p->input.h * p->input.w * p->input.c;
        size_t out = (size_t)p->output.n * p->output.h * p->output.w * p->output.c;
        int8_t *x = sy_calloc(in + 1, 1), *y = sy_calloc(out + 1, 1);
        if (x && y) SY_ASSERT(sy_tpu1_execute(p, x, y, &c) == SY_OK);
        sy_free(x);
        sy_free(y);
    }
    sy_tpu1_prog_free(p);
    return 0;
}
