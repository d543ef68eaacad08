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

/* ---- issue 20, pods on paper: the slices' topologies ----------------------------------------- */

/* v2 and v3: each accelerator type's grid of chips, X x Y, as Cloud TPU lays them out: its hosts
 * (TPU_HOST_BOUNDS, pytorch/xla torch_xla/_internal/tpu.py) times a host's 2 x 2 chips
 * (TPU_CHIPS_PER_HOST_BOUNDS 2,2,1); the pod is 16 x 16 (v2) or 32 x 32 (v3), a 2-D torus
 * [cacm]. docs/tpu-pods.md cites both. */
static const struct {
    const char *chip;
    int32_t cores, x, y, pod_side;
} grids[] = {
    {"v2", 8, 2, 2, 16},      {"v2", 32, 4, 4, 16},    {"v2", 128, 8, 8, 16},
    {"v2", 256, 8, 16, 16},   {"v2", 512, 16, 16, 16}, {"v3", 8, 2, 2, 32},
    {"v3", 32, 4, 4, 32},     {"v3", 64, 4, 8, 32},    {"v3", 128, 8, 8, 32},
    {"v3", 256, 8, 16, 32},   {"v3", 512, 16, 16, 32}, {"v3", 1024, 16, 32, 32},
    {"v3", 2048, 32, 32, 32},
};

bool sy_tpu_slice_topology(const sy_tpu_chip *chip, int32_t cores, sy_tpu_topology *out) {
    if (!out || !sy_tpu_chip_has_slice(chip, cores)) return false;
    int32_t n_chips = cores / chip->cores;
    sy_tpu_topology t = {.rank = 1, .chips = {1, 1, 1}, .wrap = {false, false, false}};
    if (n_chips == 4) { /* one host: issue 16's ring of its replicas, one way round */
        t.chips[0] = 4;
        *out = t;
        return true;
    }
    for (size_t i = 0; i < sizeof grids / sizeof grids[0]; i++)
        if (!strcmp(grids[i].chip, chip->name) && grids[i].cores == cores) {
            t.rank = 2;
            t.chips[0] = grids[i].x, t.chips[1] = grids[i].y;
            /* the pod's own dimensions close into rings; a slice narrower than the pod along a
             * dimension is taken as a line there (no source says its wraparound links are kept) */
            t.wrap[0] = grids[i].x == grids[i].pod_side;
            t.wrap[1] = grids[i].y == grids[i].pod_side;
            *out = t;
            return true;
        }
    /* v4: the most cubic AxBxC, A <= B <= C, the default topology of an accelerator type [types-
     * topologies]: the smallest C, then the smallest B; a torus when made of whole 4x4x4 cubes
     * [v4-paper: the optical switches join cubes into tori] */
    for (int32_t c = 1; c <= 16; c++)
        for (int32_t b = 1; b <= c; b++) {
            if (n_chips % (b * c)) continue;
            int32_t a = n_chips / (b * c);
            if (a > b || !v4_side(a) || !v4_side(b) || !v4_side(c)) continue;
            bool cubes = a % 4 == 0 && b % 4 == 0 && c % 4 == 0;
            t.rank = 3;
            t.chips[0] = a, t.chips[1] = b, t.chips[2] = c;
            t.wrap[0] = t.wrap[1] = t.wrap[2] = cubes;
            *out = t;
            return true;
        }
    return false;
}
