/*
 * arrays.c - a user's arrays in and out of the commands: `predict --input`
 * reads the samples from NumPy files, `--output` writes the model's
 * outputs as one.
 *
 * Inputs, for any model (issue 17), as Keras's predict takes x: one
 * --input per model input, in the model's input order (a list), or each
 * as NAME=FILE naming its input layer (a dict); or one FILE.npz without a
 * key, whose arrays named after the input layers are the inputs. FILE is
 * FILE.npy (np.save) or FILE.npz:KEY, the array KEY of an archive np.savez
 * wrote (the part after the last ':' that follows ".npz"; NAME=FILE.npz
 * means key NAME). NAME is what comes before the first '=' when that holds
 * no '/': a file named "a=b.npy" is given as ./a=b.npy. The reader (data's
 * sy_npy_read) gives float32, float64, int32 or uint8 tensors; fit.c's
 * feeding converts each value to the model's input type, as Keras's
 * predict casts its input, so any integer or float dtype numpy writes is
 * taken. What it cannot take is named with the file and the input it was
 * for: a dtype that is not a number (strings, objects, structured arrays),
 * a shape that is not (samples, the input's shape...), a missing key (the
 * keys present are listed), a truncated or damaged file. The wrong number
 * of --input flags, or a NAME no input has, is a usage error that lists
 * the model's inputs and their shapes.
 *
 * Outputs are float32 (samples, output shape...), model.predict's arrays,
 * written whole or not at all (sy_npy_write, sy_npz_write), so a failed
 * run never leaves a torn file or destroys one already there: OUT.npy for
 * a model with one output; OUT.npz with one array per output keyed by its
 * layer's name, what np.savez(OUT, **dict(zip(model.output_names,
 * model.predict(x)))) writes; or OUT.csv: a header row naming the
 * columns after the output layers, a row per sample, every output's
 * values side by side.
 */
#include "cli_internal.h"

#include "core/core_internal.h"   /* sy_error */
#include "io/io_internal.h"       /* io_write_file_atomic */
#include "keras/keras_internal.h" /* the model's inputs and outputs: names, shapes */

#include <stdlib.h>
#include <string.h>

static bool ends_with(const char *s, size_t n, const char *suffix) {
    size_t k = strlen(suffix);
    return n >= k && !memcmp(s + n - k, suffix, k);
}

const char *cli_input_name(const sy_model *m, int32_t i, char *buf, size_t size) {
    if (m->inputs[i].name[0]) return m->inputs[i].name;
    /* a Sequential model's InputLayer, as Keras names it */
    const sy_layer *first = sy_model_layer(m, 0);
    snprintf(buf, size, "%s_input", first && first->name ? first->name : "input");
    return buf;
}

/* One --input: [NAME=]FILE, FILE being PATH.npy, PATH.npz:KEY or
 * PATH.npz; pointers into the argument. */
typedef struct input_arg {
    char name[128];   /* "": given by position */
    const char *path; /* path_len bytes */
    size_t path_len;
    const char *key; /* NULL: none */
    bool npz;
} input_arg;

/* NULL, or why `spec` is not an --input. */
static const char *split_input(const char *spec, input_arg *a) {
    memset(a, 0, sizeof *a);
    const char *file = spec, *eq = strchr(spec, '=');
    if (eq && eq > spec && !memchr(spec, '/', (size_t)(eq - spec))) {
        if ((size_t)(eq - spec) >= sizeof a->name)
            return "--input NAME=FILE: the input's NAME is too long";
        memcpy(a->name, spec, (size_t)(eq - spec));
        file = eq + 1;
    }
    const char *colon = strrchr(file, ':');
    size_t n = strlen(file);
    if (colon && ends_with(file, (size_t)(colon - file), ".npz")) {
        if (!colon[1]) return "--input FILE.npz:KEY needs the KEY of the array after the ':'";
        a->key = colon + 1;
        n = (size_t)(colon - file);
    }
    if (n >= 4096) return "--input: the path is longer than 4095 bytes";
    a->path = file;
    a->path_len = n;
    a->npz = ends_with(file, n, ".npz");
    if (a->npz || (!a->key && ends_with(file, n, ".npy"))) return NULL;
    return "--input takes a NumPy file: FILE.npy, FILE.npz:KEY (the array KEY of an archive) or "
           "FILE.npz (its arrays named after the model's inputs), each also as NAME=FILE for the "
           "input layer NAME";
}

