/* loss.c - fast softmax and fused loss kernels (to be written). */
#include "cpu_internal.h"
const sy_kernel sy_cpu_softmax = {0}, sy_cpu_log_softmax = {0}, sy_cpu_sparse_softmax_ce = {0}, sy_cpu_sparse_softmax_ce_grad = {0};
