/*
 * systolic/backend.h - the compute backends this build has.
 *
 * A backend is a table of kernels, one per op and element type. "cpu" runs
 * fast float32 kernels where it has them (GEMM through oneDNN, fused loops)
 * and the reference kernel otherwise; "ref" runs only the scalar reference
 * kernels, in float32 and float64, which every other backend is tested
 * against. Plans choose one by name (sy_plan_options.backend).
 */
#ifndef SYSTOLIC_BACKEND_H
#define SYSTOLIC_BACKEND_H

#include "systolic/core.h"

#ifdef __cplusplus
extern "C" {
#endif

int sy_backend_count(void);
/* Name ("cpu", "ref") and one-line description of backend `index`. */
const char *sy_backend_name(int index);
const char *sy_backend_description(int index);

/* Number of ops in the registry, and the name of op `index` ("matmul"). */
int sy_op_count(void);
const char *sy_op_name_at(int index);

#ifdef __cplusplus
}
#endif
#endif
