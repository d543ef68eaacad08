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
 *
 * imdb_lstm is the classic Keras IMDB sentiment tutorial: the reviews as
 * word indices over the 15,000 most frequent words (num_words 15000,
 * index_from 3), padded or cut to their last 250 words (pad_sequences'
 * 'pre') -> Embedding(15000, 32, input_length=250) -> LSTM(100) ->
 * Dense(1, sigmoid); Adam(1e-3), binary_crossentropy, accuracy (binary, as
 * Keras resolves it for one output unit); batch 64, 20 epochs of one pass
 * over the 25,000 training reviews, validated on the 25,000 test reviews
 * after every epoch.
 *
 * vgg16 and resnet50 (issue 15) are keras.applications' VGG16 and ResNet50
 * (weights=None) built by the C constructors (systolic/applications.h) for
 * CIFAR-10-shaped data: input_shape (32, 32, 3), classes 10, the softmax
 * top; CIFAR-10 scaled to [0, 1] (x / 255, float32); SGD(0.01),
 * sparse_categorical_crossentropy, sparse_categorical_accuracy; batch 64,
 * 10 epochs of one pass, validated on the test images after each.
 */
#include "cli_internal.h"

#define IMDB_WORDS 15000 /* the tutorial's vocabulary */
#define IMDB_LEN 250     /* and review length */

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

sy_status builtin_imdb_data(int32_t num_words, int64_t maxlen, sy_data_split *d) {
    memset(d, 0, sizeof *d);
    sy_imdb_options o = sy_imdb_options_default();
    o.num_words = num_words;
    sy_imdb_split s;
    sy_status st = sy_imdb_load_data(&o, &s);
    if (st) return st;
    sy_pad_options p = sy_pad_options_default();
    p.maxlen = maxlen;
    if ((st = sy_pad_sequences(s.x_train, &p, &d->x_train)) || (st = sy_pad_sequences(s.x_test, &p, &d->x_test))) {
        sy_data_split_free(d);
    } else {
        d->y_train = s.y_train;
        d->y_test = s.y_test;
        s.y_train = s.y_test = NULL;
    }
    sy_imdb_split_free(&s);
    return st;
}

/* The IMDB reviews as the tutorial prepares them: word indices below
 * 15,000, each review padded or cut to 250 (int32 (25000, 250)); labels
 * uint8 (25000,). */
static sy_status load_imdb(sy_data_split *d) { return builtin_imdb_data(IMDB_WORDS, IMDB_LEN, d); }

/* A Sequential model of `n` layers, seeded. */
static sy_status build_sequential(uint64_t seed, const sy_layer *layers, int n, sy_model **out) {
    sy_model *m;
    sy_status st = sy_model_new("sequential", &m);
    if (st) return st;
    sy_model_set_seed(m, seed);
    if ((st = add_all(m, layers, n))) {
        sy_model_free(m);
        return st;
    }
    *out = m;
    return SY_OK;
}

/* The tutorial's CNN over 28x28x1 images. */
static sy_status build_mnist_cnn(uint64_t seed, sy_model **out) {
    sy_layer layers[6] = {sy_layer_conv2d(64, 3, 3),
                          sy_layer_max_pooling2d(2, 2),
                          sy_layer_activation(SY_ACTIVATION_RELU),
                          sy_layer_flatten(),
                          sy_layer_dense(10),
                          sy_layer_activation(SY_ACTIVATION_SOFTMAX)};
    layers[0].input_shape = sy_shape_of(3, (int64_t)28, (int64_t)28, (int64_t)1);
    layers[1].strides[0] = layers[1].strides[1] = 2;
    return build_sequential(seed, layers, 6, out);
}

/* Embedding(15000, 32, input_length=250) -> LSTM(100) -> Dense(1, sigmoid),
 * every initializer Keras's default. */
static sy_status build_imdb_lstm(uint64_t seed, sy_model **out) {
    sy_layer layers[3] = {sy_layer_embedding(IMDB_WORDS, 32), sy_layer_lstm(100), sy_layer_dense(1)};
    layers[0].input_length = IMDB_LEN;
    layers[2].activation = SY_ACTIVATION_SIGMOID;
    return build_sequential(seed, layers, 3, out);
}

/* ---- issue 15, keras.applications ---------------------------------------------------- */

