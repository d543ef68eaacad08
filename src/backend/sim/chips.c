/*
 * chips.c - the table of Cloud TPU chips the sim devices emulate.
 *
 * One row per chip generation, from published figures: Jouppi et al.,
 * "A Domain-Specific Supercomputer for Training Deep Neural Networks"
 * (CACM 2020) for v2 and v3, "TPU v4: An Optically Reconfigurable
 * Supercomputer..." (ISCA 2023) for v4, and Google Cloud's system
 * architecture pages; docs/design/tpu-chips.md gives each figure its source
 * and says how direct it is (the host round trip is a measurement on a TPU
 * VM under JAX, the ICI hop latency second-hand, v4's vector unit and link
 * bandwidth inferred). Nothing else in systolic holds a chip figure: the
 * resolver, the HBM check and the cost model all read this table.
 *
 * The vector unit: 128 lanes x 8 sublanes x 2 ALUs, 2,048 float operations
 * a cycle per core (Norrie and Patil, Hot Chips 2020, for v2 and v3). The
 * host round trip: 4.1 ms, the gap between two training steps on a TPU VM
 * when the host reads each step's results before launching the next
 * (AI-Hypercomputer/maxtext pull request 390).
 */
#include "../backend_internal.h"
#include "systolic/tpu.h"

#include <string.h>
#include <strings.h>

#define GIB (1024.0 * 1024.0 * 1024.0)

static const sy_tpu_chip chips[] = {
    {.name = "v2", .cores = 2, .replicas = 2, .mxus_per_core = 1, .mxu_rows = 128, .mxu_cols = 128,
     .clock_hz = 700e6, .peak_bf16_flops = 45.9e12, .vector_flops_core = 2 * 8 * 128 * 700e6,
     .hbm_bytes = 16 * GIB, .hbm_bytes_per_s = 700e9, .ici_links = 4, .ici_link_bytes_per_s = 62e9,
     .ici_latency_s = 1e-6, .infeed_bytes_per_s = 16e9, .host_round_trip_s = 4.1e-3, .max_chips = 256},
    {.name = "v3", .cores = 2, .replicas = 2, .mxus_per_core = 2, .mxu_rows = 128, .mxu_cols = 128,
     .clock_hz = 940e6, .peak_bf16_flops = 123e12, .vector_flops_core = 2 * 8 * 128 * 940e6,
     .hbm_bytes = 32 * GIB, .hbm_bytes_per_s = 900e9, .ici_links = 4, .ici_link_bytes_per_s = 82e9,
     .ici_latency_s = 1e-6, .infeed_bytes_per_s = 16e9, .host_round_trip_s = 4.1e-3, .max_chips = 1024},
    {.name = "v4", .cores = 2, .replicas = 1, .mxus_per_core = 4, .mxu_rows = 128, .mxu_cols = 128,
     .clock_hz = 1050e6, .peak_bf16_flops = 275e12, .vector_flops_core = 2 * 8 * 128 * 1050e6,
     .hbm_bytes = 32 * GIB, .hbm_bytes_per_s = 1200e9, .ici_links = 6, .ici_link_bytes_per_s = 50e9,
     .ici_latency_s = 1e-6, .infeed_bytes_per_s = 16e9, .host_round_trip_s = 4.1e-3, .max_chips = 4096},
};

/* issue 18: the TPU v1 (backend/sim/tpu1.c has its full machine), as a device: one chip, one 256x256 int8 matrix
 * unit, 92 TeraOps/s (no bfloat16), 8 GiB of DDR3 at 34 GB/s, PCIe Gen3 x16. Not in chips[]: nothing trains on it. */
static const sy_tpu_chip v1 = {.name = "v1", .cores = 1, .replicas = 1, .mxus_per_core = 1, .mxu_rows = 256,
                               .mxu_cols = 256, .clock_hz = 700e6, .hbm_bytes = 8 * GIB, .hbm_bytes_per_s = 34e9,
                               .infeed_bytes_per_s = 14 * GIB, .max_chips = 1, .inference_only = true};

const sy_tpu_chip *sy_tpu_chip_v1(void) { return &v1; }

int sy_tpu_chip_count(void) { return (int)(sizeof chips / sizeof chips[0]); }

const sy_tpu_chip *sy_tpu_chip_at(int index) {
    return index >= 0 && index < sy_tpu_chip_count() ? &chips[index] : NULL;
}

const sy_tpu_chip *sy_tpu_chip_find(const char *name) {
    for (int i = 0; name && i < sy_tpu_chip_count(); i++)
        if (strcasecmp(chips[i].name, name) == 0) return &chips[i];
    return NULL;
}

/* ---- issue 16, sim devices: the slices of a chip --------------------------------------------- */

/* Cloud TPU's accelerator types for v2 and v3 (docs/design/tpu-chips.md):
 * a single board of 4 chips, then slices of the pod. */
static const struct {
    const char *chip;
    int32_t cores[9];
    const char *words;
} listed[] = {
    {"v2", {8, 32, 128, 256, 512}, "8, 32, 128, 256, 512"},
    {"v3", {8, 32, 64, 128, 256, 512, 1024, 2048}, "8, 32, 64, 128, 256, 512, 1024, 2048"},
};

/* A side of a v4 topology: 1 to 4, or 8, 12 or 16 (the pod is 16x16x16). */
static bool v4_side(int32_t n) { return (n >= 1 && n <= 4) || n == 8 || n == 12 || n == 16; }

bool sy_tpu_chip_has_slice(const sy_tpu_chip *chip, int32_t cores) {
    if (!chip || cores < 1) return false;
    for (size_t i = 0; i < sizeof listed / sizeof listed[0]; i++)
        if (!strcmp(listed[i].chip, chip->name)) {
            for (int k = 0; k < 9 && listed[i].cores[k]; k++)
                if (listed[i].cores[k] == cores) return true;
            return false;
        }
    /* v4: AxBxC chips, A <= B <= C, each side allowed, 4 chips at least */
    if (cores % chip->cores) return false;
    int32_t n_chips = cores / chip->cores;
    if (n_chips < 4 || n_chips > chip->max_chips) return false;
    for (int32_t a = 1; a <= 16; a++)
        for (int32_t b = a; b <= 16; b++)
            if (v4_side(a) && v4_side(b) && n_chips % (a * b) == 0 && n_chips / (a * b) >= b &&
                v4_side(n_chips / (a * b)))
                return true;
    return false;
}

const char *sy_tpu_chip_slices(const sy_tpu_chip *chip) {
    for (size_t i = 0; chip && i < sizeof listed / sizeof listed[0]; i++)
        if (!strcmp(listed[i].chip, chip->name)) return listed[i].words;
    return "8 and up, twice the chips of a topology AxBxC whose sides are each 1 to 4, 8, 12 or 16 "
           "(v4-8 is 2x2x1, v4-32 2x2x4, v4-8192 the pod, 16x16x16)";
}
