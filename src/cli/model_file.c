/*
 * model_file.c - a MODEL given as a file instead of a built-in name:
 * Keras's model.to_json() output (MODEL.json), read with
 * sy_model_from_json; and --save-model, which writes the trained model
 * back (FILE.json: to_json()).
 *
 * A file holds the architecture only, so the rest comes from flags with
 * Keras's defaults, as compile() and fit() have them: --dataset NAME (or
 * --data tfrecord:GLOB) for the data, --loss and --metrics (by default
 * sparse_categorical_crossentropy and sparse_categorical_accuracy for an
 * output of several units, binary_crossentropy and accuracy for one),
 * optimizer rmsprop at its default learning rate, 1 epoch of one pass at
 * batch 32, validation on the test split after every epoch.
 *
 * The data is shaped as the model takes it: images (28x28) are reshaped to
 * the model's input when it holds as many values (28x28x1, 784); IMDB
 * reviews are loaded with the vocabulary of the model's Embedding
 * (num_words = its input_dim) and padded to the model's input length. From
 * TFRecord files (records.c) the same: the sample shape is the model's
 * input, word sequences when it starts with an Embedding.
 *
 * A Keras .h5 model file (MODEL.h5, keras.models.load_model) brings its
 * weights and, when it was saved compiled, its training_config: the loss,
 * metrics and optimizer then default to the file's. --save-model FILE.h5
 * writes model.save()'s file.
 *
 * A TensorFlow Lite file (MODEL.tflite, issue 18) is read and verified, and
 * refused for now with its operators named.
 */
#include "cli_internal.h"

#include "core/core_internal.h"   /* sy_error */
#include "io/io_internal.h" /* io_write_file_atomic, io_read_file_max */
#include "keras/keras_internal.h" /* a loaded model's compile settings */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n > k && !strcmp(s + n - k, suffix);
}

model_file_kind model_file_kind_of(const char *path) {
    if (ends_with(path, ".json")) return MODEL_FILE_JSON;
    if (ends_with(path, ".h5") || ends_with(path, ".hdf5")) return MODEL_FILE_H5;
    if (ends_with(path, ".tflite")) return MODEL_FILE_TFLITE;
    return MODEL_FILE_NONE;
}

/* issue 18: a .tflite file is read and verified (io_tflite_read: a damaged
 * one is refused with what was wrong and where), then refused, naming its
 * operators: running TFLite models is the next step of the issue. Exit 1. */
static int tflite_refuse(const char *command, const char *path) {
    io_tflite *m = NULL;
    if (io_tflite_read(path, &m) != SY_OK) {
        fprintf(stderr, "systolic %s: %s\n", command, sy_last_error());
        return 1;
    }
    fprintf(stderr, "systolic %s: '%s' is a TFLite model (%d operators:", command, path, m->n_ops);
    for (int32_t i = 0; i < m->n_ops; i++) {
        const char *name = io_tflite_op_name(m->ops[i].builtin);
        bool seen = false; /* each operator once, in order of first use */
        for (int32_t k = 0; k < i && !seen; k++)
            seen = m->ops[k].builtin == m->ops[i].builtin &&
                   (!m->ops[i].custom_code || !strcmp(m->ops[k].custom_code, m->ops[i].custom_code));
        if (seen) continue;
        if (m->ops[i].custom_code) /* the reader sets it for CUSTOM alone */
            fprintf(stderr, " custom '%s'", m->ops[i].custom_code);
        else if (name)
            fprintf(stderr, " %s", name);
        else
            fprintf(stderr, " builtin %d", (int)m->ops[i].builtin);
    }
    fprintf(stderr, "); a TFLite model runs with systolic predict and systolic evaluate\n");
    io_tflite_free(m);
    return 1;
}

/* The datasets --dataset names, and the built-in model whose data each is. */
static const struct {
    const char *name, *builtin;
} datasets[] = {{"fashion_mnist", "fashion_mnist_cnn"}, {"mnist", "mnist_cnn"}, {"imdb", "imdb_lstm"}};