const char *array_check_inputs(const flag_list *l) {
    static char why[320];
    input_arg a, b;
    int named = 0;
    for (int i = 0; i < l->n; i++) {
        const char *bad = split_input(l->v[i], &a);
        if (bad) return bad;
        named += a.name[0] != 0;
        if (!a.name[0] && a.npz && !a.key && l->n > 1)
            return "--input FILE.npz without a key gives each model input the array named after "
                   "it: give it alone, or FILE.npz:KEY for each input";
        for (int j = 0; j < i && a.name[0]; j++)
            if (!split_input(l->v[j], &b) && !strcmp(a.name, b.name)) {
                snprintf(why, sizeof why, "--input: input '%.100s' is given twice", a.name);
                return why;
            }
    }
    if (named && named != l->n)
        return "--input: give every --input as NAME=FILE (naming the model's input layers) or none "
               "(one per input, in the model's order)";
    return NULL;
}

/* "in_a (None, 4), in_b (None, 3)": the model's inputs, for messages. */
static const char *input_list(const sy_model *m, char *buf, size_t size) {
    size_t len = 0;
    buf[0] = 0;
    for (int32_t i = 0; i < m->n_inputs && len < size; i++) {
        char name[160], shape[SY_SHAPE_STR_MAX + 8];
        sy_shape in = model_input_shape_at(m, i);
        len += (size_t)snprintf(buf + len, size - len, "%s%s %s", i ? ", " : "",
                                cli_input_name(m, i, name, sizeof name),
                                keras_shape_str(&in, shape, sizeof shape));
    }
    return buf;
}

/* "(3, 28, 28) uint8" for messages. */
static const char *describe(const sy_tensor *t, char *buf, size_t size) {
    sy_shape s = sy_tensor_shape(t);
    char shape[SY_SHAPE_STR_MAX];
    snprintf(buf, size, "%s %s", sy_shape_format(&s, shape, sizeof shape),
             sy_dtype_name(sy_tensor_dtype(t)));
    return buf;
}

/* SY_ERR_SHAPE, naming `spec`, the array's shape and dtype and input i's
 * name and shape, unless x is (samples >= 1, input i's shape...). */
static sy_status check_samples(const sy_tensor *x, const char *spec, const sy_model *m, int32_t i) {
    sy_shape xs = sy_tensor_shape(x), in = model_input_shape_at(m, i);
    bool ok = xs.rank == in.rank + 1 && xs.dims[0] > 0;
    for (int k = 0; ok && k < in.rank; k++) ok = xs.dims[k + 1] == in.dims[k];
    if (ok) return SY_OK;
    char a[96], b[SY_SHAPE_STR_MAX + 8], name[160], w[SY_SHAPE_STR_MAX];
    keras_shape_str(&in, b, sizeof b);
    const char *input = cli_input_name(m, i, name, sizeof name);
    if (xs.rank >= 1 && xs.dims[0] == 0)
        return sy_error(SY_ERR_SHAPE,
                        "%s: the array %s holds no samples; input '%s' of model '%s' takes %s",
                        spec, describe(x, a, sizeof a), input, sy_model_name(m), b);
    sy_shape want = keras_batch_shape(xs.rank ? xs.dims[0] : 1, &in);
    bool same_count = xs.rank >= 1 && sy_shape_count(&xs) / xs.dims[0] == sy_shape_count(&in);
    return sy_error(
        SY_ERR_SHAPE,
        "%s: the array is %s, but input '%s' of model '%s' takes %s (samples first)%s%s", spec,
        describe(x, a, sizeof a), input, sy_model_name(m), b,
        same_count ? "; the sizes agree: reshape it to " : "",
        same_count ? sy_shape_format(&want, w, sizeof w) : "");
}

