/*
 * merge.c - the merge layers: Add, Subtract, Multiply, Average, Maximum,
 * Minimum (elementwise over inputs of one shape, Keras's _Merge) and
 * Concatenate (along an axis).
 *
 * Keras's elementwise merges take inputs whose dimensions agree or are 1
 * (broadcast), of the same rank here; they fold left to right as Keras's
 * _merge_function does (Add: ((a + b) + c), Average: that sum divided by
 * the count), so the float rounding is Keras's. Maximum and Minimum are
 * a + relu(b - a) and a - relu(a - b): the gradient goes to the first
 * input on a tie, as TensorFlow's Maximum gradient does (x >= y), and the
 * value can differ from max(a, b) by one rounding of b - a.
 */
#include "../keras_config.h"

#include <string.h>

static bool is_concat(const sy_layer *l) { return l->kind == SY_LAYER_CONCATENATE; }

static sy_status merge_output_shape(const sy_layer *l, const char *name, const sy_shape *in, int n_in, sy_shape *out) {
    const char *cls = sy_layer_class_name(l->kind);
    char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX];
    if (l->kind == SY_LAYER_SUBTRACT && n_in != 2)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (Subtract) takes exactly 2 inputs, called on %d", name, n_in);
    *out = in[0];
    for (int i = 1; i < n_in; i++) {
        if (in[i].rank != out->rank)
            return sy_error(SY_ERR_SHAPE, "layer '%s' (%s): inputs %s and %s have different ranks", name, cls,
                            keras_shape_str(&in[0], a, sizeof a), keras_shape_str(&in[i], b, sizeof b));
        if (is_concat(l)) {
            int axis = l->axis < 0 ? l->axis + in[0].rank + 1 : l->axis; /* Keras's axis counts the batch */
            if (axis < 1 || axis > in[0].rank)
                return sy_error(SY_ERR_INVALID_ARGUMENT, "layer '%s' (Concatenate): axis %d is out of range for inputs "
                                "%s", name, l->axis, keras_shape_str(&in[0], a, sizeof a));
            for (int d = 0; d < in[i].rank; d++) {
                if (d == axis - 1) continue;
                if (in[i].dims[d] != in[0].dims[d])
                    return sy_error(SY_ERR_SHAPE, "layer '%s' (Concatenate) requires inputs with matching shapes "
                                    "except for the concatenation axis %d; received %s and %s", name, l->axis,
                                    keras_shape_str(&in[0], a, sizeof a), keras_shape_str(&in[i], b, sizeof b));
            }
            out->dims[axis - 1] += in[i].dims[axis - 1];
            continue;
        }
        for (int d = 0; d < in[i].rank; d++) {
            int64_t x = out->dims[d], y = in[i].dims[d];
            if (x != y && x != 1 && y != 1)
                return sy_error(SY_ERR_SHAPE, "layer '%s' (%s): inputs with shapes %s and %s cannot be merged: "
                                "dimension %d is %lld and %lld", name, cls, keras_shape_str(&in[0], a, sizeof a),
                                keras_shape_str(&in[i], b, sizeof b), d + 1, (long long)x, (long long)y);
            if (x == 1) out->dims[d] = y;
        }
    }
    return SY_OK;
}

static sy_node merge_build(sy_graph *g, const sy_layer *l, const sy_node *in, int n_in, const sy_node *w,
                           const layer_ctx *ctx) {
    (void)w, (void)ctx;
    if (is_concat(l)) {
        int rank = sy_graph_shape(g, in[0]).rank;
        return sy_graph_concat(g, in, n_in, l->axis < 0 ? l->axis + rank : l->axis);
    }
    sy_node y = in[0];
    for (int i = 1; i < n_in; i++) {
        switch (l->kind) {
        case SY_LAYER_SUBTRACT: y = sy_graph_sub(g, y, in[i]); break;
        case SY_LAYER_MULTIPLY: y = sy_graph_mul(g, y, in[i]); break;
        case SY_LAYER_MAXIMUM: y = sy_graph_add(g, y, sy_graph_relu(g, sy_graph_sub(g, in[i], y))); break;
        case SY_LAYER_MINIMUM: y = sy_graph_sub(g, y, sy_graph_relu(g, sy_graph_sub(g, y, in[i]))); break;
        default: y = sy_graph_add(g, y, in[i]); break; /* Add, Average */
        }
    }
    if (l->kind == SY_LAYER_AVERAGE)
        y = sy_graph_div(g, y, sy_graph_fill(g, SY_F32, sy_shape_of(0), (double)n_in));
    return y;
}

