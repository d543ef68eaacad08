/*
 * zoo.c - the dataset zoo: Keras's load_data() for the datasets systolic
 * knows, with each file's published SHA-256, size and download mirrors.
 *
 * A dataset is a name, a list of base URLs tried in order, and its files
 * (a file may have URLs of its own). The SHA-256 values are those of the
 * original files as their publishers serve them (docs/design/datasets.md
 * says how they were checked); Keras and torchvision download the same
 * bytes. The mirrors come first where they are reliable: for Fashion-MNIST,
 * Keras's Google Cloud Storage copy, then Zalando's own bucket; for MNIST,
 * PyTorch's S3 copy and Google's CVDF copy before yann.lecun.com, which
 * often refuses automated downloads. IMDB's word index comes from Keras's
 * bucket; its review archive, the labelled part of Stanford's
 * aclImdb_v1.tar.gz repackaged, has no public URL: only a copy in
 * $SYSTOLIC_DATASETS or the cache, or $SYSTOLIC_DATASETS_MIRROR, can serve
 * it, and the error says so (imdb.c reads it). CIFAR-10 is the binary
 * version, from its publisher only (cifar.c reads it); its SHA-256 and
 * size are those TensorFlow Datasets lists for the same URL.
 *
 * Loading a split fetches (finds, downloads, verifies) all four files before
 * parsing any, so a missing file is reported before seconds are spent
 * inflating the others; then it reads each with the IDX reader and checks
 * the shapes and types Keras promises: x uint8 (N, 28, 28), y uint8 (N,).
 */
#include "data_internal.h"

#include <limits.h>
#include <string.h>

typedef struct zoo_file {
    const char *name;
    const char *sha256;
    int64_t size;
    const char *const *urls; /* NULL: the dataset's */
    const char *note;        /* said when the file cannot be found */
} zoo_file;

/* For the IDX datasets, files in sy_data_split's order: x_train, y_train,
 * x_test, y_test; unused entries have no name. */
typedef struct zoo_dataset {
    const char *name;
    const char *const *urls;
    zoo_file files[4];
    int64_t train, test; /* examples */
} zoo_dataset;

static const char *const fashion_mnist_urls[] = {
    "https://storage.googleapis.com/tensorflow/tf-keras-datasets/", /* what Keras uses */
    "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/",  /* Zalando, the publisher */
    NULL};

static const char *const mnist_urls[] = {
    "https://ossci-datasets.s3.amazonaws.com/mnist/",      /* PyTorch's copy */
    "https://storage.googleapis.com/cvdf-datasets/mnist/", /* Google's copy */
    "http://yann.lecun.com/exdb/mnist/",                   /* the publisher; often refuses */
    NULL};

static const char *const keras_urls[] = {
    "https://storage.googleapis.com/tensorflow/tf-keras-datasets/", NULL};

static const char *const no_urls[] = {NULL};

static const char *const cifar10_urls[] = {"https://www.cs.toronto.edu/~kriz/", NULL};

static const zoo_dataset zoo[] = {
    {"fashion_mnist",
     fashion_mnist_urls,
     {{"train-images-idx3-ubyte.gz",
       "3aede38d61863908ad78613f6a32ed271626dd12800ba2636569512369268a84", 26421880, NULL, NULL},
      {"train-labels-idx1-ubyte.gz",
       "a04f17134ac03560a47e3764e11b92fc97de4d1bfaf8ba1a3aa29af54cc90845", 29515, NULL, NULL},
      {"t10k-images-idx3-ubyte.gz",
       "346e55b948d973a97e58d2351dde16a484bd415d4595297633bb08f03db6a073", 4422102, NULL, NULL},
      {"t10k-labels-idx1-ubyte.gz",
       "67da17c76eaffca5446c3361aaab5c3cd6d1c2608764d35dfb1850b086bf8dd5", 5148, NULL, NULL}},
     60000,
     10000},
    {"mnist",
     mnist_urls,
     {{"train-images-idx3-ubyte.gz",
       "440fcabf73cc546fa21475e81ea370265605f56be210a4024d2ca8f203523609", 9912422, NULL, NULL},
      {"train-labels-idx1-ubyte.gz",
       "3552534a0a558bbed6aed32b30c495cca23d567ec52cac8be1a0730e8010255c", 28881, NULL, NULL},
      {"t10k-images-idx3-ubyte.gz",
       "8d422c7b0a1c1c79245a5bcf07fe86e33eeafee792b84584aec276f5a2dbc4e6", 1648877, NULL, NULL},
      {"t10k-labels-idx1-ubyte.gz",
       "f7ae60f92e00ec6debd23a6088c31dbd2371eca3ffa0defaefb259924204aec6", 4542, NULL, NULL}},
     60000,
     10000},
    {"imdb",
     keras_urls,
     {{"imdb_word_index.json", /* Keras's own, byte for byte (its MD5 is Keras's file_hash) */
       "027313fe9a320280f3bf0fac5baf58c4a683cf39a7ed9c3d3d3912bde4284cf6", 1641221, NULL, NULL},
      {"aclImdb_v1_labeled.tar.gz",
       "fc132c2a23a4d23eec474b518907765dbc9c59e648c1e57ac8010670238ed697", 28630965, no_urls,
       "aclImdb_v1_labeled.tar.gz is not published for download: it is the labelled part "
       "(train and test, pos and neg) of Stanford's aclImdb_v1.tar.gz "
       "(https://ai.stanford.edu/~amaas/data/sentiment/), repackaged as a reproducible tar; "
       "only a copy in $SYSTOLIC_DATASETS/imdb/ or in the cache, or a mirror given by "
       "$SYSTOLIC_DATASETS_MIRROR (<mirror>/imdb/aclImdb_v1_labeled.tar.gz), can serve it"}},
     25000,
     25000},
    {"cifar10",
     cifar10_urls,
     {{"cifar-10-binary.tar.gz", /* publisher's MD5 c32a1d4ab5d03f1284b67883e8d87530 */
       "c4a38c50a1bc5f3a1c5537f2155ab9d68f9f25eb1ed8d9ddda3db29a59bca1dd", 170052171, NULL, NULL}},
     50000,
     10000},
};