/* Input i's array from a (its key: a's, else `key`), checked against it. */
static sy_status read_one(const input_arg *a, const char *spec, const char *key, const sy_model *m,
                          int32_t i, sy_tensor **out) {
    *out = NULL;
    char path[4096];
    memcpy(path, a->path, a->path_len);
    path[a->path_len] = 0;
    sy_status st;
    if (a->npz) {
        sy_npz *z;
        if (!(st = sy_npz_open(path, &z))) st = sy_npz_get(z, a->key ? a->key : key, out);
        sy_npz_close(z);
    } else {
        st = sy_npy_read(path, out);
    }
    if (!st && (st = check_samples(*out, spec, m, i))) {
        sy_tensor_free(*out);
        *out = NULL;
    }
    if (st && st != SY_ERR_SHAPE) {
        char msg[1024], name[160], list[1024];
        snprintf(msg, sizeof msg, "%s", sy_last_error());
        st = sy_error(st, "%s (for input '%s' of model '%s'; its inputs: %s)", msg,
                      cli_input_name(m, i, name, sizeof name), sy_model_name(m),
                      input_list(m, list, sizeof list));
    }
    return st;
}

sy_status array_read_inputs(const flag_list *l, const sy_model *m, sy_tensor **x, bool *usage) {
    *usage = false;
    int32_t n = m->n_inputs;
    for (int32_t i = 0; i < n; i++) x[i] = NULL;
    input_arg a[FLAG_LIST_MAX];
    if (l->n < 1) return sy_error(SY_ERR_INVALID_ARGUMENT, "--input: none given");
    /* each checked when the flags were parsed */
    for (int i = 0; i < l->n; i++) split_input(l->v[i], &a[i]);
    int32_t from[MODEL_MAX_IO]; /* input i's --input */
    char list[1024], name[160];
    bool keyless = l->n == 1 && !a[0].name[0] && a[0].npz && !a[0].key;
    if (keyless) {
        for (int32_t i = 0; i < n; i++) from[i] = 0;
    } else if (!a[0].name[0]) {
        if (l->n != n) {
            *usage = true;
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "model '%s' takes %d input%s, in this order: %s; %d --input given: "
                            "give one --input per input in that order, or NAME=FILE for each",
                            sy_model_name(m), n, n == 1 ? "" : "s",
                            input_list(m, list, sizeof list), l->n);
        }
        for (int32_t i = 0; i < n; i++) from[i] = i;
    } else {
        for (int32_t i = 0; i < n; i++) from[i] = -1;
        for (int k = 0; k < l->n; k++) {
            int32_t i = 0;
            while (i < n && strcmp(a[k].name, cli_input_name(m, i, name, sizeof name))) i++;
            if (i == n) {
                *usage = true;
                return sy_error(SY_ERR_INVALID_ARGUMENT,
                                "%s: model '%s' has no input '%s'; its inputs: %s", l->v[k],
                                sy_model_name(m), a[k].name, input_list(m, list, sizeof list));
            }
            from[i] = k;
        }
        for (int32_t i = 0; i < n; i++)
            if (from[i] < 0) {
                *usage = true;
                const char *input = cli_input_name(m, i, name, sizeof name);
                return sy_error(
                    SY_ERR_INVALID_ARGUMENT,
                    "no array for input '%s' of model '%s': give %s=FILE (its inputs: %s)", input,
                    sy_model_name(m), input, input_list(m, list, sizeof list));
            }
    }
    sy_status st = SY_OK;
    for (int32_t i = 0; i < n && !st; i++) {
        char spec[4400];
        const char *key =
            a[from[i]].name[0] ? a[from[i]].name : cli_input_name(m, i, name, sizeof name);
        if (keyless)
            snprintf(spec, sizeof spec, "%s:%s", l->v[0], key); /* which array it was */
        else
            snprintf(spec, sizeof spec, "%s", l->v[from[i]]);
        st = read_one(&a[from[i]], spec, key, m, i, &x[i]);
    }
    for (int32_t i = 1; i < n && !st; i++) {
        int64_t rows = sy_tensor_shape(x[i]).dims[0], first = sy_tensor_shape(x[0]).dims[0];
        if (rows != first)
            st = sy_error(SY_ERR_SHAPE,
                          "input '%s' has %lld samples but input '%s' has %lld; every input "
                          "needs one row per sample",
                          cli_input_name(m, i, name, sizeof name), (long long)rows,
                          cli_input_name(m, 0, list, sizeof list), (long long)first);
    }
    if (st)
        for (int32_t i = 0; i < n; i++) {
            sy_tensor_free(x[i]);
            x[i] = NULL;
        }
    return st;
}