int file_model_init(file_model *f, const char *command, const char *path, const char *dataset, const char *loss,
                    const char *metrics) {
    memset(f, 0, sizeof *f);
    if (model_file_kind_of(path) == MODEL_FILE_TFLITE) return tflite_refuse(command, path);
    builtin_model *b = &f->b;
    b->name = path;
    b->description = "a Keras model file";
    b->optimizer = "rmsprop"; /* Keras's compile() */
    b->learning_rate = 0.001f;
    b->batch_size = 32; /* Keras's fit() */
    b->epochs = 1;
    b->steps_per_epoch = 0;
    b->validation_freq = 1;
    if (dataset) {
        for (size_t i = 0; i < sizeof datasets / sizeof datasets[0] && !f->dataset; i++)
            if (!strcmp(dataset, datasets[i].name)) f->dataset = datasets[i].name;
        if (!f->dataset) {
            fprintf(stderr, "systolic %s: unknown --dataset '%s'; known: fashion_mnist, mnist, imdb\n", command, dataset);
            return 2;
        }
    }
    if (loss) {
        if (!*loss || strlen(loss) >= sizeof f->loss) {
            fprintf(stderr, "systolic %s: --loss: '%s' is no loss's name\n", command, loss);
            return 2;
        }
        snprintf(f->loss, sizeof f->loss, "%s", loss);
        b->loss = f->loss;
    }
    if (metrics) {
        if (strlen(metrics) >= sizeof f->metrics) {
            fprintf(stderr, "systolic %s: --metrics: '%s' is longer than %d characters\n", command, metrics,
                    (int)sizeof f->metrics - 1);
            return 2;
        }
        snprintf(f->metrics, sizeof f->metrics, "%s", metrics);
        int n = 0;
        for (char *m = f->metrics, *comma; m; m = comma ? comma + 1 : NULL) { /* A,B: every name given */
            /* issue 17: a comma inside a class's arguments, AUC(curve='PR', num_thresholds=50), is not a separator */
            int depth = 0;
            for (comma = m; *comma && (*comma != ',' || depth > 0); comma++) depth += (*comma == '(') - (*comma == ')');
            if (*comma) *comma = '\0';
            else comma = NULL;
            if (!*m) {
                fprintf(stderr, "systolic %s: --metrics: '%s' has an empty name; give Keras metric names separated by "
                                "commas, e.g. accuracy\n", command, metrics);
                return 2;
            }
            if (n == (int)(sizeof b->metrics / sizeof b->metrics[0])) {
                fprintf(stderr, "systolic %s: --metrics '%s': at most %d metrics\n", command, metrics, n);
                return 2;
            }
            b->metrics[n++] = m;
        }
        b->n_metrics = n;
        f->metrics_given = true;
    }
    return -1;
}

/* A Keras model JSON is a few hundred bytes a layer (ResNet-152's is
 * about 400 KB); a file past this is not one, and reading it whole (a link
 * to /dev/zero, a misnamed dataset) would take the machine's memory. */
#define MODEL_JSON_MAX ((size_t)64 << 20)

/* The whole file as a string (sy_free()); a directory, FIFO or device is
 * refused by io_read_file_max, naming what it is. */
static sy_status read_file(const char *path, char **out) {
    *out = NULL;
    uint8_t *buf;
    size_t n;
    sy_status st = io_read_file_max(path, MODEL_JSON_MAX, "a Keras model JSON", &buf, &n);
    if (st) return st;
    char *s = sy_realloc_array(buf, n, n + 1, 1);
    if (!s) {
        sy_free(buf);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "'%s': out of memory", path);
    }
    s[n] = '\0';
    if (strlen(s) != n) {
        sy_free(s);
        return sy_error(SY_ERR_INVALID_ARGUMENT, "'%s' holds a NUL byte: not Keras's model JSON",
                        path);
    }
    *out = s;
    return SY_OK;
}

sy_status file_model_load(file_model *f, uint64_t seed, sy_model **out) {
    *out = NULL;
    const char *path = f->b.name;
    sy_status st;
    switch (model_file_kind_of(path)) {
    case MODEL_FILE_JSON: {
        char *json;
        if ((st = read_file(path, &json))) return st;
        st = sy_model_from_json(json, out);
        sy_free(json);
        if (st) return st;
        sy_model_set_seed(*out, seed); /* the initial weights, as a built-in model's */
        break;
    }
    case MODEL_FILE_H5: { /* keras.models.load_model: the file's weights kept */
        if ((st = sy_model_load(path, out))) return st;
        const sy_model *m = *out;
        if (m->compiled) { /* its training_config: the defaults for what flags do not give */
            f->has_optimizer = true;
            f->optimizer = m->optimizer;
            if (!f->b.loss) {
                snprintf(f->saved_loss, sizeof f->saved_loss, "%s", m->heads[0].loss_name);
                f->b.loss = f->saved_loss;
                f->saved_from_logits = m->heads[0].from_logits; /* the recompile must keep it */
                f->saved_has_args = m->heads[0].object; /* issue 17: and its arguments */
                f->saved_args = m->heads[0].args;
            }
            if (!f->metrics_given && m->heads[0].n_metrics > 0) {
                int32_t n = 0;
                for (int32_t i = 0; i < m->heads[0].n_metrics; i++) {
                    const metric_spec *ms = &m->heads[0].metrics[i];
                    char(*to)[256] =
                        ms->weighted ? f->saved_weighted : f->saved_metrics; /* issue 17 */
                    int32_t *k = ms->weighted ? &f->n_weighted : &n;
                    if (*k == 4) continue;
                    snprintf(to[*k], sizeof to[*k], "%s", ms->given);
                    if (ms->weighted)
                        f->weighted[*k] = to[*k];
                    else
                        f->b.metrics[*k] = to[*k];
                    (*k)++;
                }
                f->b.n_metrics = n;
                f->metrics_given = n > 0;
            }
        }
        break;
    }
    default: return sy_error(SY_ERR_INVALID_ARGUMENT, "'%s': a model file ends in .json, .h5 or .hdf5", path);
    }
    const sy_model *m = *out;
    /* Keras's usual pairings for the output: one unit is a binary classifier */
    sy_shape y = sy_model_output_shape(m, -1);
    bool one = y.rank >= 1 && y.dims[y.rank - 1] == 1;
    if (!f->b.loss) f->b.loss = one ? "binary_crossentropy" : "sparse_categorical_crossentropy";
    if (!f->metrics_given) {
        f->b.metrics[0] = one ? "accuracy" : "sparse_categorical_accuracy";
        f->b.n_metrics = 1;
    }
    /* what a sample is, for the data: the model's input; word indices
     * (vocabulary and length) when it starts with an Embedding */
    const sy_layer *first = sy_model_layer(m, 0);
    f->b.input_shape = sy_model_input_shape(m);
    f->n_inputs = sy_model_input_count(m);
    f->n_outputs = sy_model_output_count(m);
    if (first && first->kind == SY_LAYER_EMBEDDING) {
        f->b.num_words = first->input_dim;
        f->b.maxlen = f->b.input_shape.rank == 1 ? f->b.input_shape.dims[0] : 0;
    }
    return SY_OK;
}

