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

/* issue 17, losses and metrics: tf.keras 2.15's other built-in losses, the
 * functions of the keras_loss op (sy_graph_loss), each per row of the last
 * axis (docs/design/losses-metrics.md gives each formula). */
typedef enum sy_loss_fn {
    SY_LOSS_MAE = 1,            /* mean |p - t| */
    SY_LOSS_MAPE,               /* 100 mean |(t - p) / max(|t|, eps)| */
    SY_LOSS_MSLE,               /* mean (log1p(max(p, eps)) - log1p(max(t, eps)))^2 */
    SY_LOSS_HUBER,              /* delta */
    SY_LOSS_LOG_COSH,
    SY_LOSS_KLD,                /* sum t log(t / p), both clipped to [eps, 1] */
    SY_LOSS_POISSON,            /* mean p - t log(p + eps) */
    SY_LOSS_HINGE,              /* labels all 0 or 1 are taken as -1 and 1 */
    SY_LOSS_SQUARED_HINGE,
    SY_LOSS_CATEGORICAL_HINGE,
    SY_LOSS_COSINE_SIMILARITY,  /* -cos(t, p) */
    SY_LOSS_BINARY_FOCAL,       /* alpha, gamma, apply_class_balancing, from_logits */
    SY_LOSS_CATEGORICAL_FOCAL   /* alpha, gamma, from_logits */
} sy_loss_fn;

#ifdef __cplusplus
}
#endif
#endif
