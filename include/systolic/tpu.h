/*
 * systolic/tpu.h - the Cloud TPU chips the emulated (sim) devices model.
 *
 * A chip is a table row of published figures (docs/design/tpu-chips.md
 * cites each one): its TensorCores, their matrix units (MXUs) and vector
 * units, its clock, its high-bandwidth memory, the links of its inter-chip
 * interconnect (ICI), and what feeding it from the host costs. The resolver
 * (`--tpu sim:v3-8`) makes replicas of a chip's cores; the sim backend runs
 * the MXU's numerics; the cost model (`systolic profile`) turns a compiled
 * plan into the chip's cycles with these figures.
 *
 * Figures are per TensorCore where the name says `core`, else per chip.
 */
#ifndef SYSTOLIC_TPU_H
#define SYSTOLIC_TPU_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sy_tpu_chip {
    const char *name;          /* "v2", "v3", "v4" */
    int32_t cores;             /* TensorCores per chip */
    int32_t replicas;          /* replicas TPUStrategy makes per chip (v4's megacore: 1) */
    int32_t mxus_per_core;     /* matrix units per TensorCore */
    int32_t mxu_rows, mxu_cols; /* the systolic array: 128 x 128 */
    double clock_hz;           /* TensorCore clock */
    double peak_bf16_flops;    /* per chip: cores * mxus * rows * cols * 2 * clock */
    double vector_flops_core;  /* float32 FLOP/s of one core's vector unit */
    double hbm_bytes;          /* per chip */
    double hbm_bytes_per_s;    /* per chip */
    int32_t ici_links;         /* inter-chip interconnect links per chip */
    double ici_link_bytes_per_s; /* one link, one direction */
    double ici_latency_s;      /* one hop */
    double infeed_bytes_per_s; /* host to chip (PCIe), per chip */
    double host_round_trip_s;  /* one host round trip, which steps_per_execution amortises */
    int32_t max_chips;         /* the largest slice (a full pod) */
} sy_tpu_chip;

/* The chip of a name ("v2", "v3", "v4"; case-insensitive); NULL if unknown. */
const sy_tpu_chip *sy_tpu_chip_find(const char *name);
/* The known chips, for listings and errors: index 0 .. sy_tpu_chip_count()-1. */
int sy_tpu_chip_count(void);
const sy_tpu_chip *sy_tpu_chip_at(int index);

/* issue 16, sim devices: the slices Cloud TPU offers of a chip, named as
 * its accelerator types are, by TensorCores ("v3-32": 32 cores, 16 chips).
 * v2 and v3: the listed types (v2-8, -32, -128, -256, -512; v3-8, -32,
 * ..., -2048); v4: a topology AxBxC of chips, each side at most 4 or a
 * multiple of 4 up to 16, of 4 chips or more (v4-8 is 2x2x1). */
bool sy_tpu_chip_has_slice(const sy_tpu_chip *chip, int32_t cores);
/* The slices, for an error: "8, 32, 128, 256, 512", or v4's rule in words. */
const char *sy_tpu_chip_slices(const sy_tpu_chip *chip);

/* issue 20, pods on paper: how a slice's chips are wired. The chips sit on
 * a grid of `rank` dimensions (v2, v3: 2, a 2-D torus; v4: 3), chips[d]
 * along dimension d, each chip linked to its neighbours along each; a
 * dimension `wrap`s when a link joins its two ends (a torus ring), else it
 * is a line (a mesh). One host's 4 chips (a -8 slice) are rank 1: one ring
 * of 4 chips, driven as issue 16's ring of the host's replicas. */
typedef struct sy_tpu_topology {
    int32_t rank;     /* 1 to 3 */
    int32_t chips[3]; /* chips along each dimension; 1 past rank */
    bool wrap[3];     /* the dimension is a ring (torus), not a line */
} sy_tpu_topology;

/* The topology of the slice of `cores` TensorCores (the name's number:
 * v3-32 is 4x4 chips) as Cloud TPU lays it out (docs/tpu-pods.md cites
 * the shapes): v2 and v3 slices a 2-D grid up to the 16x16 and 32x32 pods,
 * the pod's dimensions wrapped and a smaller slice's not; v4 the most cubic
 * AxBxC (A <= B <= C), wrapped when made of whole 4x4x4 cubes. false (and
 * *out untouched) for a slice the chip does not have (sy_tpu_chip_has_slice). */
bool sy_tpu_slice_topology(const sy_tpu_chip *chip, int32_t cores, sy_tpu_topology *out);

#ifdef __cplusplus
}
#endif

#endif