/* Images (N, 28, 28) as the model takes them: (N, input...) of as many values. */
static sy_status shape_images(const file_model *f, sy_data_split *d) {
    sy_shape x = sy_tensor_shape(d->x_train), in = f->b.input_shape;
    int64_t per = sy_shape_count(&x) / x.dims[0];
    if (sy_shape_count(&in) != per) {
        char s[SY_SHAPE_STR_MAX];
        return sy_error(SY_ERR_SHAPE, "--dataset %s gives 28x28 images (784 values) but '%s' takes inputs of shape %s",
                        f->dataset, f->b.name, sy_shape_format(&in, s, sizeof s));
    }
    sy_shape s = in;
    s.rank++;
    s.dims[0] = -1;
    for (int i = 0; i < in.rank; i++) s.dims[i + 1] = in.dims[i];
    sy_status st = sy_tensor_reshape(d->x_train, s);
    if (!st) st = sy_tensor_reshape(d->x_test, s);
    return st;
}

/* The IMDB reviews with the model's vocabulary, padded to its input length. */
static sy_status load_imdb(const file_model *f, sy_data_split *d) {
    if (f->b.input_shape.rank != 1) {
        char s[SY_SHAPE_STR_MAX];
        return sy_error(SY_ERR_SHAPE, "--dataset imdb gives reviews as word indices (None, length), but '%s' takes "
                        "inputs of shape %s", f->b.name, sy_shape_format(&f->b.input_shape, s, sizeof s));
    }
    /* the Embedding's vocabulary (0, no Embedding first: every word) */
    return builtin_imdb_data((int32_t)f->b.num_words, f->b.input_shape.dims[0], d);
}

sy_status file_model_data(const file_model *f, sy_data_split *d) {
    memset(d, 0, sizeof *d);
    sy_status st;
    if (f->n_inputs != 1 || f->n_outputs != 1)
        return sy_error(
            SY_ERR_INVALID_ARGUMENT,
            "--dataset %s gives one input and one label, but '%s' has %d inputs and %d outputs: "
            "give its data as TFRecords (--data tfrecord:GLOB --features 'x.NAME=...; y.NAME=...') "
            "or, to predict, NumPy files (--input NAME=FILE for each input)",
            f->dataset, f->b.name, f->n_inputs, f->n_outputs);
    if (!strcmp(f->dataset, "imdb")) return load_imdb(f, d);
    st = !strcmp(f->dataset, "mnist") ? sy_mnist_load_data(d) : sy_fashion_mnist_load_data(d);
    if (!st && (st = shape_images(f, d))) sy_data_split_free(d);
    return st;
}

const char *model_file_check_save(const char *path) {
    switch (model_file_kind_of(path)) {
    case MODEL_FILE_JSON: return NULL;
    case MODEL_FILE_H5: return NULL;
    default: return "--save-model FILE must end in .h5 or .hdf5 (model.save(): a full Keras model) or .json "
                    "(model.to_json(): its architecture)";
    }
}

sy_status model_file_save(const sy_model *m, const char *path) {
    if (model_file_kind_of(path) == MODEL_FILE_H5) return sy_model_save(m, path);
    if (model_file_kind_of(path) != MODEL_FILE_JSON)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s", model_file_check_save(path));
    char *json;
    sy_status st = sy_model_to_json(m, &json);
    if (st) return st;
    const void *bufs[1] = {json};
    size_t sizes[1] = {strlen(json)};
    st = io_write_file_atomic(path, bufs, sizes, 1);
    sy_free(json);
    return st;
}
