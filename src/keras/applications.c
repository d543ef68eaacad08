/*
 * applications.c - keras.applications' VGG16 and ResNet50 (issue 15),
 * built through the Functional C API layer by layer as tf.keras 2.15's
 * vgg16.py and resnet.py build them: the same layers in the same order,
 * with Keras's names ("block1_conv1", "conv2_block1_0_conv"), arguments
 * and initializers, so the JSON, the summary, the weights' order and the
 * .h5 files are Keras's own.
 *
 * The argument checks are imagenet_utils.obtain_input_shape's and the
 * constructors', with Keras's messages. What systolic cannot do is refused
 * by name: downloading the imagenet weights, and an input of unknown size
 * (every plan has static shapes).
 */
#include "systolic/applications.h"

#include "keras_internal.h"

#include <string.h>

sy_applications_options sy_applications_options_default(void) {
    sy_applications_options o;
    memset(&o, 0, sizeof o);
    o.include_top = true;
    o.classes = 1000;
    o.classifier_activation = "softmax";
    return o;
}

/* The graph under construction: the model and its newest tensor. */
typedef struct app {
    sy_model *m;
    int32_t x;
    sy_status st;
} app;

/* layer(x) named `name`, unless an earlier call failed. */
static int32_t call(app *a, sy_layer l, const char *name, int32_t x) {
    int32_t y = -1;
    if (a->st) return -1;
    l.name = name;
    a->st = sy_model_call(a->m, &l, &x, 1, &y);
    return y;
}

static sy_layer conv(int32_t filters, int32_t k, int32_t stride, sy_padding padding, sy_activation act) {
    sy_layer l = sy_layer_conv2d(filters, k, k);
    l.strides[0] = l.strides[1] = stride;
    l.padding = padding;
    l.activation = act;
    return l;
}

/* BatchNormalization(axis=3, epsilon=1.001e-5), as resnet.py writes it. */
static sy_layer resnet_bn(void) {
    sy_layer l = sy_layer_batch_normalization();
    l.axes[0] = 3;
    l.n_axes = 1;
    l.epsilon = 1.001e-5;
    return l;
}

/* The checks every constructor makes (Keras's ValueErrors), and the input
 * shape: the default (224, 224, 3) when none is given. */
static sy_status check_options(const char *model, const sy_applications_options *o, sy_activation *act,
                               sy_shape *shape) {
    char s[SY_SHAPE_STR_MAX];
    if (o->weights && strcmp(o->weights, "imagenet") == 0) {
        if (o->include_top && o->classes != 1000)
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "%s: If using `weights` as `\"imagenet\"` with `include_top` as true, `classes` should "
                            "be 1000.  Received `classes=%d`",
                            model, (int)o->classes);
        return sy_error(SY_ERR_UNSUPPORTED,
                        "%s: weights 'imagenet' is not supported: systolic downloads no weights; give weights NULL "
                        "(Keras's None) or the path of a weights .h5",
                        model);
    }
    if (o->include_top && o->classes < 1)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: classes must be at least 1; Received: classes=%d", model,
                        (int)o->classes);
    *act = SY_ACTIVATION_LINEAR;
    if (o->classifier_activation) {
        sy_status st = sy_activation_from_name(o->classifier_activation, act);
        if (st) return st;
    }
    if (!o->include_top && o->pooling && strcmp(o->pooling, "avg") != 0 && strcmp(o->pooling, "max") != 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "%s: pooling '%s' is not one of None, 'avg' or 'max' (Keras would ignore it and return the "
                        "last block's output)",
                        model, o->pooling);
    *shape = o->input_shape;
    if (shape->rank == 0) {
        if (!o->include_top)
            return sy_error(SY_ERR_UNSUPPORTED,
                            "%s: without the top, Keras's default input_shape is (None, None, 3), an image of any "
                            "size, which systolic cannot compile (static shapes): give input_shape",
                            model);
        *shape = sy_shape_of(3, (int64_t)224, (int64_t)224, (int64_t)3);
        return SY_OK;
    }
    if (shape->rank != 3)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: `input_shape` must be a tuple of three integers; Received: %s",
                        model, sy_shape_format(shape, s, sizeof s));
    if (shape->dims[0] < 32 || shape->dims[1] < 32)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "%s: Input size must be at least 32x32; Received: input_shape=(%lld, %lld, %lld)", model,
                        (long long)shape->dims[0], (long long)shape->dims[1], (long long)shape->dims[2]);
    if (shape->dims[2] < 1)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: input_shape=(%lld, %lld, %lld) has no channels", model,
                        (long long)shape->dims[0], (long long)shape->dims[1], (long long)shape->dims[2]);
    if (shape->dims[2] != 1 && shape->dims[2] != 3)
        sy_log(SY_LOG_WARNING,
               "%s: This model usually expects 1 or 3 input channels. However, it was passed an input_shape with "
               "%lld input channels.",
               model, (long long)shape->dims[2]);
    return SY_OK;
}

