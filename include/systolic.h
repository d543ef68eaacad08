/*
 * systolic.h - everything: train and run neural networks the way TensorFlow
 * does on Cloud TPUs, in C.
 *
 * A complete program: fit y = 2x - 1 with one Dense unit and SGD.
 *
 *   #include <systolic.h>
 *   #include <stdio.h>
 *
 *   int main(void) {
 *       sy_graph *g;
 *       sy_graph_new(&g);
 *       sy_node x = sy_graph_input(g, "x", SY_F32, sy_shape_of(2, (int64_t)4, (int64_t)1));
 *       sy_node y = sy_graph_input(g, "y", SY_F32, sy_shape_of(2, (int64_t)4, (int64_t)1));
 *       sy_node w = sy_graph_param(g, "w", SY_F32, sy_shape_of(2, (int64_t)1, (int64_t)1), sy_init_glorot_uniform(1));
 *       sy_node b = sy_graph_param(g, "b", SY_F32, sy_shape_of(1, (int64_t)1), sy_init_zeros());
 *       sy_node pred = sy_graph_bias_add(g, sy_graph_matmul(g, x, w, false, false), b);
 *       sy_node loss = sy_graph_reduce_mean(g, sy_graph_mean_squared_error(g, pred, y), NULL, 0, false);
 *       if (sy_graph_status(g)) { fprintf(stderr, "%s\n", sy_graph_error(g)); return 1; }
 *
 *       sy_plan_options o = sy_plan_options_default();
 *       o.loss = loss;
 *       o.optimizer = sy_optimizer_sgd(0.1f, 0.0f, false);
 *       sy_plan *train;
 *       if (sy_plan_compile(g, &o, &train)) { fprintf(stderr, "%s\n", sy_last_error()); return 1; }
 *       float xs[4] = {0, 1, 2, 3}, ys[4] = {-1, 1, 3, 5};
 *       for (int step = 0; step < 200; step++) {
 *           float *xin = sy_plan_input(train, x), *yin = sy_plan_input(train, y);
 *           for (int i = 0; i < 4; i++) { xin[i] = xs[i]; yin[i] = ys[i]; }
 *           sy_plan_run(train);
 *       }
 *       printf("loss %g\n", *(const float *)sy_plan_output(train, loss));
 *       sy_plan_free(train);
 *       sy_graph_free(g);
 *       return 0;
 *   }
 *
 * Modules, bottom to top (each header documents its own):
 *   systolic/core.h      status codes, errors, allocator, shapes, thread pool, RNG
 *   systolic/backend.h   the compute backends and the op registry
 *   systolic/graph.h     building graphs of ops with static shapes
 *   systolic/compiler.h  compiling graphs into plans; variables; optimizers
 *   systolic/distribute.h the cluster resolver and the replica strategy
 *   systolic/data.h      datasets (Keras's load_data()) and file readers
 *   systolic/keras.h     Keras-style models: layers, compile, fit, evaluate, predict
 *   systolic/estimator.h TPUEstimator: model_fn, input_fn(params), RunConfig, train, evaluate, predict
 */
#ifndef SYSTOLIC_H
#define SYSTOLIC_H

#include "systolic/core.h"
#include "systolic/backend.h"
#include "systolic/graph.h"
#include "systolic/compiler.h"
#include "systolic/data.h"
#include "systolic/distribute.h"
#include "systolic/keras.h"
#include "systolic/estimator.h"    /* issue 19: TPUEstimator */
#include "systolic/applications.h" /* issue 15: keras.applications */
#include "systolic/tpu.h"          /* issue 16: the emulated TPU chips */
#include "systolic/profile.h"      /* issue 16, cost model: the emulated TPU's clock */
#include "systolic/lite.h"         /* issue 18: int8 TFLite models, quantization, TPU v1 */

#endif
