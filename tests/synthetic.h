/*
 * synthetic.h - a small separable classification problem the model tests
 * share: 4 features uniform in [-1, 1); the label is the argmax of the
 * first three (3 classes), so a small MLP learns it in a few epochs.
 */
#ifndef SY_TEST_SYNTHETIC_H
#define SY_TEST_SYNTHETIC_H

#include "check.h"
#include "systolic.h"

/* x float32 (n, 4), y int32 (n,); the caller frees both. */
static inline void make_data(int64_t n, sy_tensor **x, sy_tensor **y, uint64_t seed) {
    sy_tensor_new(SY_F32, sy_shape_of(2, n, (int64_t)4), x);
    sy_tensor_new(SY_I32, sy_shape_of(1, n), y);
    float *xd = sy_tensor_data(*x);
    int32_t *yd = sy_tensor_data(*y);
    sy_rng r = sy_rng_new(seed, 0);
    for (int64_t i = 0; i < n; i++) {
        int best = 0;
        for (int j = 0; j < 4; j++) {
            xd[i * 4 + j] = sy_rng_uniform(&r) * 2 - 1;
            if (j < 3 && xd[i * 4 + j] > xd[i * 4 + best]) best = j;
        }
        yd[i] = best;
    }
}

/* Dense(units, relu) [-> Dropout(0.25)] -> Dense(3, softmax) over the 4
 * features, compiled with Adam(0.01), sparse_categorical_crossentropy and
 * 'accuracy'; created in strategy s's scope (NULL: none). */
static inline sy_model *make_mlp(sy_strategy *s, uint64_t seed, int32_t units, bool dropout, int32_t spe) {
    if (s) sy_strategy_scope_enter(s);
    sy_model *m;
    CHECK_OK(sy_model_new("mlp", &m));
    if (s) sy_strategy_scope_exit(s);
    sy_model_set_seed(m, seed);
    sy_layer a = sy_layer_dense(units), drop = sy_layer_dropout(0.25f), b = sy_layer_dense(3);
    a.input_shape = sy_shape_of(1, (int64_t)4);
    a.activation = SY_ACTIVATION_RELU;
    b.activation = SY_ACTIVATION_SOFTMAX;
    CHECK_OK(sy_model_add(m, &a));
    if (dropout) CHECK_OK(sy_model_add(m, &drop));
    CHECK_OK(sy_model_add(m, &b));
    sy_compile_options c = sy_compile_options_default();
    c.optimizer = sy_optimizer_adam(0.01f);
    c.loss = "sparse_categorical_crossentropy";
    const char *metrics[] = {"accuracy"};
    c.metrics = metrics;
    c.n_metrics = 1;
    c.steps_per_execution = spe;
    c.threads = 2;
    CHECK_OK(sy_model_compile(m, &c));
    return m;
}

#endif
