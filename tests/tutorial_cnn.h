/*
 * tutorial_cnn.h - the Fashion-MNIST tutorial's CNN as a user builds it
 * with the Keras API (src/cli/builtin.c, fashion_mnist_cnn), shared by
 * the tests that train it (test_mixed_precision.c, test_fusion.c):
 * Conv2D(64, 3x3) -> MaxPooling2D(2x2, strides 2) -> relu -> Flatten ->
 * Dense(10) -> softmax, Adam(1e-3), sparse categorical crossentropy,
 * sparse categorical accuracy. Include after check.h and systolic.h.
 */
#ifndef SY_TEST_TUTORIAL_CNN_H
#define SY_TEST_TUTORIAL_CNN_H

/* The model under dtype policy `policy`, compiled; NULL (and a failed check) on failure. */
static inline sy_model *tutorial_cnn(const char *policy) {
    sy_model *m = NULL;
    CHECK_OK(sy_keras_set_global_policy(policy));
    CHECK_OK(sy_model_new(NULL, &m));
    sy_layer ls[6] = {sy_layer_conv2d(64, 3, 3),
                      sy_layer_max_pooling2d(2, 2),
                      sy_layer_activation(SY_ACTIVATION_RELU),
                      sy_layer_flatten(),
                      sy_layer_dense(10),
                      sy_layer_activation(SY_ACTIVATION_SOFTMAX)};
    ls[0].input_shape = sy_shape_of(3, 28, 28, 1);
    ls[1].strides[0] = ls[1].strides[1] = 2;
    for (int i = 0; i < 6 && m; i++) CHECK_OK(sy_model_add(m, &ls[i]));
    CHECK_OK(sy_keras_set_global_policy("float32"));
    sy_compile_options co = sy_compile_options_default();
    co.optimizer = sy_optimizer_adam(1e-3f);
    co.loss = "sparse_categorical_crossentropy";
    static const char *metrics[] = {"sparse_categorical_accuracy"};
    co.metrics = metrics;
    co.n_metrics = 1;
    if (m) CHECK_OK(sy_model_compile(m, &co));
    return m;
}

#endif
