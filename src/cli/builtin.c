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
 * imdb_bilstm (issue 17, masking) is Keras's "Bidirectional LSTM on IMDB"
 * example (keras.io/examples/nlp/bidirectional_lstm_imdb): the 20,000 most
 * frequent words, reviews padded or cut to their last 200 ('pre') ->
 * Embedding(20000, 128, mask_zero=True) -> Bidirectional(LSTM(64,
 * return_sequences=True)) -> Bidirectional(LSTM(64)) -> Dense(1, sigmoid);
 * Adam(1e-3), binary_crossentropy, accuracy; batch 32, 2 epochs, validated
 * on the 25,000 test reviews. The example leaves mask_zero off; the issue
 * asks for it, so the padding steps are skipped (docs/design/masking.md).
 *
 * cifar10_vgg16 is the Cloud TPU guides' third tutorial, its code as
 * written: the CIFAR-10 training images as float32 and labels as int64;
 * from_tensor_slices(images).map(pro), where pro divides by 225.0 (sic),
 * subtracts the mean (0.4914, 0.4822, 0.4465), divides by the std
 * (0.2023, 0.1994, 0.2010) and applies random_flip_up_down; zipped with
 * the labels; batch(200) (drop_remainder for fit's one static shape,
 * which drops nothing at 200); VGG16(weights=None, input_shape=(32, 32, 3))
 * with its 1,000-way softmax top; SGD(0.001);
 * SparseCategoricalCrossentropy(from_logits=True) on that softmax output,
 * which tf.keras 2.15 answers with a warning and the softmax's own logits
 * (docs/design/vgg16-tutorial.md); 10 epochs. Validation: the test
 * images through pro without the flip, after the last epoch.
 * fashion_mnist_vgg16 is the same on the images that are here when
 * CIFAR-10 is not: Fashion-MNIST padded to 32x32 with zeros and repeated
 * over 3 channels.
 *
 * vgg16 and resnet50 (issue 15) are keras.applications' VGG16 and ResNet50
 * (weights=None) built by the C constructors (systolic/applications.h) for
 * CIFAR-10-shaped data: input_shape (32, 32, 3), classes 10, the softmax
 * top; CIFAR-10 scaled to [0, 1] (x / 255, float32); SGD(0.01),
 * sparse_categorical_crossentropy, sparse_categorical_accuracy; batch 64,
 * 10 epochs of one pass, validated on the test images after each.
 */
#include "cli_internal.h"

#include <stdatomic.h>

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

/* ---- issue 17, masking: imdb_bilstm ---------------------------------------------------- */

#define BILSTM_WORDS 20000 /* the example's max_features */
#define BILSTM_LEN 200     /* and maxlen */

static sy_status load_imdb_bilstm(sy_data_split *d) { return builtin_imdb_data(BILSTM_WORDS, BILSTM_LEN, d); }

/* Embedding(20000, 128, mask_zero=True) -> Bidirectional(LSTM(64, return_sequences=True)) ->
 * Bidirectional(LSTM(64)) -> Dense(1, sigmoid) over (200,) word indices */
