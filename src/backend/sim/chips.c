/*
 * chips.c - the table of Cloud TPU chips the sim devices emulate.
 *
 * One row per chip generation, from published figures: Jouppi et al.,
 * "A Domain-Specific Supercomputer for Training Deep Neural Networks"
 * (CACM 2020) for v2 and v3, "TPU v4: An Optically Reconfigurable
 * Supercomputer..." (ISCA 2023) for v4, and Google Cloud's system
 * architecture pages; docs/design/tpu-chips.md gives each figure its source.
 * Nothing else in systolic holds a chip figure: the resolver, the HBM check
 * and the cost model all read this table.
 */
#include "../backend_internal.h"
#include "systolic/tpu.h"

#include <strings.h>

#define GIB (1024.0 * 1024.0 * 1024.0)

static const sy_tpu_chip chips[] = {
    {.name = "v2", .cores = 2, .replicas = 2, .mxus_per_core = 1, .mxu_rows = 128, .mxu_cols = 128,
     .clock_hz = 700e6, .peak_bf16_flops = 45.9e12, .vector_flops_core = 2 * 8 * 128 * 700e6,
     .hbm_bytes = 16 * GIB, .hbm_bytes_per_s = 700e9, .ici_links = 4, .ici_link_bytes_per_s = 62e9,
     .ici_latency_s = 1e-6, .infeed_bytes_per_s = 16e9, .host_round_trip_s = 1e-3, .max_chips = 256},
    {.name = "v3", .cores = 2, .replicas = 2, .mxus_per_core = 2, .mxu_rows = 128, .mxu_cols = 128,
     .clock_hz = 940e6, .peak_bf16_flops = 123e12, .vector_flops_core = 2 * 8 * 128 * 940e6,
     .hbm_bytes = 32 * GIB, .hbm_bytes_per_s = 900e9, .ici_links = 4, .ici_link_bytes_per_s = 82e9,
     .ici_latency_s = 1e-6, .infeed_bytes_per_s = 16e9, .host_round_trip_s = 1e-3, .max_chips = 1024},
    {.name = "v4", .cores = 2, .replicas = 1, .mxus_per_core = 4, .mxu_rows = 128, .mxu_cols = 128,
     .clock_hz = 1050e6, .peak_bf16_flops = 275e12, .vector_flops_core = 2 * 8 * 128 * 1050e6,
     .hbm_bytes = 32 * GIB, .hbm_bytes_per_s = 1200e9, .ici_links = 6, .ici_link_bytes_per_s = 50e9,
     .ici_latency_s = 1e-6, .infeed_bytes_per_s = 32e9, .host_round_trip_s = 1e-3, .max_chips = 4096},
};

int sy_tpu_chip_count(void) { return (int)(sizeof chips / sizeof chips[0]); }

const sy_tpu_chip *sy_tpu_chip_at(int index) {
    return index >= 0 && index < sy_tpu_chip_count() ? &chips[index] : NULL;
}

const sy_tpu_chip *sy_tpu_chip_find(const char *name) {
    for (int i = 0; name && i < sy_tpu_chip_count(); i++)
        if (strcasecmp(chips[i].name, name) == 0) return &chips[i];
    return NULL;
}
