/*
 * preprocessing_normalization.c - Keras's Normalization preprocessing layer
 * (keras.layers.Normalization, issue 15: EfficientNet opens with one):
 *
 *   y = (x - mean) / max(sqrt(variance), 1e-7)     (invert: mean + x * max(...))
 *
 * with one mean and variance per position of the kept axes (`axis`,
 * default the last) broadcast over the others, as tf.keras 2.15 computes
 * it (backend.epsilon() is 1e-7). The statistics are either constants
 * given as mean= and variance= (then the layer has no weights) or the
 * layer's three non-trainable weights, Keras's mean (zeros), variance
 * (ones) and count (an int64 scalar, 0), which sy_model_adapt_normalization
 * sets as Keras's adapt() does and which .h5 files carry.
 *
 * The divisor is computed as rsqrt(max(variance, 1e-14)): max(sqrt(v), e)
 * is sqrt(max(v, e^2)) for v >= 0, and the graph has rsqrt and not sqrt.
 *
 * count is int64 in Keras. systolic's variables are float32, so count is
 * held as float32 -- exact up to 2^24 values, rounded beyond, which only
 * adapt() uses, and Keras itself takes count / (count + n) in float32 --
 * and .h5 files get it as int64 (layer_weight.int64), as Keras writes it
 * (docs/design/keras-applications.md).
 */
#include "../keras_config.h"

#include <math.h>
#include <string.h>

#define NORMALIZATION_EPSILON 1e-7 /* Keras's backend.epsilon() */

sy_layer sy_layer_normalization(void) {
    sy_layer l = sy_layer_activation(SY_ACTIVATION_LINEAR);
    l.kind = SY_LAYER_NORMALIZATION;
    l.axes[0] = -1;
    l.n_axes = 1;
    memset(&l.mean, 0, sizeof l.mean);
    memset(&l.variance, 0, sizeof l.variance);
    l.invert = false;
    return l;
}

static sy_layer normalization_defaults(void) { return sy_layer_normalization(); }

/* The kept axes in the batch shape (rank with the batch axis), sorted, and
 * the shape of the mean and variance (their dimensions). */
typedef struct kept {
    int32_t axis[SY_MAX_RANK];
    int n;
    sy_shape stat; /* the weights' shape */
    sy_shape bcast; /* the input's rank without the batch axis: 1 but on the kept axes */
} kept;

static sy_status kept_axes(const sy_layer *l, const char *name, const sy_shape *in, kept *k) {
    char s[SY_SHAPE_STR_MAX];
    int ndim = in->rank + 1;
    memset(k, 0, sizeof *k);
    k->bcast.rank = in->rank;
    for (int i = 0; i < in->rank; i++) k->bcast.dims[i] = 1;
    if (l->n_axes < 0 || l->n_axes > SY_MAX_RANK)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (Normalization): %d axes", name, l->n_axes);
    bool seen[SY_MAX_RANK + 1] = {false};
    for (int i = 0; i < l->n_axes; i++) {
        int32_t a = l->axes[i];
        if (a < -ndim || a >= ndim)
            return sy_error(SY_ERR_SHAPE,
                            "layer '%s' (Normalization): All `axis` values must be in the range [-ndim, ndim). Found "
                            "ndim: `%d`, axis: %d (input %s)",
                            name, ndim, a, keras_shape_str(in, s, sizeof s));
        if (a < 0) a += ndim;
        if (a == 0)
            return sy_error(SY_ERR_SHAPE,
                            "layer '%s' (Normalization): All `axis` values to be kept must have known shape; axis %d "
                            "is the batch axis of the input %s",
                            name, l->axes[i], keras_shape_str(in, s, sizeof s));
        seen[a] = true;
    }
    for (int a = 1; a < ndim; a++)
        if (seen[a]) {
            k->axis[k->n++] = a;
            k->stat.dims[k->stat.rank++] = in->dims[a - 1];
            k->bcast.dims[a - 1] = in->dims[a - 1];
        }
    return SY_OK;
}