/* The Functional model `name` on Input(shape), seeded. */
static sy_status begin(app *a, const char *name, const sy_applications_options *o, sy_shape shape) {
    memset(a, 0, sizeof *a);
    sy_status st = sy_model_new_functional(name, &a->m);
    if (st) return st;
    sy_model_set_seed(a->m, o->seed);
    if ((st = sy_model_input(a->m, shape, NULL, NULL, &a->x))) {
        sy_model_free(a->m);
        a->m = NULL;
    }
    return st;
}

/* Model(inputs, x), then the weights of a path, as Keras's load_weights. */
static sy_status finish(app *a, const sy_applications_options *o, sy_model **out) {
    sy_status st = a->st;
    if (!st) st = sy_model_set_outputs(a->m, &a->x, 1);
    if (!st && o->weights) st = sy_model_load_weights(a->m, o->weights);
    if (st) {
        sy_model_free(a->m);
        return st;
    }
    *out = a->m;
    return SY_OK;
}

/* The Dense "predictions" layer of the top. */
static sy_layer predictions(const sy_applications_options *o, sy_activation act) {
    sy_layer l = sy_layer_dense(o->classes);
    l.activation = act;
    return l;
}

sy_status sy_applications_vgg16(const sy_applications_options *options, sy_model **out) {
    sy_applications_options o = options ? *options : sy_applications_options_default();
    sy_activation act;
    sy_shape shape;
    app a;
    sy_status st = check_options("VGG16", &o, &act, &shape);
    if (st || (st = begin(&a, "vgg16", &o, shape))) return st;
    /* (filters, convolutions) of the five blocks */
    static const int32_t blocks[5][2] = {{64, 2}, {128, 2}, {256, 3}, {512, 3}, {512, 3}};
    char name[LAYER_NAME_MAX];
    for (int b = 0; b < 5; b++) {
        for (int c = 0; c < blocks[b][1]; c++) {
            snprintf(name, sizeof name, "block%d_conv%d", b + 1, c + 1);
            a.x = call(&a, conv(blocks[b][0], 3, 1, SY_PADDING_SAME, SY_ACTIVATION_RELU), name, a.x);
        }
        sy_layer pool = sy_layer_max_pooling2d(2, 2);
        pool.strides[0] = pool.strides[1] = 2;
        snprintf(name, sizeof name, "block%d_pool", b + 1);
        a.x = call(&a, pool, name, a.x);
    }
    if (o.include_top) {
        sy_layer fc = sy_layer_dense(4096);
        fc.activation = SY_ACTIVATION_RELU;
        a.x = call(&a, sy_layer_flatten(), "flatten", a.x);
        a.x = call(&a, fc, "fc1", a.x);
        a.x = call(&a, fc, "fc2", a.x);
        a.x = call(&a, predictions(&o, act), "predictions", a.x);
    } else if (o.pooling) {
        /* vgg16.py leaves these two unnamed: global_average_pooling2d, ... */
        bool avg = strcmp(o.pooling, "avg") == 0;
        a.x = call(&a, avg ? sy_layer_global_average_pooling2d() : sy_layer_global_max_pooling2d(), NULL, a.x);
    }
    return finish(&a, &o, out);
}

