/*
 * builtin.c - the built-in models `systolic train MODEL` knows: each is a
 * tutorial's architecture, data and hyperparameters, so that naming it
 * alone reproduces the tutorial.
 *
 * fashion_mnist_cnn is the Cloud TPU Keras tutorial on Fashion-MNIST:
 * Conv2D(64, 3x3) -> MaxPooling2D(2x2, strides 2) -> relu -> Flatten ->
 * Dense(10) -> softmax on raw 0-255 pixels; Adam(1e-3),
 * sparse_categorical_crossentropy, sparse_categorical_accuracy; 5 epochs of
 * 60 steps of 1,000 images, validated on the 10,000 test images after the
 * 5th epoch. (On a TPU v2-8: val_sparse_categorical_accuracy 0.8848.)
 */
#include "cli_internal.h"

#include <string.h>

static sy_status add_all(sy_model *m, const sy_layer *layers, int n) {
    for (int i = 0; i < n; i++) {
        sy_status st = sy_model_add(m, &layers[i]);
        if (st) return st;
    }
    return SY_OK;
}

/* Images (N, 28, 28) -> (N, 28, 28, 1), as the tutorial reshapes them. */
static sy_status load_images(sy_status (*load)(sy_data_split *), sy_data_split *d) {
    sy_status st = load(d);
    if (st) return st;
    sy_shape one = sy_shape_of(4, (int64_t)-1, (int64_t)28, (int64_t)28, (int64_t)1);
    if ((st = sy_tensor_reshape(d->x_train, one)) || (st = sy_tensor_reshape(d->x_test, one))) sy_data_split_free(d);
    return st;
}

static sy_status load_fashion_mnist(sy_data_split *d) { return load_images(sy_fashion_mnist_load_data, d); }
static sy_status load_mnist(sy_data_split *d) { return load_images(sy_mnist_load_data, d); }

/* The tutorial's CNN over 28x28x1 images. */
static sy_status build_mnist_cnn(uint64_t seed, sy_model **out) {
    sy_model *m;
    sy_status st = sy_model_new("sequential", &m);
    if (st) return st;
    sy_model_set_seed(m, seed);
    sy_layer layers[6] = {sy_layer_conv2d(64, 3, 3),
                          sy_layer_max_pooling2d(2, 2),
                          sy_layer_activation(SY_ACTIVATION_RELU),
                          sy_layer_flatten(),
                          sy_layer_dense(10),
                          sy_layer_activation(SY_ACTIVATION_SOFTMAX)};
    layers[0].input_shape = sy_shape_of(3, (int64_t)28, (int64_t)28, (int64_t)1);
    layers[1].strides[0] = layers[1].strides[1] = 2;
    if ((st = add_all(m, layers, 6))) {
        sy_model_free(m);
        return st;
    }
    *out = m;
    return SY_OK;
}

static const builtin_model models[] = {
    {"fashion_mnist_cnn", "the Cloud TPU Keras tutorial: a CNN on Fashion-MNIST (raw pixels, Adam)", build_mnist_cnn,
     load_fashion_mnist, "adam", 1e-3f, "sparse_categorical_crossentropy", {"sparse_categorical_accuracy"}, 1, 1000, 5,
     60, 5},
    {"mnist_cnn", "the same CNN on MNIST digits", build_mnist_cnn, load_mnist, "adam", 1e-3f,
     "sparse_categorical_crossentropy", {"sparse_categorical_accuracy"}, 1, 1000, 5, 60, 5},
};

int builtin_count(void) { return (int)(sizeof models / sizeof models[0]); }
const builtin_model *builtin_at(int i) { return i >= 0 && i < builtin_count() ? &models[i] : NULL; }

const builtin_model *builtin_find(const char *name) {
    for (int i = 0; i < builtin_count(); i++)
        if (strcmp(models[i].name, name) == 0) return &models[i];
    return NULL;
}
