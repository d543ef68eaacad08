/*
 * cpu_kernels.c - the cpu backend's table: which ops have a fast float32
 * kernel (everything else, and every float64 op, runs its ref kernel); the
 * ones with a bf16_io serve bfloat16 storage too (issue 16); the int8 products
 * run qconv.c's kernels (issue 18).
 */
#include "cpu_internal.h"

static const sy_kernel *const fast[SY_OP_COUNT] = {
    [SY_OP_MATMUL] = &sy_cpu_matmul,
    [SY_OP_CONV2D] = &sy_cpu_conv2d,
    [SY_OP_CONV2D_BACKPROP_INPUT] = &sy_cpu_conv2d_backprop_input,
    [SY_OP_CONV2D_BACKPROP_FILTER] = &sy_cpu_conv2d_backprop_filter,
    [SY_OP_MAX_POOL2D] = &sy_cpu_max_pool2d,
    [SY_OP_AVG_POOL2D] = &sy_cpu_avg_pool2d,
    [SY_OP_MAX_POOL2D_GRAD] = &sy_cpu_max_pool2d_grad,
    [SY_OP_AVG_POOL2D_GRAD] = &sy_cpu_avg_pool2d_grad,
    [SY_OP_FUSED_ELTWISE] = &sy_cpu_fused_eltwise,
    [SY_OP_NEG] = &sy_cpu_unary,
    [SY_OP_RELU] = &sy_cpu_unary,
    [SY_OP_SIGMOID] = &sy_cpu_unary,
    [SY_OP_TANH] = &sy_cpu_unary,
    [SY_OP_EXP] = &sy_cpu_unary,
    [SY_OP_LOG] = &sy_cpu_unary,
    [SY_OP_ACT] = &sy_cpu_unary, /* issue 15, activations */
    [SY_OP_ACT_GRAD] = &sy_cpu_eltwise_grad,
    [SY_OP_ADD] = &sy_cpu_binary,
    [SY_OP_SUB] = &sy_cpu_binary,
    [SY_OP_MUL] = &sy_cpu_binary,
    [SY_OP_DIV] = &sy_cpu_binary,
    [SY_OP_BIAS_ADD] = &sy_cpu_bias_add,
    [SY_OP_RELU_GRAD] = &sy_cpu_eltwise_grad,
    [SY_OP_SIGMOID_GRAD] = &sy_cpu_eltwise_grad,
    [SY_OP_TANH_GRAD] = &sy_cpu_eltwise_grad,
    [SY_OP_REDUCE_SUM] = &sy_cpu_reduce_sum,
    [SY_OP_REDUCE_MEAN] = &sy_cpu_reduce_mean,
    [SY_OP_SOFTMAX] = &sy_cpu_softmax,
    [SY_OP_LOG_SOFTMAX] = &sy_cpu_log_softmax,
    [SY_OP_SPARSE_SOFTMAX_CE] = &sy_cpu_sparse_softmax_ce,
    [SY_OP_SPARSE_SOFTMAX_CE_GRAD] = &sy_cpu_sparse_softmax_ce_grad,
    [SY_OP_SGD_UPDATE] = &sy_cpu_sgd_update,
    [SY_OP_ADAM_UPDATE] = &sy_cpu_adam_update,
    [SY_OP_RMSPROP_UPDATE] = &sy_cpu_rmsprop_update,
    [SY_OP_SLICE] = &sy_cpu_slice,
    [SY_OP_SLICE_GRAD] = &sy_cpu_slice_grad,
    [SY_OP_LSTM_SCAN] = &sy_cpu_lstm_scan,
    [SY_OP_LSTM_SCAN_GRAD] = &sy_cpu_lstm_scan_grad,
    [SY_OP_LSTM_SCAN_WGRAD] = &sy_cpu_lstm_scan_wgrad,
    [SY_OP_GRU_SCAN] = &sy_cpu_gru_scan,
    [SY_OP_GRU_SCAN_GRAD] = &sy_cpu_gru_scan_grad,
    /* the convolution family (issue 15) */
    [SY_OP_PAD] = &sy_cpu_slice_grad,
    /* issue 15 (broadcast.c): reduce_mean's gradients (BatchNormalization, global pooling) */
    [SY_OP_BROADCAST_TO] = &sy_cpu_broadcast_to,
    /* issue 16 (bf16.c): the cast between float32 and bfloat16 buffers (and a plain copy), and
       dropout */
    [SY_OP_COPY] = &sy_cpu_copy,
    [SY_OP_DROPOUT] = &sy_cpu_dropout,
    /* issue 21 (conv.c): conv -> pool fused, and its filter gradient */
    [SY_OP_CONV2D_POOL] = &sy_cpu_conv2d_pool,
    [SY_OP_CONV2D_POOL_BACKPROP_FILTER] = &sy_cpu_conv2d_pool_backprop_filter,
};

const sy_kernel *sy_cpu_kernel(sy_op op, sy_dtype dtype) {
    if ((unsigned)op >= SY_OP_COUNT) return NULL;
    /* issue 18: the int8 products, pools and ADD over the fast kernels (qconv.c, qconvpool.c); the other int8 ops run qref.c's */
    if (op == SY_OP_QCONV2D) return &sy_cpu_qconv2d;
    if (op == SY_OP_QFULLY_CONNECTED) return &sy_cpu_qfully_connected;
    if (op == SY_OP_QMAX_POOL2D) return &sy_cpu_qmax_pool2d;
    if (op == SY_OP_QAVG_POOL2D) return &sy_cpu_qavg_pool2d;
    if (op == SY_OP_QADD) return &sy_cpu_qadd;
    if (op == SY_OP_QCONV2D_POOL) return &sy_cpu_qconv2d_pool;
    if (op == SY_OP_QUANTIZE) return &sy_cpu_quantize;
    if (op == SY_OP_HLSTM) return &sy_cpu_hlstm; /* issue 18: qhybrid.c's LSTM, a sequence per thread */
    /* issue 16, bfloat16 storage: the kernels that also read and write 2-byte bfloat16 activations (their
     * bf16_io says which, per step); the layout ops without one here take the ref backend's, which move
     * elements of any size (backend.c's lookup). An op with neither runs its float32 kernel, the plan
     * converting its bfloat16 inputs. */
    if (dtype == SY_BF16) return fast[op] && fast[op]->bf16_io ? fast[op] : NULL;
    if (dtype != SY_F32 || !fast[op] || !fast[op]->run) return NULL;
    return fast[op];
}