/* resnet.py's block1: a bottleneck residual block named `name` (conv2_block1). */
static void resnet_block(app *a, int32_t filters, int32_t stride, bool conv_shortcut, const char *name) {
    char n[LAYER_NAME_MAX];
#define NAMED(suffix) (snprintf(n, sizeof n, "%.40s%s", name, suffix), n)
    int32_t shortcut = a->x;
    if (conv_shortcut) {
        shortcut = call(a, conv(4 * filters, 1, stride, SY_PADDING_VALID, SY_ACTIVATION_LINEAR), NAMED("_0_conv"), a->x);
        shortcut = call(a, resnet_bn(), NAMED("_0_bn"), shortcut);
    }
    int32_t x = call(a, conv(filters, 1, stride, SY_PADDING_VALID, SY_ACTIVATION_LINEAR), NAMED("_1_conv"), a->x);
    x = call(a, resnet_bn(), NAMED("_1_bn"), x);
    x = call(a, sy_layer_activation(SY_ACTIVATION_RELU), NAMED("_1_relu"), x);
    x = call(a, conv(filters, 3, 1, SY_PADDING_SAME, SY_ACTIVATION_LINEAR), NAMED("_2_conv"), x);
    x = call(a, resnet_bn(), NAMED("_2_bn"), x);
    x = call(a, sy_layer_activation(SY_ACTIVATION_RELU), NAMED("_2_relu"), x);
    x = call(a, conv(4 * filters, 1, 1, SY_PADDING_VALID, SY_ACTIVATION_LINEAR), NAMED("_3_conv"), x);
    x = call(a, resnet_bn(), NAMED("_3_bn"), x);
    if (!a->st) {
        sy_layer add = sy_layer_add();
        add.name = NAMED("_add");
        int32_t both[2] = {shortcut, x};
        a->st = sy_model_call(a->m, &add, both, 2, &x);
    }
    a->x = call(a, sy_layer_activation(SY_ACTIVATION_RELU), NAMED("_out"), x);
#undef NAMED
}

sy_status sy_applications_resnet50(const sy_applications_options *options, sy_model **out) {
    sy_applications_options o = options ? *options : sy_applications_options_default();
    sy_activation act;
    sy_shape shape;
    app a;
    sy_status st = check_options("ResNet50", &o, &act, &shape);
    if (st || (st = begin(&a, "resnet50", &o, shape))) return st;
    a.x = call(&a, sy_layer_zero_padding2d(3, 3, 3, 3), "conv1_pad", a.x);
    a.x = call(&a, conv(64, 7, 2, SY_PADDING_VALID, SY_ACTIVATION_LINEAR), "conv1_conv", a.x);
    a.x = call(&a, resnet_bn(), "conv1_bn", a.x);
    a.x = call(&a, sy_layer_activation(SY_ACTIVATION_RELU), "conv1_relu", a.x);
    a.x = call(&a, sy_layer_zero_padding2d(1, 1, 1, 1), "pool1_pad", a.x);
    sy_layer pool = sy_layer_max_pooling2d(3, 3);
    pool.strides[0] = pool.strides[1] = 2;
    a.x = call(&a, pool, "pool1_pool", a.x);
    /* stack1(x, filters, blocks, stride1): conv2 .. conv5 */
    static const int32_t stacks[4][3] = {{64, 3, 1}, {128, 4, 2}, {256, 6, 2}, {512, 3, 2}};
    char name[LAYER_NAME_MAX];
    for (int s = 0; s < 4; s++)
        for (int b = 0; b < stacks[s][1]; b++) {
            snprintf(name, sizeof name, "conv%d_block%d", s + 2, b + 1);
            resnet_block(&a, stacks[s][0], b == 0 ? stacks[s][2] : 1, b == 0, name);
        }
    if (o.include_top) {
        a.x = call(&a, sy_layer_global_average_pooling2d(), "avg_pool", a.x);
        a.x = call(&a, predictions(&o, act), "predictions", a.x);
    } else if (o.pooling) {
        bool avg = strcmp(o.pooling, "avg") == 0;
        a.x = call(&a, avg ? sy_layer_global_average_pooling2d() : sy_layer_global_max_pooling2d(),
                   avg ? "avg_pool" : "max_pool", a.x);
    }
    return finish(&a, &o, out);
}
