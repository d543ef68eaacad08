/* conv.c - fast conv2d kernels (to be written). */
#include "cpu_internal.h"
const sy_kernel sy_cpu_conv2d = {0}, sy_cpu_conv2d_backprop_input = {0}, sy_cpu_conv2d_backprop_filter = {0};