const char *array_check_output(const char *path) {
    size_t n = strlen(path);
    return ends_with(path, n, ".npy") || ends_with(path, n, ".npz") || ends_with(path, n, ".csv")
               ? NULL
               : "--output FILE must end in .npy (a NumPy array file), .npz (an archive of one "
                 "array per output, named after it) or .csv (a header row, then a row per sample)";
}

/* "cls, reg": the model's output layers. */
static const char *output_list(const sy_model *m, char *buf, size_t size) {
    size_t len = 0;
    buf[0] = 0;
    for (int32_t j = 0; j < m->n_outputs && len < size; j++)
        len +=
            (size_t)snprintf(buf + len, size - len, "%s%s", j ? ", " : "", model_output_name(m, j));
    return buf;
}

sy_status array_check_output_for(const char *path, const sy_model *m) {
    char list[1024];
    if (m->n_outputs == 1 || !ends_with(path, strlen(path), ".npy")) return SY_OK;
    return sy_error(SY_ERR_INVALID_ARGUMENT,
                    "%s: model '%s' has %d outputs (%s) and an .npy file holds one array: "
                    "give FILE.npz (one array per output, named after it) or FILE.csv",
                    path, sy_model_name(m), m->n_outputs, output_list(m, list, sizeof list));
}

/* issue 17: predict --output FILE.csv: a header naming each column after
 * its output (NAME for a single value per sample, NAME_0, NAME_1, ... else,
 * values in row-major order), then one row per sample with every output's
 * values in turn, each with %.9g, which gives a float32 back exactly.
 * Written whole or not at all. */
static sy_status write_csv(const char *path, sy_tensor *const *p, int32_t n, const sy_model *m) {
    int64_t rows = sy_tensor_shape(p[0]).dims[0], cols[MODEL_MAX_IO];
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f) return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: no memory for the CSV text", path);
    for (int32_t j = 0; j < n; j++) {
        cols[j] = rows ? sy_tensor_count(p[j]) / rows : 0;
        const char *name = model_output_name(m, j);
        for (int64_t k = 0; k < cols[j]; k++) {
            if (cols[j] == 1)
                fprintf(f, "%s%s", j ? "," : "", name);
            else
                fprintf(f, "%s%s_%lld", j || k ? "," : "", name, (long long)k);
        }
    }
    fputc('\n', f);
    for (int64_t i = 0; i < rows; i++)
        for (int32_t j = 0; j < n; j++) {
            const float *v = (const float *)sy_tensor_data(p[j]) + i * cols[j];
            for (int64_t k = 0; k < cols[j]; k++)
                fprintf(f, "%.9g%c", (double)v[k], j + 1 < n || k + 1 < cols[j] ? ',' : '\n');
        }
    bool ok = !ferror(f);
    fclose(f);
    sy_status st = ok ? io_write_file_atomic(path, (const void *const *)&buf, &size, 1)
                      : sy_error(SY_ERR_OUT_OF_MEMORY, "%s: no memory for the CSV text", path);
    free(buf);
    return st;
}

sy_status array_write_outputs(const char *path, sy_tensor *const *p, int32_t n, const sy_model *m) {
    size_t len = strlen(path);
    if (ends_with(path, len, ".csv")) return write_csv(path, p, n, m);
    if (!ends_with(path, len, ".npz")) return sy_npy_write(path, p[0]);
    const char *names[MODEL_MAX_IO];
    for (int32_t j = 0; j < n; j++) names[j] = model_output_name(m, j);
    return sy_npz_write(path, names, (const sy_tensor *const *)p, n);
}

void array_print_written(FILE *out, const char *path, sy_tensor *const *p, int32_t n,
                         const sy_model *m) {
    fprintf(out, "wrote %s:", path);
    for (int32_t j = 0; j < n; j++) {
        sy_shape s = sy_tensor_shape(p[j]);
        char shape[SY_SHAPE_STR_MAX];
        fprintf(out, "%s%s%s float32 %s", j ? "," : "", n > 1 ? " " : "",
                n > 1 ? model_output_name(m, j) : "", sy_shape_format(&s, shape, sizeof shape));
    }
    fprintf(out, "\n");
}
