/*
 * registry.c - the op registry: for each op of ops.def, its shape inference,
 * its gradient rule and the flags the compiler plans by. One row per op; the
 * rules themselves live in ops_math.c, ops_layout.c and ops_nn.c, the costs
 * (issue 16) in ops_cost.c.
 */
#include "graph_internal.h"

/* issue 16, cost model: each row also takes the op's cost function (ops_cost.c) */
#define ROW(id, grad_fn, op_flags, e)                                                                                  \
    [SY_OP_##id] = {.infer = infer_##id, .grad = grad_fn, .flags = op_flags, .eop = e, .cost = cost_##id}
#define ELT(id, eop) ROW(id, grad_##id, SY_OPF_ELTWISE, eop)
#define DIFF(id) ROW(id, grad_##id, 0, 0)
#define GRADOP(id) ROW(id, NULL, SY_OPF_GRAD_OP, 0)

static const sy_op_def defs[SY_OP_COUNT] = {
    ROW(INPUT, NULL, SY_OPF_LEAF, 0),
    ROW(PARAM, NULL, SY_OPF_LEAF, 0),
    ROW(FILL, NULL, SY_OPF_LEAF, 0),
    DIFF(MATMUL),
    ROW(BIAS_ADD, grad_BIAS_ADD, SY_OPF_ELTWISE, SY_E_ADD),
    ELT(ADD, SY_E_ADD),
    ELT(SUB, SY_E_SUB),
    ELT(MUL, SY_E_MUL),
    ELT(DIV, SY_E_DIV),
    ELT(NEG, SY_E_NEG),
    ELT(RELU, SY_E_RELU),
    ELT(SIGMOID, SY_E_SIGMOID),
    ELT(TANH, SY_E_TANH),
    ELT(EXP, SY_E_EXP),
    ELT(LOG, SY_E_LOG),
    DIFF(COPY),
    ROW(ACT, grad_ACT, SY_OPF_ELTWISE, SY_E_ACT), /* issue 15, activations */
    DIFF(SOFTMAX),
    DIFF(LOG_SOFTMAX),
    ROW(RESHAPE, grad_RESHAPE, SY_OPF_ALIAS, 0),
    DIFF(TRANSPOSE),
    DIFF(CONCAT),
    DIFF(SLICE),
    DIFF(BROADCAST_TO),
    DIFF(CONV2D),
    DIFF(MAX_POOL2D),
    DIFF(AVG_POOL2D),
    DIFF(DROPOUT),
    DIFF(REDUCE_SUM),
    DIFF(REDUCE_MEAN),
    DIFF(REVERSE),
    DIFF(GATHER),
    DIFF(LSTM_SCAN),
    DIFF(GRU_SCAN),
    DIFF(SPARSE_SOFTMAX_CE),
    DIFF(SOFTMAX_CE),
    DIFF(SIGMOID_CE),
    DIFF(SPARSE_CATEGORICAL_CE),
    DIFF(CATEGORICAL_CE),
    DIFF(BINARY_CE),
    DIFF(MSE),
    ROW(RELU_GRAD, NULL, SY_OPF_GRAD_OP | SY_OPF_ELTWISE, SY_E_RELU_GRAD),
    ROW(SIGMOID_GRAD, NULL, SY_OPF_GRAD_OP | SY_OPF_ELTWISE, SY_E_SIGMOID_GRAD),
    ROW(TANH_GRAD, NULL, SY_OPF_GRAD_OP | SY_OPF_ELTWISE, SY_E_TANH_GRAD),
    GRADOP(SOFTMAX_GRAD),
    GRADOP(LOG_SOFTMAX_GRAD),
    ROW(ACT_GRAD, NULL, SY_OPF_GRAD_OP | SY_OPF_ELTWISE, SY_E_ACT_GRAD), /* issue 15, activations */
    GRADOP(SLICE_GRAD),
    DIFF(CONV2D_BACKPROP_INPUT), /* also conv2d_transpose, so differentiable */
    GRADOP(CONV2D_BACKPROP_FILTER),
    GRADOP(MAX_POOL2D_GRAD),
    GRADOP(AVG_POOL2D_GRAD),
    GRADOP(GATHER_GRAD),
    GRADOP(LSTM_SCAN_GRAD),
    GRADOP(LSTM_SCAN_WGRAD),
    GRADOP(GRU_SCAN_GRAD),
    GRADOP(SPARSE_SOFTMAX_CE_GRAD),
    GRADOP(SOFTMAX_CE_GRAD),
    GRADOP(SIGMOID_CE_GRAD),
    GRADOP(SPARSE_CATEGORICAL_CE_GRAD),
    GRADOP(CATEGORICAL_CE_GRAD),
    GRADOP(BINARY_CE_GRAD),
    GRADOP(MSE_GRAD),
    ROW(SGD_UPDATE, NULL, SY_OPF_UPDATE, 0),
    ROW(ADAM_UPDATE, NULL, SY_OPF_UPDATE, 0),
    ROW(RMSPROP_UPDATE, NULL, SY_OPF_UPDATE, 0),
    /* issue 17, optimizers */
    ROW(ADADELTA_UPDATE, NULL, SY_OPF_UPDATE, 0),
    ROW(ADAGRAD_UPDATE, NULL, SY_OPF_UPDATE, 0),
    ROW(ADAMAX_UPDATE, NULL, SY_OPF_UPDATE, 0),
    ROW(ADAFACTOR_UPDATE, NULL, SY_OPF_UPDATE, 0),
    ROW(NADAM_UPDATE, NULL, SY_OPF_UPDATE, 0),
    ROW(FTRL_UPDATE, NULL, SY_OPF_UPDATE, 0),
    ROW(LION_UPDATE, NULL, SY_OPF_UPDATE, 0),
    /* the convolution family (issue 15) */
    DIFF(PAD),
    DIFF(UPSAMPLE2D),
    GRADOP(UPSAMPLE2D_GRAD),
    DIFF(REDUCE_MAX),
    GRADOP(REDUCE_MAX_GRAD),
    /* normalization layers */
    DIFF(RSQRT),
    ROW(MOVING_AVERAGE, NULL, SY_OPF_UPDATE, 0),
    /* issue 17, losses and metrics */
    DIFF(KERAS_LOSS),
    GRADOP(KERAS_LOSS_GRAD),
    ROW(FUSED_ELTWISE, NULL, SY_OPF_GRAD_OP, 0),
    /* issue 21, conv -> pool fusion (ops_fused.c) */
    ROW(CONV2D_POOL, NULL, SY_OPF_GRAD_OP, 0),
    ROW(POOL_ARGMAX, NULL, SY_OPF_GRAD_OP | SY_OPF_SIDE, 0),
    ROW(CONV2D_POOL_BACKPROP_FILTER, NULL, SY_OPF_GRAD_OP, 0),
    ROW(CONV2D_POOL_BIAS_GRAD, NULL, SY_OPF_GRAD_OP | SY_OPF_SIDE, 0),
    /* issue 18, int8 inference (ops_quant.c): no gradients */
    ROW(CONSTANT, NULL, SY_OPF_LEAF, 0),
    ROW(QUANTIZE, NULL, 0, 0),
    ROW(DEQUANTIZE, NULL, 0, 0),
    ROW(QCONV2D, NULL, 0, 0),
    ROW(QFULLY_CONNECTED, NULL, 0, 0),
    ROW(QADD, NULL, 0, 0),
    ROW(QMAX_POOL2D, NULL, 0, 0),
    ROW(QAVG_POOL2D, NULL, 0, 0),
    ROW(QMEAN, NULL, 0, 0),
    ROW(QSOFTMAX, NULL, 0, 0),
    ROW(QPAD, NULL, 0, 0),
    ROW(QCONV2D_POOL, NULL, 0, 0), /* made by fusion (compiler/fusion.c) */
    /* issue 18, dynamic-range quantization: the hybrid ops */
    ROW(HFULLY_CONNECTED, NULL, 0, 0),
    ROW(HLSTM, NULL, 0, 0),
    ROW(MATMUL_BIAS_GRAD, NULL, SY_OPF_GRAD_OP | SY_OPF_SIDE, 0), /* made by fusion (compiler/fusion.c) */
};

const sy_op_def *sy_op_def_of(sy_op op) {
    SY_ASSERT((unsigned)op < SY_OP_COUNT && defs[op].infer);
    return &defs[op];
}
