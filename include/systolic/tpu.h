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
    bool inference_only;       /* issue 18: the TPU v1 (sim:v1), which runs int8 programs (systolic/lite.h), not steps */
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


/* ---- issue 18, TPU v1 -------------------------------------------------------
 * The first TPU (Jouppi et al., "In-Datacenter Performance Analysis of a
 * Tensor Processing Unit", ISCA 2017; docs/design/tpu-v1.md cites each
 * figure): an int8 inference coprocessor on PCIe, one 256x256 matrix unit
 * driven by CISC instructions. `--tpu sim:v1` is its device; it runs TPU v1
 * programs (systolic/lite.h compiles int8 models to them), not training.
 */
typedef struct sy_tpu1_machine {
    int32_t mxu_rows, mxu_cols;   /* 256 x 256 int8 MACs */
    double clock_hz;              /* 700 MHz */
    double peak_ops;              /* 2 * 65,536 * 700e6 = 92 TeraOps/s (a MAC is 2 ops) */
    int64_t unified_buffer_bytes; /* 24 MiB of activations, 256-byte rows */
    int32_t accumulators;         /* 4,096 rows of 256 int32: 4 MiB */
    int32_t weight_fifo_tiles;    /* 4 tiles of 64 KiB (256 x 256 int8) */
    double ddr_bytes;             /* 8 GiB of DDR3 weight memory */
    double ddr_bytes_per_s;       /* 34 GB/s */
    double pcie_bytes_per_s;      /* host link, PCIe Gen3 x16: 14 GiB/s */
    int32_t shift_cycles;         /* 256: a tile shifted into the array (double-buffered) */
    int32_t drain_cycles;         /* 511: a row's last sum leaves the array after 256 + 255 cycles */
    double ridge_macs_per_byte;   /* peak MACs/s over DDR3 bytes/s: ~1,350 MACs per weight byte */
} sy_tpu1_machine;

/* The TPU v1's figures (one static table row). */
const sy_tpu1_machine *sy_tpu1_machine_get(void);
/* The TPU v1 as the resolver's device (`--tpu sim:v1`, one device): a chip
 * row whose inference_only is set, outside sy_tpu_chip_at's trainable chips. */
const sy_tpu_chip *sy_tpu_chip_v1(void);

/* The counters of the paper's Table 3 for one run of a program. Cycles
 * partition the run: array_active + weight_stall + weight_shift +
 * non_matrix = cycles; raw_stall and input_stall are parts of non_matrix
 * (the matrix unit waiting on an explicit synchronisation after Activate,
 * and on Read_Host_Memory). useful_macs + unused_macs = array_active *
 * 65,536 (unused: the zero padding of partly filled weight tiles). */
typedef struct sy_tpu1_counters {
    double cycles;
    double array_active_cycles, useful_macs, unused_macs;
    double weight_stall_cycles, weight_shift_cycles, non_matrix_cycles;
    double raw_stall_cycles, input_stall_cycles;
    double seconds;    /* cycles / clock */
    double tops;       /* 2 * useful_macs / seconds / 1e12 */
    int64_t instructions, weight_tiles, matrix_rows;
    double weight_bytes, host_bytes; /* read from DDR3; moved over PCIe */
} sy_tpu1_counters;

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
