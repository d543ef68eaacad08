/* optim.c - fast optimizer updates (to be written). */
#include "cpu_internal.h"
const sy_kernel sy_cpu_sgd_update = {0}, sy_cpu_adam_update = {0}, sy_cpu_rmsprop_update = {0};