static sy_status normalization_output_shape(const sy_layer *l, const char *name, const sy_shape *in, int n_in,
                                            sy_shape *out) {
    (void)n_in;
    kept k;
    sy_status st = kept_axes(l, name, in, &k);
    if (st) return st;
    if ((l->mean.n > 0) != (l->variance.n > 0))
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "layer '%s' (Normalization): When setting values directly, both `mean` and `variance` must "
                        "be set. Got mean: %s and variance: %s",
                        name, l->mean.n ? "a value" : "None", l->variance.n ? "a value" : "None");
    const sy_numbers *v[2] = {&l->mean, &l->variance};
    int64_t last = k.stat.rank ? k.stat.dims[k.stat.rank - 1] : 1;
    for (int i = 0; i < 2; i++) {
        if (v[i]->n > SY_NUMBERS_MAX)
            return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (Normalization): %s has %d values", name,
                            i ? "variance" : "mean", v[i]->n);
        /* numpy: value * ones(kept shape), then reshaped to the broadcast shape */
        if (v[i]->list && v[i]->n != 1 && v[i]->n != last)
            return sy_error(SY_ERR_SHAPE,
                            "layer '%s' (Normalization): %s has %d values, which do not broadcast against the kept "
                            "axes' shape %s",
                            name, i ? "variance" : "mean", v[i]->n, sy_shape_format(&k.stat, (char[SY_SHAPE_STR_MAX]){0},
                                                                                   SY_SHAPE_STR_MAX));
        for (int j = 0; i == 1 && j < v[i]->n; j++)
            if (v[i]->v[j] < 0)
                return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (Normalization): variance %g is negative", name,
                                v[i]->v[j]);
    }
    *out = *in;
    return SY_OK;
}

static int normalization_weights(const sy_layer *l, const sy_shape *in, layer_weight *w) {
    if (l->mean.n > 0) return 0; /* constants */
    kept k;
    if (kept_axes(l, "?", in, &k)) return 0;
    sy_init ones = sy_init_zeros();
    ones.kind = SY_INIT_ONES;
    w[0] = (layer_weight){.name = "mean", .shape = k.stat, .init = sy_init_zeros(), .non_trainable = true};
    w[1] = (layer_weight){.name = "variance", .shape = k.stat, .init = ones, .non_trainable = true};
    w[2] = (layer_weight){.name = "count", .shape = sy_shape_of(0), .init = sy_init_zeros(), .non_trainable = true,
                          .int64 = true};
    return 3;
}

/* A constant of the kept axes' broadcast shape: value * ones(stat), reshaped. */
static sy_node constant(sy_graph *g, const sy_numbers *v, const kept *k) {
    sy_node c;
    if (!v->list || v->n == 1) {
        c = sy_graph_fill(g, SY_F32, k->stat, (double)(float)v->v[0]);
    } else {
        sy_node parts[SY_NUMBERS_MAX];
        for (int i = 0; i < v->n; i++) parts[i] = sy_graph_fill(g, SY_F32, sy_shape_of(1, (int64_t)1), (double)(float)v->v[i]);
        c = sy_graph_concat(g, parts, v->n, 0);
        if (k->stat.rank != 1) c = sy_graph_broadcast_to(g, c, k->stat);
    }
    return c;
}

static sy_node normalization_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in, const sy_node *w,
                                   const layer_ctx *ctx) {
    (void)n_in, (void)ctx;
    sy_shape xs = sy_graph_shape(g, in[0]);
    sy_shape s = xs;
    s.rank--;
    for (int i = 0; i < s.rank; i++) s.dims[i] = xs.dims[i + 1];
    kept k;
    if (kept_axes(l, "?", &s, &k)) return SY_NONE;
    sy_node mean = l->mean.n ? constant(g, &l->mean, &k) : w[0];
    sy_node var = l->mean.n ? constant(g, &l->variance, &k) : w[1];
    /* to the batch shape's rank: (1, 1 or the kept dimensions ...) */
    sy_shape b = keras_batch_shape(1, &k.bcast);
    mean = sy_graph_reshape(g, mean, b);
    var = sy_graph_reshape(g, var, b);
    sy_node floor = sy_graph_fill(g, SY_F32, sy_shape_of(0), NORMALIZATION_EPSILON * NORMALIZATION_EPSILON);
    sy_node v = sy_graph_add(g, sy_graph_relu(g, sy_graph_sub(g, var, floor)), floor); /* max(var, 1e-14) */
    sy_node inv = sy_graph_rsqrt(g, v);
    if (l->invert) return sy_graph_add(g, mean, sy_graph_div(g, in[0], inv));
    return sy_graph_mul(g, sy_graph_sub(g, in[0], mean), inv);
}

