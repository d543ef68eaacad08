/* eltwise.c - fast elementwise kernels (to be written). */
#include "cpu_internal.h"
const sy_kernel sy_cpu_fused_eltwise = {0}, sy_cpu_unary = {0}, sy_cpu_binary = {0}, sy_cpu_bias_add = {0}, sy_cpu_eltwise_grad = {0};
const sy_kernel sy_cpu_reduce_sum = {0}, sy_cpu_reduce_mean = {0};
