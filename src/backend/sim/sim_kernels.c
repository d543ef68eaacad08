/*
 * sim_kernels.c - the sim backend's table: the ops the emulated TPU runs on
 * its matrix units (MXU), with the MXU's numerics (mxu.c; the numerics are
 * in docs/design/mxu-numerics.md). Every other op runs as on the cpu
 * backend (backend.c's sim_lookup), which is the chip's vector unit
 * arithmetic: float32.
 */
#include "sim_internal.h"

static const sy_kernel *const mxu[SY_OP_COUNT] = {
    [SY_OP_MATMUL] = &sy_sim_matmul,
    [SY_OP_CONV2D] = &sy_sim_conv2d,
    [SY_OP_CONV2D_BACKPROP_INPUT] = &sy_sim_conv2d_backprop_input,
    [SY_OP_CONV2D_BACKPROP_FILTER] = &sy_sim_conv2d_backprop_filter,
    [SY_OP_CONV2D_POOL] = &sy_sim_conv2d_pool, /* issue 21's fusion, the conv the MXU's */
    [SY_OP_CONV2D_POOL_BACKPROP_FILTER] = &sy_sim_conv2d_pool_backprop_filter,
};

const sy_kernel *sy_sim_kernel(sy_op op, sy_dtype dtype) {
    if (dtype != SY_F32) return NULL;
    /* issue 16, MXU recurrent products: the scans' gate products (cpu/rnn.c with the MXU's products) */
    const sy_kernel *rnn = sy_rnn_kernel(op, SY_RNN_MXU);
    if (rnn) return rnn;
    return (unsigned)op < SY_OP_COUNT ? mxu[op] : NULL;
}
