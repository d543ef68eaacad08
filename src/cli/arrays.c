/*
 * arrays.c - a user's arrays in and out of the commands: `predict --input`
 * reads the samples from a NumPy file, `--output` writes the model's
 * output as one.
 *
 * An input is FILE.npy (np.save) or FILE.npz:KEY, the array KEY of an
 * archive np.savez wrote (the part after the last ':' that follows ".npz";
 * a path that itself holds ".npz:" is not expected). The reader (data's
 * sy_npy_read) gives float32, float64, int32 or uint8 tensors; fit.c's
 * feeding converts each value to the model's input type, as Keras's
 * predict casts its input, so any integer or float dtype numpy writes is
 * taken. What it cannot take is named with the file: a dtype that is not a
 * number (strings, objects, structured arrays), a shape that is not
 * (samples, the model's input shape...), a missing key (the keys present
 * are listed), a truncated or damaged file.
 *
 * The output is float32 (samples, output shape...), model.predict's array,
 * written whole or not at all (sy_npy_write), so a failed run never leaves
 * a torn file or destroys one already there; or, for FILE.csv, as text:
 * a header row naming the columns, a row per sample (issue 17).
 */
#include "cli_internal.h"

#include "core/core_internal.h" /* sy_error */
#include "io/io_internal.h"     /* io_write_file_atomic */

#include <stdlib.h>
#include <string.h>

static bool ends_with(const char *s, size_t n, const char *suffix) {
    size_t k = strlen(suffix);
    return n >= k && !memcmp(s + n - k, suffix, k);
}

const char *array_check_input(const char *spec) {
    const char *colon = strrchr(spec, ':');
    size_t n = strlen(spec);
    if (colon && ends_with(spec, (size_t)(colon - spec), ".npz"))
        return colon[1] ? NULL : "--input FILE.npz:KEY needs the KEY of the array after the ':'";
    if (ends_with(spec, n, ".npz")) return "--input FILE.npz needs the array's key: FILE.npz:KEY (e.g. data.npz:x_test)";
    if (ends_with(spec, n, ".npy")) return NULL;
    return "--input takes a NumPy file: FILE.npy, or FILE.npz:KEY for the array KEY of an archive";
}

const char *array_check_output(const char *path) {
    size_t n = strlen(path);
    return ends_with(path, n, ".npy") || ends_with(path, n, ".csv")
               ? NULL
               : "--output FILE must end in .npy (a NumPy array file) or .csv (a header row, then a row per sample)";
}

/* issue 17: predict --output FILE.csv: a header naming each column
 * (NAME for a single value per sample, NAME_0, NAME_1, ... else, values in
 * row-major order), then one row per sample, each value with %.9g, which
 * gives a float32 back exactly. Written whole or not at all. */
static sy_status write_csv(const char *path, const sy_tensor *p, const char *name) {
    sy_shape s = sy_tensor_shape(p);
    int64_t rows = s.rank ? s.dims[0] : 1, cols = rows ? sy_tensor_count(p) / rows : 0;
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f) return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: no memory for the CSV text", path);
    for (int64_t j = 0; j < cols; j++) {
        if (cols == 1) fprintf(f, "%s", name);
        else fprintf(f, "%s%s_%lld", j ? "," : "", name, (long long)j);
    }
    fputc('\n', f);
    const float *v = sy_tensor_data(p);
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++) fprintf(f, "%.9g%c", (double)v[i * cols + j], j + 1 < cols ? ',' : '\n');
    bool ok = !ferror(f);
    fclose(f);
    sy_status st = ok ? io_write_file_atomic(path, (const void *const *)&buf, &size, 1)
                      : sy_error(SY_ERR_OUT_OF_MEMORY, "%s: no memory for the CSV text", path);
    free(buf);
    return st;
}

sy_status array_write_output(const char *path, const sy_tensor *p, const sy_model *m) {
    if (!ends_with(path, strlen(path), ".csv")) return sy_npy_write(path, p);
    int32_t layers = sy_model_layer_count(m);
    const sy_layer *last = layers ? sy_model_layer(m, layers - 1) : NULL;
    return write_csv(path, p, last && last->name ? last->name : "output");
}

sy_status array_read(const char *spec, sy_tensor **out) {
    *out = NULL;
    const char *colon = strrchr(spec, ':');
    if (!colon || !ends_with(spec, (size_t)(colon - spec), ".npz")) return sy_npy_read(spec, out);
    char path[4096];
    if ((size_t)(colon - spec) >= sizeof path)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "--input: the path is longer than %zu bytes", sizeof path - 1);
    memcpy(path, spec, (size_t)(colon - spec));
    path[colon - spec] = '\0';
    sy_npz *z;
    sy_status st = sy_npz_open(path, &z);
    if (st) return st;
    st = sy_npz_get(z, colon + 1, out);
    sy_npz_close(z);
    return st;
}

/* "(3, 28, 28) uint8" for messages. */
static const char *describe(const sy_tensor *t, char *buf, size_t size) {
    sy_shape s = sy_tensor_shape(t);
    char shape[SY_SHAPE_STR_MAX];
    snprintf(buf, size, "%s %s", sy_shape_format(&s, shape, sizeof shape), sy_dtype_name(sy_tensor_dtype(t)));
    return buf;
}

sy_status array_check_samples(const sy_tensor *x, const char *spec, const sy_model *m) {
    sy_shape xs = sy_tensor_shape(x), in = sy_model_input_shape(m);
    bool ok = xs.rank == in.rank + 1 && xs.dims[0] > 0;
    for (int i = 0; ok && i < in.rank; i++) ok = xs.dims[i + 1] == in.dims[i];
    if (ok) return SY_OK;
    char a[96], b[SY_SHAPE_STR_MAX + 8];
    sy_shape want = in;
    want.rank = in.rank + 1;
    want.dims[0] = xs.rank ? xs.dims[0] : 1;
    for (int i = 0; i < in.rank; i++) want.dims[i + 1] = in.dims[i];
    int k = snprintf(b, sizeof b, "(None");
    for (int i = 0; i < in.rank; i++) k += snprintf(b + k, sizeof b - (size_t)k, ", %lld", (long long)in.dims[i]);
    snprintf(b + k, sizeof b - (size_t)k, ")");
    if (xs.rank >= 1 && xs.dims[0] == 0)
        return sy_error(SY_ERR_SHAPE, "%s: the array %s holds no samples; model '%s' takes inputs of shape %s", spec,
                        describe(x, a, sizeof a), sy_model_name(m), b);
    char w[SY_SHAPE_STR_MAX];
    bool same_count = xs.rank >= 1 && sy_shape_count(&xs) / xs.dims[0] == sy_shape_count(&in);
    return sy_error(SY_ERR_SHAPE, "%s: the array is %s, but model '%s' takes inputs of shape %s (samples first)%s%s",
                    spec, describe(x, a, sizeof a), sy_model_name(m), b,
                    same_count ? "; the sizes agree: reshape it to " : "",
                    same_count ? sy_shape_format(&want, w, sizeof w) : "");
}