static const char *const concat_keys[] = {"axis", NULL};

static sy_status concat_read(const rd *r, sy_layer *l) { return rd_i32(r, "axis", false, -1, INT32_MIN, &l->axis); }
static sy_status merge_read(const rd *r, sy_layer *l) {
    (void)r, (void)l;
    return SY_OK;
}
static void concat_write(jw *w, const sy_layer *l, const char **bad) {
    (void)bad;
    jw_key(w, "axis");
    jw_int(w, l->axis);
}
static void merge_write(jw *w, const sy_layer *l, const char **bad) { (void)w, (void)l, (void)bad; }

static sy_layer merge_base(sy_layer_kind kind) {
    sy_layer l;
    memset(&l, 0, sizeof l);
    l.kind = kind;
    l.axis = -1;
    return l;
}

sy_layer sy_layer_add(void) { return merge_base(SY_LAYER_ADD); }
sy_layer sy_layer_subtract(void) { return merge_base(SY_LAYER_SUBTRACT); }
sy_layer sy_layer_multiply(void) { return merge_base(SY_LAYER_MULTIPLY); }
sy_layer sy_layer_average(void) { return merge_base(SY_LAYER_AVERAGE); }
sy_layer sy_layer_maximum(void) { return merge_base(SY_LAYER_MAXIMUM); }
sy_layer sy_layer_minimum(void) { return merge_base(SY_LAYER_MINIMUM); }
sy_layer sy_layer_concatenate(int32_t axis) {
    sy_layer l = merge_base(SY_LAYER_CONCATENATE);
    l.axis = axis;
    return l;
}

#define MERGE(var, KIND, cls, pfx, lo, ctor)                                                                           \
    const layer_impl var = {.kind = KIND,                                                                              \
                            .class_name = cls,                                                                         \
                            .prefix = pfx,                                                                             \
                            .output_shape = merge_output_shape,                                                        \
                            .weights = NULL,                                                                           \
                            .build = merge_build,                                                                      \
                            .min_inputs = lo,                                                                          \
                            .max_inputs = LAYER_MAX_INPUTS,                                                            \
                            .json_keys = NULL,                                                                         \
                            .json_read = merge_read,                                                                   \
                            .json_write = merge_write,                                                                 \
                            .defaults = ctor}

MERGE(keras_add, SY_LAYER_ADD, "Add", "add", 1, sy_layer_add);
MERGE(keras_subtract, SY_LAYER_SUBTRACT, "Subtract", "subtract", 2, sy_layer_subtract);
MERGE(keras_multiply, SY_LAYER_MULTIPLY, "Multiply", "multiply", 1, sy_layer_multiply);
MERGE(keras_average, SY_LAYER_AVERAGE, "Average", "average", 1, sy_layer_average);
MERGE(keras_maximum, SY_LAYER_MAXIMUM, "Maximum", "maximum", 1, sy_layer_maximum);
MERGE(keras_minimum, SY_LAYER_MINIMUM, "Minimum", "minimum", 1, sy_layer_minimum);

static sy_layer concat_defaults(void) { return sy_layer_concatenate(-1); }

const layer_impl keras_concatenate = {.kind = SY_LAYER_CONCATENATE,
                                      .class_name = "Concatenate",
                                      .prefix = "concatenate",
                                      .output_shape = merge_output_shape,
                                      .weights = NULL,
                                      .build = merge_build,
                                      .min_inputs = 1,
                                      .max_inputs = LAYER_MAX_INPUTS,
                                      .json_keys = concat_keys,
                                      .json_read = concat_read,
                                      .json_write = concat_write,
                                      .defaults = concat_defaults};