/* ---- model JSON: axis (a list, as Keras keeps a tuple), invert, mean, variance ---- */

static const char *const normalization_keys[] = {"axis", "invert", "mean", "variance", NULL};

static sy_status read_stat(const rd *r, const char *key, sy_numbers *out) {
    json_t *v = rd_get(r, key);
    memset(out, 0, sizeof *out);
    if (!v || json_is_null(v)) return SY_OK;
    sy_numbers none;
    memset(&none, 0, sizeof none);
    return rd_numbers(r, key, none, out);
}

static sy_status normalization_read(const rd *r, sy_layer *l) {
    json_t *v = rd_get(r, "axis");
    if (v) {
        if (json_is_null(v)) {
            l->n_axes = 0;
        } else if (json_is_integer(v)) {
            l->axes[0] = (int32_t)json_integer_value(v);
            l->n_axes = 1;
        } else if (json_is_array(v) && json_array_size(v) <= SY_MAX_RANK) {
            l->n_axes = 0;
            size_t i;
            json_t *e;
            json_array_foreach(v, i, e) {
                if (!json_is_integer(e) || json_integer_value(e) < -SY_MAX_RANK - 1 ||
                    json_integer_value(e) > SY_MAX_RANK)
                    return rd_err(r, SY_ERR_INVALID_ARGUMENT, "axis must be a list of integers, got %s",
                                  keras_json_show(v).s);
                l->axes[l->n_axes++] = (int32_t)json_integer_value(e);
            }
        } else {
            return rd_err(r, SY_ERR_INVALID_ARGUMENT, "axis must be null, an integer or a list of integers, got %s",
                          keras_json_show(v).s);
        }
    }
    sy_status st;
    if ((st = rd_bool(r, "invert", false, &l->invert)) || (st = read_stat(r, "mean", &l->mean)) ||
        (st = read_stat(r, "variance", &l->variance)))
        return st;
    return SY_OK;
}

static void normalization_write(jw *w, const sy_layer *l, const char **bad) {
    (void)bad;
    jw_key(w, "axis");
    jw_open(w, true);
    for (int i = 0; i < l->n_axes; i++) jw_int(w, l->axes[i]);
    jw_close(w);
    jw_key(w, "invert");
    jw_bool(w, l->invert);
    const struct {
        const char *key;
        const sy_numbers *v;
    } stats[2] = {{"mean", &l->mean}, {"variance", &l->variance}};
    for (int i = 0; i < 2; i++) {
        jw_key(w, stats[i].key);
        if (stats[i].v->n) jw_numbers(w, stats[i].v);
        else jw_null(w);
    }
}

const layer_impl keras_normalization = {
    .kind = SY_LAYER_NORMALIZATION,
    .class_name = "Normalization",
    .prefix = "normalization",
    .output_shape = normalization_output_shape,
    .weights = normalization_weights,
    .build = normalization_build,
    .json_keys = normalization_keys,
    .json_read = normalization_read,
    .json_write = normalization_write,
    .defaults = normalization_defaults,
};

/* ---- adapt ------------------------------------------------------------------------------ */

