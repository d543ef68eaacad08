/*
 * systolic/applications.h - keras.applications' VGG16 and ResNet50 built in
 * C, as tf.keras 2.15 builds them (issue 15).
 *
 *   sy_applications_options o = sy_applications_options_default();
 *   o.input_shape = sy_shape_of(3, (int64_t)32, (int64_t)32, (int64_t)3);
 *   o.classes = 10;
 *   sy_model *m;
 *   sy_applications_vgg16(&o, &m);   // tf.keras.applications.VGG16(weights=None,
 *                                    //     input_shape=(32, 32, 3), classes=10)
 *
 * The model is a Functional one with Keras's layers, layer names, model
 * name ("vgg16", "resnet50"), arguments and initializers, so its
 * sy_model_to_json is tf.keras's to_json() byte for byte, its summary is
 * Keras's, and its .h5 files are Keras's. Keras's argument checks are
 * made with Keras's messages (docs/keras-applications.md).
 */
#ifndef SYSTOLIC_APPLICATIONS_H
#define SYSTOLIC_APPLICATIONS_H

#include "systolic/keras.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The arguments of keras.applications' constructors. */
typedef struct sy_applications_options {
    bool include_top;                  /* true: the classifier (VGG16: Flatten, fc1, fc2; ResNet50:
                                          avg_pool) and a Dense "predictions" layer of `classes` */
    const char *weights;               /* NULL (Keras's None): initializers from `seed`; "imagenet" is
                                          refused (nothing is downloaded); else a weights .h5 to load,
                                          as Keras's load_weights(path) */
    sy_shape input_shape;              /* (H, W, C); rank 0: Keras's default (224, 224, 3). H and W at
                                          least 32. Without the top it must still be given in full:
                                          Keras's (None, None, 3) is not supported (static shapes) */
    const char *pooling;               /* without the top: NULL (Keras's None: the last block's 4-D
                                          output), "avg" or "max" (a global pooling) */
    int32_t classes;                   /* 1000 */
    const char *classifier_activation; /* "softmax"; NULL: None (the logits, "linear" in the JSON) */
    uint64_t seed;                     /* the model's seed (sy_model_set_seed): 0 */
} sy_applications_options;

sy_applications_options sy_applications_options_default(void);

/* tf.keras.applications.VGG16(...) and ResNet50(...): a new built,
 * uncompiled Functional model (inside a strategy's scope as
 * sy_model_new_functional). options NULL: the defaults. Refused
 * (SY_ERR_INVALID_ARGUMENT, Keras's message) as Keras refuses them: an
 * input_shape that is not (H, W, C) or smaller than 32x32, classes != 1000
 * with imagenet weights, an unknown classifier_activation, and here also
 * "imagenet" itself (SY_ERR_UNSUPPORTED) and a pooling that is neither
 * "avg" nor "max" (Keras ignores it silently). */
sy_status sy_applications_vgg16(const sy_applications_options *options, sy_model **out);
sy_status sy_applications_resnet50(const sy_applications_options *options, sy_model **out);

#ifdef __cplusplus
}
#endif
#endif
