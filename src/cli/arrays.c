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
 * a torn file or destroys one already there.
 */
#include "cli_internal.h"

#include "core/core_internal.h" /* sy_error */

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
    return ends_with(path, strlen(path), ".npy") ? NULL : "--output FILE must end in .npy (a NumPy array file)";
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