sy_status sy_model_adapt_normalization(sy_model *m, const char *layer, const sy_tensor *data, int64_t batch_size) {
    int64_t li = -1;
    for (int64_t i = 0; i < m->n_layers && li < 0; i++)
        if (strcmp(m->layers[i].name, layer) == 0) li = i;
    if (li < 0) return sy_error(SY_ERR_NOT_FOUND, "model '%s' has no layer '%s'", m->name, layer);
    model_layer *L = &m->layers[li];
    if (L->cfg.kind != SY_LAYER_NORMALIZATION)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' is a %s, not a Normalization layer", layer,
                        sy_layer_class_name(L->cfg.kind));
    if (L->cfg.mean.n)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "layer '%s': Cannot `adapt` a Normalization layer that is initialized with static `mean` and "
                        "`variance`",
                        layer);
    if (L->n_weights != 3) return sy_error(SY_ERR_STATE, "layer '%s' is not built", layer);
    if (batch_size <= 0) batch_size = 32; /* Keras's default */
    char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
    sy_shape ds = sy_tensor_shape(data);
    bool ok = ds.rank == L->in_shape.rank + 1 && ds.dims[0] >= 1 && sy_tensor_dtype(data) == SY_F32;
    for (int i = 0; ok && i < L->in_shape.rank; i++) ok = ds.dims[i + 1] == L->in_shape.dims[i];
    if (!ok)
        return sy_error(SY_ERR_SHAPE,
                        "layer '%s' (Normalization): adapt takes float32 data of shape (samples, %s without the "
                        "batch axis); got %s %s",
                        layer, keras_shape_str(&L->in_shape, a, sizeof a), sy_dtype_name(sy_tensor_dtype(data)),
                        sy_shape_format(&ds, b, sizeof b));
    kept k;
    sy_status st = kept_axes(&L->cfg, layer, &L->in_shape, &k);
    if (st) return st;
    float *mean = sy_vars_data(m->vars, L->weight_var[0]), *var = sy_vars_data(m->vars, L->weight_var[1]),
          *count = sy_vars_data(m->vars, L->weight_var[2]);
    int64_t n_stat = sy_shape_count(&k.stat), per_sample = sy_shape_count(&L->in_shape);
    /* each element's statistic index: its coordinates on the kept axes */
    int64_t stride[SY_MAX_RANK];
    for (int i = L->in_shape.rank - 1, s = 1; i >= 0; i--) stride[i] = s, s *= (int)L->in_shape.dims[i];
    double *bsum = sy_calloc((size_t)n_stat * 2, sizeof *bsum);
    if (!bsum) return sy_error(SY_ERR_OUT_OF_MEMORY, "adapt: out of memory");
    double *bsq = bsum + n_stat;
    const float *x = sy_tensor_data(data);
    for (int64_t start = 0; start < ds.dims[0]; start += batch_size) {
        int64_t rows = ds.dims[0] - start < batch_size ? ds.dims[0] - start : batch_size;
        memset(bsum, 0, (size_t)n_stat * 2 * sizeof *bsum);
        for (int64_t r = 0; r < rows; r++)
            for (int64_t e = 0; e < per_sample; e++) {
                int64_t s = 0;
                for (int q = 0; q < k.n; q++) {
                    int ax = k.axis[q] - 1;
                    s = s * L->in_shape.dims[ax] + (e / stride[ax]) % L->in_shape.dims[ax];
                }
                bsum[s] += x[(start + r) * per_sample + e];
            }
        int64_t batch_count = rows * per_sample / n_stat;
        for (int64_t s = 0; s < n_stat; s++) bsum[s] /= (double)batch_count;
        for (int64_t r = 0; r < rows; r++) /* tf.nn.moments: the mean of the squared differences */
            for (int64_t e = 0; e < per_sample; e++) {
                int64_t s = 0;
                for (int q = 0; q < k.n; q++) {
                    int ax = k.axis[q] - 1;
                    s = s * L->in_shape.dims[ax] + (e / stride[ax]) % L->in_shape.dims[ax];
                }
                double d = x[(start + r) * per_sample + e] - bsum[s];
                bsq[s] += d * d;
            }
        /* Keras's update_state, in float32 as it computes it */
        double total = (double)batch_count + (double)*count;
        float batch_weight = (float)batch_count / (float)total, existing = 1.0f - batch_weight;
        for (int64_t s = 0; s < n_stat; s++) {
            float bm = (float)bsum[s], bv = (float)(bsq[s] / (double)batch_count);
            float tm = mean[s] * existing + bm * batch_weight;
            float tv = (var[s] + (mean[s] - tm) * (mean[s] - tm)) * existing + (bv + (bm - tm) * (bm - tm)) * batch_weight;
            mean[s] = tm;
            var[s] = tv;
        }
        *count = (float)total;
    }
    sy_free(bsum);
    return SY_OK;
}
