/*
 * tpu1.h - a TPU v1 program in memory (issue 18): the decoded instructions,
 * the tables they refer to and the weight image, as the emulator
 * (tpu1.c) executes them and the file format (src/io/tpu1_program.c)
 * encodes them. Plain C with nothing of core_internal.h beyond types, so
 * that io and lite include it too. docs/design/tpu-v1.md.
 *
 * Addresses are in the machine's units: the unified buffer (UB) in rows of
 * 256 bytes (98,304 rows: 24 MiB; the paper's 3-byte address), the
 * accumulators in rows of 256 int32 (4,096 rows; its 2-byte address),
 * weight memory (DDR3) in 64 KiB tiles of 256 x 256 int8.
 *
 * Data layout the programs share: an activation tensor (N, H, W, C) (a
 * matrix (B, K) is (B, 1, 1, K)) lies in the UB as ceil(C / 256) channel
 * planes of N*H*W rows, plane j holding channels [256j, 256j + 256) of
 * every pixel, one pixel per row. A weight tile holds w[k][n] at byte
 * k * 256 + n: 256 inputs (im2col positions) by 256 output channels.
 */
#ifndef SY_SIM_TPU1_H
#define SY_SIM_TPU1_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "systolic/core.h"
#include "systolic/tpu.h"

#define SY_TPU1_ROW 256                  /* bytes of a UB row, lanes of the array */
#define SY_TPU1_UB_ROWS 98304            /* 24 MiB / 256 */
#define SY_TPU1_ACC_ROWS 4096
#define SY_TPU1_TILE_BYTES 65536
#define SY_TPU1_DDR_TILES 131072         /* 8 GiB / 64 KiB */
#define SY_TPU1_FIFO_TILES 4

enum {
    SY_TPU1_READ_HOST = 1,    /* host memory -> UB rows (20 bytes) */
    SY_TPU1_WRITE_HOST = 2,   /* UB rows -> host memory (20 bytes) */
    SY_TPU1_READ_WEIGHTS = 3, /* DDR3 tiles -> weight FIFO (12 bytes) */
    SY_TPU1_MATMUL = 4,       /* UB rows x the array's tile -> accumulators (12 bytes) */
    SY_TPU1_CONVOLVE = 5,     /* the same, UB rows gathered as im2col rows (12 bytes) */
    SY_TPU1_ACTIVATE = 6,     /* accumulators -> requantize, activation, pool -> UB (16 bytes) */
    SY_TPU1_SET_CONV = 7,     /* select a convolution geometry for Convolve (12 bytes) */
    SY_TPU1_SYNC = 8,         /* wait for every instruction issued before (4 bytes) */
    SY_TPU1_HALT = 9,         /* end of the program (4 bytes) */
    SY_TPU1_N_OPS
};

/* MatrixMultiply / Convolve flags */
#define SY_TPU1_F_ACCUMULATE 0x01 /* add to the accumulators, else overwrite */
#define SY_TPU1_F_LOAD 0x02       /* take the next tile from the weight FIFO first */

typedef struct sy_tpu1_insn {
    uint8_t op, flags;
    uint32_t ub;          /* UB row */
    uint32_t acc;         /* accumulator row */
    uint32_t rows;        /* rows (MatrixMultiply, Convolve, Activate, host transfers), tiles (Read_Weights) */
    uint32_t kblock;      /* Convolve: the tile's 256-block of the im2col row */
    uint32_t host;        /* host transfers: byte offset in host memory */
    uint32_t row_bytes;   /* host transfers: bytes of each UB row moved (1..256) */
    uint32_t host_stride; /* host transfers: bytes between rows in host memory */
    uint32_t tile;        /* Read_Weights: first DDR3 tile */
    uint32_t index;       /* Activate: descriptor; SetConv: geometry */
    uint32_t first;       /* SetConv: first output position */
    uint32_t cblock;      /* Activate: output channel block (256 channels) */
    uint32_t offset;      /* where it is in the file, for messages */
} sy_tpu1_insn;

/* A convolution's geometry (SetConv selects one; Convolve gathers by it):
 * input (n, h, w, c) in planes of n*h*w rows from the Convolve's UB row;
 * output position p = (n*oh + y)*ow + x reads input pixel (y*sh - pt + i,
 * x*sw - pl + j) for tap (i, j); a pixel outside reads in_zp (TFLite's
 * zero padding). Im2col index k = (i*kw + j)*c + channel, as TFLite's
 * OHWI filters. */
typedef struct sy_tpu1_conv {
    int32_t n, h, w, c, kh, kw, sh, sw, pt, pl, oh, ow;
    int32_t in_zp;
} sy_tpu1_conv;

enum { SY_TPU1_POOL_NONE = 0, SY_TPU1_POOL_MAX = 1, SY_TPU1_POOL_AVG = 2 };

/* What Activate does to an accumulator row, channel c = 256*cblock + lane:
 *   v = clamp(out_zp + requantize(acc + bias[c], mult[c], shift[c]), act_min, act_max)
 * (sy_qgemm_i8_ref's arithmetic), then optionally a VALID pool over
 * images of (oh, ow) rows (TFLite's int8 MAX_POOL_2D / AVERAGE_POOL_2D with
 * pool_min/max as its clamp), then optionally TFLite's int8 requantizing
 * activation (RELU / RELU6 as an op of its own):
 *   v = clamp(post_out_zp + requantize(v - post_in_zp, post_mult, post_shift), post_min, post_max) */
typedef struct sy_tpu1_act {
    int32_t channels;
    int32_t *bias, *mult, *shift; /* (channels) */
    int32_t out_zp, act_min, act_max;
    int32_t pool, oh, ow, pkh, pkw, psh, psw, ph, pw, pool_min, pool_max;
    int32_t post, post_in_zp, post_mult, post_shift, post_out_zp, post_min, post_max;
} sy_tpu1_act;

/* A host buffer: the input or the output, int8 (n, h, w, c) at a byte
 * offset of host memory, with the quantization the host applies. */
typedef struct sy_tpu1_tensor {
    int32_t n, h, w, c;
    uint32_t offset;
    float scale;
    int32_t zero_point;
} sy_tpu1_tensor;

typedef struct sy_tpu1_prog {
    int32_t n_insns;
    sy_tpu1_insn *insns;
    int32_t n_convs, n_acts;
    sy_tpu1_conv *convs;
    sy_tpu1_act *acts;
    sy_tpu1_tensor input, output;
    uint32_t host_bytes;     /* host memory: the input, then the output */
    uint32_t ub_rows;        /* rows of the UB the program uses */
    uint32_t n_tiles;        /* the weight image */
    uint8_t *weights;        /* (n_tiles, 256, 256) */
    uint16_t *tile_used;     /* (n_tiles, 2): rows (inputs) and columns (outputs) that hold weights */
} sy_tpu1_prog;

/* Free what a program owns (its arrays) and the program; NULL is a no-op. */
void sy_tpu1_prog_free(sy_tpu1_prog *p);

/* Run a validated program (io_tpu1_validate's checks hold): input (the
 * input tensor's bytes) is copied in, output (the output's) out; either
 * NULL runs the timing alone (the counters do not depend on values, and a
 * 20-million-weight MLP's products take seconds). Fills c. */
sy_status sy_tpu1_execute(const sy_tpu1_prog *p, const int8_t *input, int8_t *output, sy_tpu1_counters *c);

#endif