static sy_status build_imdb_bilstm(uint64_t seed, sy_model **out) {
    sy_layer emb = sy_layer_embedding(BILSTM_WORDS, 128), l1 = sy_layer_lstm(64), l2 = sy_layer_lstm(64);
    emb.mask_zero = true;
    emb.input_shape = sy_shape_of(1, (int64_t)BILSTM_LEN);
    l1.return_sequences = true;
    sy_layer layers[4] = {emb, sy_layer_bidirectional(&l1), sy_layer_bidirectional(&l2), sy_layer_dense(1)};
    layers[3].activation = SY_ACTIVATION_SIGMOID;
    return build_sequential(seed, layers, 4, out);
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

/* keras.applications' model for 32x32x3 images of `classes` classes. */
static sy_status build_application(sy_status (*make)(const sy_applications_options *, sy_model **), int32_t classes,
                                   uint64_t seed, sy_model **out) {
    sy_applications_options o = sy_applications_options_default();
    o.input_shape = sy_shape_of(3, (int64_t)32, (int64_t)32, (int64_t)3);
    o.classes = classes;
    o.seed = seed;
    return make(&o, out);
}

static sy_status build_vgg16(uint64_t seed, sy_model **out) { return build_application(sy_applications_vgg16, 10, seed, out); }
static sy_status build_resnet50(uint64_t seed, sy_model **out) {
    return build_application(sy_applications_resnet50, 10, seed, out);
}

/* ---- the VGG16 tutorial (cifar10_vgg16, fashion_mnist_vgg16) ---- */

/* VGG16(weights=None, input_shape=(32, 32, 3)): Keras's default top, a
 * 1,000-way softmax. */
static sy_status build_vgg16_tutorial(uint64_t seed, sy_model **out) {
    return build_application(sy_applications_vgg16, 1000, seed, out);
}

static const float vgg_mean[3] = {0.4914f, 0.4822f, 0.4465f}, vgg_std[3] = {0.2023f, 0.1994f, 0.2010f};

/* pro's arithmetic in place over (..., 3) float32 pixels: x / 225.0, as
 * the tutorial writes it, then (x - mean) / std per channel. */
static void vgg_normalise(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = (x[i] / 225.0f - vgg_mean[i % 3]) / vgg_std[i % 3];
}

/* pro: one image (32, 32, 3) normalised and, with probability 1/2, flipped
 * upside down (tf.image.random_flip_up_down). The coin is the element's
 * draw from a counter: map runs sequentially, as the tutorial's does, so
 * a seed gives the same flips, and each epoch new ones. */
typedef struct vgg_pro {
    uint64_t seed;
    atomic_uint_fast64_t count;
} vgg_pro;

/* The map's context lives as long as the datasets, which the command frees
 * at exit: one per process, as the command runs one pipeline. */
static vgg_pro the_pro;

static sy_status vgg_pro_fn(void *ctx, const sy_element *in, sy_element *out) {
    vgg_pro *p = ctx;
    sy_shape s = sy_tensor_shape(in->c[0]); /* (H, W, 3) */
    sy_status st = sy_tensor_new(SY_F32, s, &out->c[0]);
    if (st) return st;
    out->n = 1;
    const float *x = sy_tensor_data(in->c[0]);
    float *y = sy_tensor_data(out->c[0]);
    int64_t row = s.dims[1] * s.dims[2];
    sy_rng coin = sy_rng_new(p->seed, atomic_fetch_add(&p->count, 1));
    bool flip = sy_rng_uniform(&coin) < 0.5f;
    for (int64_t r = 0; r < s.dims[0]; r++)
        memcpy(y + r * row, x + (flip ? s.dims[0] - 1 - r : r) * row, (size_t)row * sizeof *y);
    vgg_normalise(y, sy_shape_count(&s));
    return SY_OK;
}

/* The tutorial's datasets: from_tensor_slices(x_train).map(pro) zipped with
 * from_tensor_slices(y_train), batch(batch_size); the test split (already
 * normalised by the loader) batched alike. issue 20: on several hosts each
 * takes its shard of both, before the map. */
static sy_status vgg_pipeline(const sy_data_split *d, int64_t batch_size, int64_t eval_batch, uint64_t seed,
                              int32_t hosts, int32_t host, sy_dataset **train, sy_dataset **validation) {
    sy_dataset *images = NULL, *mine = NULL, *mapped = NULL, *labels = NULL, *zipped = NULL, *test = NULL,
               *test_mine = NULL;
    *train = *validation = NULL;
    the_pro.seed = seed;
    atomic_store(&the_pro.count, 0);
    sy_tensor *test_xy[2] = {d->x_test, d->y_test};
    sy_component_spec spec = {SY_F32, sy_shape_of(3, (int64_t)32, (int64_t)32, (int64_t)3)};
    sy_dataset *y = NULL;
    sy_status st = sy_dataset_from_tensor_slices(&d->x_train, 1, &images);
    if (!st) st = sy_dataset_shard(images, hosts, host, &mine);
    if (!st) st = sy_dataset_map(mine, vgg_pro_fn, &the_pro, 1, &spec, 1, &mapped);
    if (!st) st = sy_dataset_from_tensor_slices(&d->y_train, 1, &labels);
    if (!st) st = sy_dataset_shard(labels, hosts, host, &y);
    if (!st) st = sy_dataset_zip((const sy_dataset *const[]){mapped, y}, 2, &zipped);
    /* drop_remainder, which fit's one static shape needs, drops nothing at
     * batch 200: 50,000 and 60,000 images are whole batches */
    if (!st) st = sy_dataset_batch(zipped, batch_size, true, train);
    if (!st) st = sy_dataset_from_tensor_slices(test_xy, 2, &test);
    if (!st) st = sy_dataset_shard(test, hosts, host, &test_mine);
    if (!st) st = sy_dataset_batch(test_mine, eval_batch, false, validation);
    sy_dataset_free(images);
    sy_dataset_free(mine);
    sy_dataset_free(y);
    sy_dataset_free(test_mine);
    sy_dataset_free(mapped);
    sy_dataset_free(labels);
    sy_dataset_free(zipped);
    sy_dataset_free(test);
    if (st) {
        sy_dataset_free(*train);
        *train = NULL;
    }
    return st;
}

/* Images as the tutorial takes them: the training images float32 (N, 32,
 * 32, 3) in 0..255 for pro, the test images already through pro's
 * arithmetic (no flip) for evaluate, predict and validation; labels int64
 * (N, 1), as cifar10.load_data()'s, cast as the tutorial casts them.
 * `pad` (Fashion-MNIST) puts each 28x28 image in the middle of 32x32 zeros
 * and repeats it over the 3 channels. */
static sy_status vgg_images(const sy_tensor *x, bool pad, bool normalise, sy_tensor **out) {
    sy_shape s = sy_tensor_shape(x);
    int64_t n = s.dims[0];
    sy_status st = sy_tensor_new(SY_F32, sy_shape_of(4, n, (int64_t)32, (int64_t)32, (int64_t)3), out);
    if (st) return st;
    const uint8_t *src = sy_tensor_data(x);
    float *dst = sy_tensor_data(*out);
    for (int64_t i = 0; i < n; i++)
        for (int64_t r = 0; r < 32; r++)
            for (int64_t c = 0; c < 32; c++)
                for (int64_t k = 0; k < 3; k++) {
                    float v;
                    if (!pad) v = src[((i * 32 + r) * 32 + c) * 3 + k];
                    else v = r < 2 || r >= 30 || c < 2 || c >= 30 ? 0.0f : src[(i * 28 + r - 2) * 28 + c - 2];
                    dst[((i * 32 + r) * 32 + c) * 3 + k] = v;
                }
    if (normalise) vgg_normalise(dst, sy_tensor_count(*out));
    return SY_OK;
}

static sy_status vgg_labels(const sy_tensor *y, sy_tensor **out) {
    int64_t n = sy_tensor_shape(y).dims[0];
    sy_status st = sy_tensor_new(SY_I64, sy_shape_of(2, n, (int64_t)1), out);
    if (st) return st;
    const uint8_t *src = sy_tensor_data(y);
    int64_t *dst = sy_tensor_data(*out);
    for (int64_t i = 0; i < n; i++) dst[i] = src[i];
    return SY_OK;
}

static sy_status vgg_data(sy_status (*load)(sy_data_split *), bool pad, sy_data_split *d) {
    sy_data_split raw;
    sy_status st = load(&raw);
    if (st) return st;
    memset(d, 0, sizeof *d);
    if ((st = vgg_images(raw.x_train, pad, false, &d->x_train)) || (st = vgg_images(raw.x_test, pad, true, &d->x_test)) ||
        (st = vgg_labels(raw.y_train, &d->y_train)) || (st = vgg_labels(raw.y_test, &d->y_test)))
        sy_data_split_free(d);
    sy_data_split_free(&raw);
    return st;
}

static sy_status load_cifar10_vgg(sy_data_split *d) { return vgg_data(sy_cifar10_load_data, false, d); }
static sy_status load_fashion_mnist_vgg(sy_data_split *d) { return vgg_data(sy_fashion_mnist_load_data, true, d); }

static const builtin_model models[] = {
    {"fashion_mnist_cnn", "the Cloud TPU Keras tutorial: a CNN on Fashion-MNIST (raw pixels, Adam)", build_mnist_cnn,
     load_fashion_mnist, "adam", 1e-3f, "sparse_categorical_crossentropy", {"sparse_categorical_accuracy"}, 1, 1000, 5,
     60, 5, {3, {28, 28, 1}}, 0, 0, false, NULL},
    {"mnist_cnn", "the same CNN on MNIST digits", build_mnist_cnn, load_mnist, "adam", 1e-3f,
     "sparse_categorical_crossentropy", {"sparse_categorical_accuracy"}, 1, 1000, 5, 60, 5, {3, {28, 28, 1}}, 0, 0, false, NULL},
    {"imdb_lstm", "the Keras IMDB tutorial: an LSTM over word embeddings classifies movie reviews", build_imdb_lstm,
     load_imdb, "adam", 1e-3f, "binary_crossentropy", {"accuracy"}, 1, 64, 20, 0, 1, {1, {IMDB_LEN}}, IMDB_WORDS, IMDB_LEN,
     false, NULL},
    /* issue 17, masking */
    {"imdb_bilstm", "Keras's Bidirectional LSTM on IMDB: two Bidirectional(LSTM(64)) over masked word embeddings",
     build_imdb_bilstm, load_imdb_bilstm, "adam", 1e-3f, "binary_crossentropy", {"accuracy"}, 1, 32, 2, 0, 1,
     {1, {BILSTM_LEN}}, BILSTM_WORDS, BILSTM_LEN, false, NULL},
    {"cifar10_vgg16", "the Cloud TPU guides' third tutorial: VGG16 on CIFAR-10 through tf.data (SGD, from_logits)",
     build_vgg16_tutorial, load_cifar10_vgg, "sgd", 1e-3f, "sparse_categorical_crossentropy", {"sparse_categorical_accuracy"}, 1,
     200, 10, 0, 10, {3, {32, 32, 3}}, 0, 0, true, vgg_pipeline},
    {"fashion_mnist_vgg16", "the same VGG16 tutorial on Fashion-MNIST padded to 32x32x3 (CIFAR-10 is not here)",
     build_vgg16_tutorial, load_fashion_mnist_vgg, "sgd", 1e-3f, "sparse_categorical_crossentropy",
     {"sparse_categorical_accuracy"}, 1, 200, 10, 0, 10, {3, {32, 32, 3}}, 0, 0, true, vgg_pipeline},
    /* issue 15, keras.applications */
    {"vgg16", "keras.applications' VGG16 (weights=None) for 32x32 images, 10 classes, on CIFAR-10 / 255 (SGD)",
     build_vgg16, load_cifar10_scaled, "sgd", 0.01f, "sparse_categorical_crossentropy",
     {"sparse_categorical_accuracy"}, 1, 64, 10, 0, 1, {3, {32, 32, 3}}, 0, 0, false, NULL},
    {"resnet50", "keras.applications' ResNet50 (weights=None) for 32x32 images, 10 classes, on CIFAR-10 / 255 (SGD)",
     build_resnet50, load_cifar10_scaled, "sgd", 0.01f, "sparse_categorical_crossentropy",
     {"sparse_categorical_accuracy"}, 1, 64, 10, 0, 1, {3, {32, 32, 3}}, 0, 0, false, NULL},
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
