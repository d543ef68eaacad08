/* pool.c - fast pooling kernels (to be written). */
#include "cpu_internal.h"
const sy_kernel sy_cpu_max_pool2d = {0}, sy_cpu_avg_pool2d = {0}, sy_cpu_max_pool2d_grad = {0}, sy_cpu_avg_pool2d_grad = {0};
