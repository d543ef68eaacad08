/*
 * sim_internal.h - what the sim backend's files share: the MXU kernels, fast
 * (mxu.c) and scalar reference (mxu_ref.c), and the reference backend
 * "sim-ref" that runs the latter.
 *
 * The numerics both implement are in docs/design/mxu-numerics.md: operands
 * rounded to bfloat16 (sy_bf16_round, backend_internal.h), exact products,
 * float32 sums over k in chunks of SY_MXU_DEPTH terms, each chunk's terms in
 * pairs (the odd one first) from 0 with subnormals flushed (sy_mxu_acc), the
 * chunks added in order to the float32 accumulator; bias and
 * activation afterwards in float32 (sy_epilogue_f32, the vector unit's
 * work). The reference kernels define the results; the fast ones equal them
 * bit for bit (tests/test_ops.c checks it).
 */
#ifndef SY_SIM_INTERNAL_H
#define SY_SIM_INTERNAL_H

#include "../cpu/cpu_internal.h"

/* The fast kernels (mxu.c). */
extern const sy_kernel sy_sim_matmul, sy_sim_conv2d, sy_sim_conv2d_backprop_input, sy_sim_conv2d_backprop_filter;
/* issue 16 + 21: the conv -> pool fusion's kernels with the MXU's products, and the shapes they take */
extern const sy_kernel sy_sim_conv2d_pool, sy_sim_conv2d_pool_backprop_filter;

#endif
