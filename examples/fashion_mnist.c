/*
 * fashion_mnist.c - the Cloud TPU Keras tutorial on Fashion-MNIST, in C.
 *
 * The same model, data and hyperparameters as the tutorial (and as
 * `systolic train fashion_mnist_cnn`): raw 0-255 pixels, Conv2D(64, 3x3),
 * MaxPooling2D(2x2), relu, Flatten, Dense(10), softmax; Adam(1e-3);
 * sparse_categorical_crossentropy; 5 epochs of 60 steps of 1,000 images,
 * validated on the test images after the 5th.
 *
 *   build/examples/fashion_mnist [EPOCHS [STEPS_PER_EPOCH]]
 *
 * Only the public API (systolic.h) is used.
 */
#include <systolic.h>

#include <stdio.h>
#include <stdlib.h>

static int check(sy_status st, const char *what) {
    if (st) fprintf(stderr, "fashion_mnist: %s: %s\n", what, sy_last_error());
    return st != SY_OK;
}

int main(int argc, char **argv) {
    int epochs = argc > 1 ? atoi(argv[1]) : 5;
    int steps = argc > 2 ? atoi(argv[2]) : 60;

    /* (x_train, y_train), (x_test, y_test) = fashion_mnist.load_data() */
    sy_data_split d;
    if (check(sy_fashion_mnist_load_data(&d), "loading the data")) return 1;
    /* x_train = np.expand_dims(x_train, -1): (60000, 28, 28, 1) */
    sy_shape nhwc = sy_shape_of(4, (int64_t)-1, (int64_t)28, (int64_t)28, (int64_t)1);
    sy_tensor_reshape(d.x_train, nhwc);
    sy_tensor_reshape(d.x_test, nhwc);

    sy_model *model;
    sy_model_new("sequential", &model);
    sy_layer layers[] = {
        sy_layer_conv2d(64, 3, 3),
        sy_layer_max_pooling2d(2, 2),
        sy_layer_activation(SY_ACTIVATION_RELU),
        sy_layer_flatten(),
        sy_layer_dense(10),
        sy_layer_activation(SY_ACTIVATION_SOFTMAX),
    };
    layers[0].input_shape = sy_shape_of(3, (int64_t)28, (int64_t)28, (int64_t)1);
    for (size_t i = 0; i < sizeof layers / sizeof layers[0]; i++)
        if (check(sy_model_add(model, &layers[i]), "building the model")) return 1;
    sy_model_summary(model, stdout);

    sy_compile_options c = sy_compile_options_default();
    c.optimizer = sy_optimizer_adam(1e-3f);
    c.loss = "sparse_categorical_crossentropy";
    const char *metrics[] = {"sparse_categorical_accuracy"};
    c.metrics = metrics;
    c.n_metrics = 1;
    if (check(sy_model_compile(model, &c), "compile")) return 1;

    sy_fit_options f = sy_fit_options_default();
    f.batch_size = 1000;
    f.epochs = epochs;
    f.steps_per_epoch = steps;
    f.x_val = d.x_test;
    f.y_val = d.y_test;
    f.validation_freq = epochs;
    sy_history *history;
    if (check(sy_model_fit(model, d.x_train, d.y_train, &f, &history), "fit")) return 1;
    const sy_logs *last = sy_history_logs(history, sy_history_epochs(history) - 1);
    printf("val_sparse_categorical_accuracy: %.4f\n", last ? sy_logs_get(last, "val_sparse_categorical_accuracy") : 0.0);

    sy_history_free(history);
    sy_model_free(model);
    sy_data_split_free(&d);
    return 0;
}