/* CIFAR-10 with the pixels as float32 / 255. */
static sy_status load_cifar10_scaled(sy_data_split *d) {
    sy_status st = sy_cifar10_load_data(d);
    if (st) return st;
    sy_tensor **xs[2] = {&d->x_train, &d->x_test};
    for (int i = 0; i < 2 && !st; i++) {
        sy_tensor *f;
        if ((st = sy_tensor_new(SY_F32, sy_tensor_shape(*xs[i]), &f))) break;
        const uint8_t *u = sy_tensor_data(*xs[i]);
        float *v = sy_tensor_data(f);
        for (size_t k = 0, n = sy_tensor_bytes(*xs[i]); k < n; k++) v[k] = (float)u[k] / 255.0f;
        sy_tensor_free(*xs[i]);
        *xs[i] = f;
    }
    if (st) sy_data_split_free(d);
    return st;
}

/* keras.applications' model for 32x32x3 images of 10 classes. */
static sy_status build_application(sy_status (*make)(const sy_applications_options *, sy_model **), uint64_t seed,
                                   sy_model **out) {
    sy_applications_options o = sy_applications_options_default();
    o.input_shape = sy_shape_of(3, (int64_t)32, (int64_t)32, (int64_t)3);
    o.classes = 10;
    o.seed = seed;
    return make(&o, out);
}

static sy_status build_vgg16(uint64_t seed, sy_model **out) { return build_application(sy_applications_vgg16, seed, out); }
static sy_status build_resnet50(uint64_t seed, sy_model **out) {
    return build_application(sy_applications_resnet50, seed, out);
}

static const builtin_model models[] = {
    {"fashion_mnist_cnn", "the Cloud TPU Keras tutorial: a CNN on Fashion-MNIST (raw pixels, Adam)", build_mnist_cnn,
     load_fashion_mnist, "adam", 1e-3f, "sparse_categorical_crossentropy", {"sparse_categorical_accuracy"}, 1, 1000, 5,
     60, 5, {3, {28, 28, 1}}, 0, 0},
    {"mnist_cnn", "the same CNN on MNIST digits", build_mnist_cnn, load_mnist, "adam", 1e-3f,
     "sparse_categorical_crossentropy", {"sparse_categorical_accuracy"}, 1, 1000, 5, 60, 5, {3, {28, 28, 1}}, 0, 0},
    {"imdb_lstm", "the Keras IMDB tutorial: an LSTM over word embeddings classifies movie reviews", build_imdb_lstm,
     load_imdb, "adam", 1e-3f, "binary_crossentropy", {"accuracy"}, 1, 64, 20, 0, 1, {1, {IMDB_LEN}}, IMDB_WORDS, IMDB_LEN},
    /* issue 15, keras.applications */
    {"vgg16", "keras.applications' VGG16 (weights=None) for 32x32 images, 10 classes, on CIFAR-10 / 255 (SGD)",
     build_vgg16, load_cifar10_scaled, "sgd", 0.01f, "sparse_categorical_crossentropy",
     {"sparse_categorical_accuracy"}, 1, 64, 10, 0, 1, {3, {32, 32, 3}}, 0, 0},
    {"resnet50", "keras.applications' ResNet50 (weights=None) for 32x32 images, 10 classes, on CIFAR-10 / 255 (SGD)",
     build_resnet50, load_cifar10_scaled, "sgd", 0.01f, "sparse_categorical_crossentropy",
     {"sparse_categorical_accuracy"}, 1, 64, 10, 0, 1, {3, {32, 32, 3}}, 0, 0},
};

int builtin_count(void) { return (int)(sizeof models / sizeof models[0]); }
const builtin_model *builtin_at(int i) { return i >= 0 && i < builtin_count() ? &models[i] : NULL; }

sy_status builtin_head(const sy_tensor *x, int64_t n, sy_tensor **out) {
    sy_shape s = sy_tensor_shape(x);
    size_t row = sy_tensor_bytes(x) / (size_t)s.dims[0];
    s.dims[0] = n;
    sy_status st = sy_tensor_new(sy_tensor_dtype(x), s, out);
    if (!st) memcpy(sy_tensor_data(*out), sy_tensor_data(x), (size_t)n * row);
    return st;
}

const builtin_model *builtin_find(const char *name) {
    for (int i = 0; i < builtin_count(); i++)
        if (strcmp(models[i].name, name) == 0) return &models[i];
    return NULL;
}
