/*
 * sim_kernels.c - the sim backend's table: the ops the emulated TPU runs on
 * its matrix units (MXU), with the MXU's numerics. Every other op runs as on
 * the cpu backend (backend.c's sim_lookup), which is the chip's vector unit
 * arithmetic: float32.
 */
#include "../backend_internal.h"

static const sy_kernel *const mxu[SY_OP_COUNT] = {
    [SY_OP_COUNT - 1] = NULL, /* the MXU kernels join here */
};

const sy_kernel *sy_sim_kernel(sy_op op, sy_dtype dtype) {
    return (unsigned)op < SY_OP_COUNT && dtype == SY_F32 ? mxu[op] : NULL;
}