#define ZOO_COUNT ((int)(sizeof zoo / sizeof zoo[0]))

/* "fashion-mnist" and "fashion_mnist" name the same dataset. */
static bool same_name(const char *a, const char *b) {
    for (; *a && *b; a++, b++)
        if (*a != *b && !((*a == '-' || *a == '_') && (*b == '-' || *b == '_'))) return false;
    return *a == *b;
}

static sy_status find_file(const char *dataset, const char *file, const zoo_dataset **d,
                           const zoo_file **f) {
    char known[256] = "";
    size_t len = 0;
    *d = NULL;
    for (int i = 0; i < ZOO_COUNT && !*d; i++) {
        if (same_name(dataset, zoo[i].name)) *d = &zoo[i];
        if (len < sizeof known)
            len += (size_t)snprintf(known + len, sizeof known - len, "%s%s", i ? ", " : "",
                                    zoo[i].name);
    }
    if (!*d)
        return sy_error(SY_ERR_NOT_FOUND, "no dataset named '%s' in the zoo; it has %s", dataset,
                        known);
    len = 0;
    for (int i = 0; i < 4 && (*d)->files[i].name; i++) {
        if (strcmp(file, (*d)->files[i].name) == 0) {
            *f = &(*d)->files[i];
            return SY_OK;
        }
        if (len < sizeof known)
            len += (size_t)snprintf(known + len, sizeof known - len, "%s%s", i ? ", " : "",
                                    (*d)->files[i].name);
    }
    return sy_error(SY_ERR_NOT_FOUND, "the dataset '%s' has no file '%s'; its files are %s",
                    (*d)->name, file, known);
}

static data_file_spec spec_of(const zoo_dataset *d, const zoo_file *f) {
    data_file_spec s = {d->name, f->name, f->sha256, f->size, f->urls ? f->urls : d->urls, f->note};
    return s;
}

sy_status sy_dataset_file(const char *dataset, const char *file, char *path, size_t size) {
    const zoo_dataset *d = NULL;
    const zoo_file *f = NULL;
    sy_status st = find_file(dataset, file, &d, &f);
    if (st) return st;
    data_file_spec spec = spec_of(d, f);
    return data_fetch(&spec, path, size);
}

void sy_data_split_free(sy_data_split *split) {
    if (!split) return;
    sy_tensor_free(split->x_train);
    sy_tensor_free(split->y_train);
    sy_tensor_free(split->x_test);
    sy_tensor_free(split->y_test);
    split->x_train = split->y_train = split->x_test = split->y_test = NULL;
}

/* x uint8 (n, 28, 28) or y uint8 (n,), as the zoo promises. */
static sy_status check_part(const char *path, const sy_tensor *t, bool images, int64_t n) {
    sy_shape want = images ? sy_shape_of(3, n, (int64_t)28, (int64_t)28) : sy_shape_of(1, n);
    sy_shape got = sy_tensor_shape(t);
    if (sy_tensor_dtype(t) == SY_U8 && sy_shape_equal(&got, &want)) return SY_OK;
    char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
    return sy_error(SY_ERR_CORRUPT, "%s: expected uint8 %s, found %s %s", path,
                    sy_shape_format(&want, a, sizeof a), sy_dtype_name(sy_tensor_dtype(t)),
                    sy_shape_format(&got, b, sizeof b));
}

static sy_status load_split(const zoo_dataset *d, sy_data_split *out) {
    memset(out, 0, sizeof *out);
    sy_tensor **parts[4] = {&out->x_train, &out->y_train, &out->x_test, &out->y_test};
    char paths[4][PATH_MAX];
    sy_status st = SY_OK;
    for (int i = 0; i < 4 && !st; i++) {
        data_file_spec spec = spec_of(d, &d->files[i]);
        st = data_fetch(&spec, paths[i], sizeof paths[i]);
    }
    for (int i = 0; i < 4 && !st; i++) {
        st = sy_idx_read(paths[i], parts[i]);
        if (!st) st = check_part(paths[i], *parts[i], i % 2 == 0, i < 2 ? d->train : d->test);
    }
    if (st) sy_data_split_free(out);
    return st;
}

sy_status sy_fashion_mnist_load_data(sy_data_split *out) {
    return load_split(&zoo[0], out);
}
sy_status sy_mnist_load_data(sy_data_split *out) {
    return load_split(&zoo[1], out);
}
