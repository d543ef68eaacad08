#!/usr/bin/env python3
"""keras_applications.py - tf.keras 2.15's keras.applications models, as files
systolic must read, run, train and write back (issue 15, point 3).

For each model of MODELS at its default input size and at the smallest one
Keras allows (weights=None, include_top=True, 1,000 classes), writes into
OUT (a scratch directory; the files are large -- ResNet152's .h5 is about
240 MB -- and are never committed):

  NAME_SIZE.json      model.to_json()
  NAME_SIZE.h5        model.save(...) of the model compiled with SGD(0.001)
                      (0.01 diverges ResNet152 at 32x32 in one step, in
                      Keras too) and
                      sparse_categorical_crossentropy (so training_config
                      is there), weights from Keras's initializers after
                      tf.keras.utils.set_random_seed(SEED), then the
                      BatchNormalization moving statistics calibrated and
                      the classifier spread (see NAME_SIZE_y.npy)
  NAME_SIZE_x.npy     a fixed batch of BATCH images, uniform in [-1, 1)
                      (the range most of the models' preprocess_input
                      gives; raw 0..255 pixels through the random
                      initializers overflow float32 in inference after a
                      training step, in Keras too)
  NAME_SIZE_y.npy     Keras's model.predict on it, after the
                      BatchNormalization moving statistics were set from 8
                      images (64 at the smallest sizes), these 2 among them
                      (calibrate) and, where that is not
                      enough, the classifier's kernel scaled by powers of 10
                      until the largest prediction is at least 0.01
                      (spread_top): with the initial weights every output is
                      0.001 to float32's precision, and comparing them would
                      check nothing
  NAME_SIZE_xt.npy    TRAIN_BATCH[size] images (as _x) and their labels
  NAME_SIZE_yt.npy    (int32 class indices) for one training step: 8 at
                      the smallest sizes, where the last stages are 1x1
                      and BatchNormalization over 2 values (variance ~0)
                      makes gradients of 1e7 that overflow the next
                      inference (in Keras too), 2 at the default sizes
  NAME_SIZE.params    "total trainable non_trainable", as summary() counts
  NAME_SIZE.loss      Keras's loss of that training step (fit, one batch,
                      no shuffling), run after the .h5 was saved

Commands:
  make OUT [NAME_SIZE ...]   write the files (all configurations by default)
  list                       the configurations, one per line
  check OUT NAME_SIZE ...     for each: systolic's predictions of Keras's
                             .h5 (NAME_SIZE_pred.npy) against Keras's
                             (NAME_SIZE_y.npy); then NAME_SIZE_sy.h5 (the
                             .h5 systolic saved after its training step)
                             through keras.models.load_model and predict,
                             against systolic's predictions of it
                             (NAME_SIZE_sy.npy); both to 1e-4 of the
                             largest output -- or, where tf.keras's own two
                             CPU paths (oneDNN and Eigen) disagree by more,
                             to 10 times their disagreement (ResNet152 at 32x32,
                             whose BatchNormalization over 2x2 and 1x1 maps
                             amplifies float32 rounding)
  lambda OUT                 OUT/lambda.json: a Functional model with a
                             Lambda layer, which systolic must refuse by name
  batchnorm OUT              OUT/batchnorm.h5, _x.npy, _y.npy: two
                             BatchNormalization layers (the second with
                             scale=False, as InceptionV3's) over 37
                             channels, moving variances over six decades,
                             and Keras's predictions of 4x5x6 maps; then
  batchnorm-check OUT        OUT/batchnorm_sy.npy (systolic's predictions)
                             equals Keras's bit for bit: its rsqrt is
                             TensorFlow's, which is not correctly rounded
                             (src/backend/cpu/ref_kernels.c: rsqrt_tf);
                             37 channels take both its 8-wide packets and
                             its scalar tail
  variants OUT               OUT/NAME.json and NAME.params: Keras's VGG16
                             and ResNet50 with the arguments of VARIANTS,
                             against which the C constructors are checked
                             byte for byte (tests/test_applications.c)
  builtins OUT               OUT/vgg16.json and OUT/resnet50.json: Keras's
                             models of the command's built-in vgg16 and
                             resnet50 (input_shape (32, 32, 3), classes 10),
                             which test_config.c compares byte for byte
                             (committed in tests/data/keras/)

Smallest input sizes: Keras's obtain_input_shape refuses below 32 for VGG,
ResNet, MobileNet, DenseNet and EfficientNet, 75 for InceptionV3 and 71
for Xception (checked in `make`: one pixel less is refused).

Usage:
    $SYSTOLIC_PYTHON tools/keras_applications.py make DIR
"""

import os

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")  # 1 only for `predict` (keras_itself)
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import sys  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
tf.get_logger().setLevel("ERROR")

A = tf.keras.applications
SEED = 15
BATCH = 2

# name: (constructor, default size, smallest size)
MODELS = {
    "vgg16": (A.VGG16, 224, 32),
    "vgg19": (A.VGG19, 224, 32),
    "resnet50": (A.ResNet50, 224, 32),
    "resnet101": (A.ResNet101, 224, 32),
    "resnet152": (A.ResNet152, 224, 32),
    "resnet50v2": (A.ResNet50V2, 224, 32),
    "mobilenet": (A.MobileNet, 224, 32),
    "mobilenetv2": (A.MobileNetV2, 224, 32),
    "densenet121": (A.DenseNet121, 224, 32),
    "inceptionv3": (A.InceptionV3, 299, 75),
    "xception": (A.Xception, 299, 71),
    "efficientnetb0": (A.EfficientNetB0, 224, 32),
}


def configs():
    for name, (_, default, smallest) in MODELS.items():
        yield f"{name}_{default}", name, default
        yield f"{name}_{smallest}", name, smallest


def build(name, size):
    tf.keras.utils.set_random_seed(SEED)
    return MODELS[name][0](weights=None, input_shape=(size, size, 3))


def counts(model):
    """(total, trainable, non-trainable) as model.summary() counts them."""
    trainable = int(sum(np.prod(w.shape) for w in model.trainable_weights))
    non_trainable = int(sum(np.prod(w.shape) for w in model.non_trainable_weights))
    return trainable + non_trainable, trainable, non_trainable


def calibrate(model, x):
    """The BatchNormalization layers' moving statistics set to the batch
    statistics of x (one training-mode call with momentum 0, then the
    momentum put back): with the initial ones (0 and 1) the inference-mode
    activations of the deep models shrink layer after layer to nothing, and
    every prediction is 0.001."""
    bns = [layer for layer in model.layers if isinstance(layer, tf.keras.layers.BatchNormalization)]
    momenta = [layer.momentum for layer in bns]
    for layer in bns:
        layer.momentum = 0.0
    model(x, training=True)
    for layer, m in zip(bns, momenta):
        layer.momentum = m


def spread_top(model, x):
    """Scale the classifier's kernel (the last layer with one: Dense
    "predictions", or MobileNet's Conv2D "conv_preds") by 10 until the
    predictions on x are no longer uniform: with the initializers' weights,
    the deep models' features are so small that every softmax output is
    0.001 to float32's precision, and a comparison of predictions would
    check nothing. Returns the predictions."""
    top = [layer for layer in model.layers if getattr(layer, "kernel", None) is not None][-1]
    y = model.predict(x, batch_size=BATCH, verbose=0)
    for _ in range(12):
        if float(np.max(y)) >= 0.01:
            break
        top.kernel.assign(top.kernel * 10.0)
        y = model.predict(x, batch_size=BATCH, verbose=0)
    return y


def make(out, wanted):
    os.makedirs(out, exist_ok=True)
    for key, name, size in configs():
        if wanted and key not in wanted:
            continue
        model = build(name, size)
        if size == MODELS[name][2]:
            try:
                MODELS[name][0](weights=None, input_shape=(size - 1, size - 1, 3))
            except ValueError:
                pass
            else:
                raise SystemExit(f"{name}: {size - 1} is accepted, so {size} is not the smallest size")
        model.compile(optimizer=tf.keras.optimizers.SGD(0.001), loss="sparse_categorical_crossentropy")
        rng = np.random.default_rng(SEED)
        x = rng.uniform(-1, 1, (BATCH, size, size, 3)).astype(np.float32)
        more = 6 if size == MODELS[name][1] else 62  # the small sizes' last stages are 1x1: more samples
        calibrate(model, np.concatenate([x, rng.uniform(-1, 1, (more, size, size, 3)).astype(np.float32)]))
        y = spread_top(model, x)
        n = BATCH if size == MODELS[name][1] else 8
        xt = rng.uniform(-1, 1, (n, size, size, 3)).astype(np.float32)
        labels = rng.integers(0, 1000, (n,)).astype(np.int32)
        base = os.path.join(out, key)
        with open(base + ".json", "w") as f:
            f.write(model.to_json())
        model.save(base + ".h5")
        np.save(base + "_x.npy", x)
        np.save(base + "_y.npy", y)
        np.save(base + "_xt.npy", xt)
        np.save(base + "_yt.npy", labels)
        with open(base + ".params", "w") as f:
            f.write("%d %d %d\n" % counts(model))
        loss = model.fit(xt, labels, batch_size=n, epochs=1, shuffle=False, verbose=0).history["loss"][0]
        with open(base + ".loss", "w") as f:
            f.write("%r\n" % loss)
        print(key, "%d %d %d" % counts(model), loss, flush=True)
        tf.keras.backend.clear_session()


def compare(key, what, theirs, mine, keras_itself=None, saturated_ok=False):
    """mine against theirs to 1e-4 of the largest output; or, where
    keras_itself() (Keras's own disagreement between its two CPU paths) is
    given and larger, to ten times that: two float32 implementations of
    the same model (systolic's against Eigen's) differing by the order of
    magnitude TensorFlow's own two differ by."""
    note = ""
    if theirs.shape == mine.shape and not np.all(np.isfinite(mine)):
        # ResNet152 at 32x32 after its training step: NaN in Keras's own step too (2x2 and 1x1 maps
        # through 50 BatchNormalizations); the file then must give NaN in the same places
        if not np.array_equal(np.isnan(theirs), np.isnan(mine)):
            raise SystemExit(f"{key}: {what}: NaN in different places")
        note = f"; {int(np.sum(np.isnan(mine)))} NaN in both, as after Keras's own step"
        keep = np.isfinite(mine)
        theirs, mine = (theirs[keep], mine[keep]) if keep.any() else (np.zeros(1), np.zeros(1))
    if saturated_ok and theirs.shape == mine.shape and theirs.ndim == 2:
        # A model blown up by its training step (EfficientNetB0 at 32x32: loss 16 in Keras's own step
        # too) has logits of 1e4 and one-hot softmax rows, whose class float32 noise decides: not compared
        sat = (np.max(theirs, axis=1) >= 0.999) | (np.max(mine, axis=1) >= 0.999)
        if sat.any():
            note += f"; {int(sat.sum())} saturated row(s) (one-hot softmax after the step) not compared"
            keep = ~sat
            theirs, mine = (theirs[keep], mine[keep]) if keep.any() else (np.zeros(1), np.zeros(1))
    scale = float(np.max(np.abs(theirs)))
    diff = float(np.max(np.abs(theirs - mine))) if theirs.shape == mine.shape else float("inf")
    if not diff <= 1e-4 * scale and keras_itself is not None and np.isfinite(diff):
        own = keras_itself()
        note = f"; tf.keras's oneDNN and Eigen paths differ by {own:.3g}"
        if diff <= 10 * own:
            print(f"{key}: {what}: within {diff:.3g} (largest output {scale:.3g}{note})")
            return
    print(f"{key}: {what}: within {diff:.3g} (largest output {scale:.3g}{note})")
    if not diff <= 1e-4 * scale:
        raise SystemExit(f"{key}: {what}: differs by {diff} > 1e-4 * {scale}{note}")


def keras_itself(out, key):
    """How far tf.keras's predictions of KEY.h5 with oneDNN (a new process:
    the switch is read at import) are from its Eigen ones (KEY_y.npy)."""
    import subprocess

    env = dict(os.environ, TF_ENABLE_ONEDNN_OPTS="1")
    subprocess.run([sys.executable, __file__, "predict", out, key], env=env, check=True, stderr=subprocess.DEVNULL)
    base = os.path.join(out, key)
    return float(np.max(np.abs(np.load(base + "_y_onednn.npy") - np.load(base + "_y.npy"))))


def predict(out, key):
    base = os.path.join(out, key)
    model = tf.keras.models.load_model(base + ".h5")
    np.save(base + "_y_onednn.npy", model.predict(np.load(base + "_x.npy"), batch_size=BATCH, verbose=0))


def check(out, key):
    base = os.path.join(out, key)
    x = np.load(base + "_x.npy")
    own = []  # Keras's own disagreement, measured once, the bound of both comparisons

    def itself():
        if not own:
            own.append(keras_itself(out, key))
        return own[0]

    compare(key, "systolic's predictions of Keras's .h5 vs Keras's", np.load(base + "_y.npy"),
            np.load(base + "_pred.npy"), itself)
    model = tf.keras.models.load_model(base + "_sy.h5")
    y = model.predict(x, batch_size=BATCH, verbose=0)
    compare(key, "tf.keras's predictions of systolic's trained .h5 vs systolic's", y, np.load(base + "_sy.npy"), itself,
            saturated_ok=True)
    tf.keras.backend.clear_session()


def lambda_model(out):
    os.makedirs(out, exist_ok=True)
    inp = tf.keras.Input((8, 8, 3))
    h = tf.keras.layers.Conv2D(4, 3, name="conv")(inp)
    h = tf.keras.layers.Lambda(lambda t: t * 2.0, name="double_it")(h)
    h = tf.keras.layers.GlobalAveragePooling2D()(h)
    model = tf.keras.Model(inp, h)
    with open(os.path.join(out, "lambda.json"), "w") as f:
        f.write(model.to_json())
    model.compile(loss="mse")
    model.save(os.path.join(out, "lambda.h5"))


def batchnorm(out):
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(15)
    c = 37
    inp = tf.keras.Input((5, 6, c))
    h = tf.keras.layers.BatchNormalization(name="bn")(inp)
    h = tf.keras.layers.BatchNormalization(scale=False, epsilon=1e-3, name="bn_noscale")(h)
    model = tf.keras.Model(inp, h)
    for layer in model.layers[1:]:
        w = [rng.normal(size=c).astype(np.float32) for _ in layer.get_weights()]
        w[-1] = np.exp(rng.uniform(-9, 5, size=c)).astype(np.float32)  # moving variance
        layer.set_weights(w)
    x = rng.normal(size=(4, 5, 6, c)).astype(np.float32) * 3
    model.save(os.path.join(out, "batchnorm.h5"))
    np.save(os.path.join(out, "batchnorm_x.npy"), x)
    np.save(os.path.join(out, "batchnorm_y.npy"), model.predict(x, verbose=0))


def batchnorm_check(out):
    want = np.load(os.path.join(out, "batchnorm_y.npy"))
    got = np.load(os.path.join(out, "batchnorm_sy.npy"))
    if got.shape != want.shape:
        raise SystemExit(f"batchnorm: systolic's predictions have shape {got.shape}, Keras's {want.shape}")
    bad = int(np.sum(got != want))
    if bad:
        raise SystemExit(f"batchnorm: {bad} of {want.size} outputs differ from Keras's "
                         f"(largest difference {np.max(np.abs(got - want)):.3g})")
    print(f"batchnorm: systolic's {want.size} outputs equal Keras's bit for bit")


# The constructors' variants the C constructors are checked against: name,
# keyword arguments (weights=None always).
VARIANTS = {
    "vgg16_notop_32": (A.VGG16, dict(include_top=False, input_shape=(32, 32, 3))),
    "vgg16_top_32_c10": (A.VGG16, dict(input_shape=(32, 32, 3), classes=10, classifier_activation=None)),
    "vgg16_notop_avg_48": (A.VGG16, dict(include_top=False, input_shape=(48, 40, 3), pooling="avg")),
    "vgg16_top_224": (A.VGG16, dict()),
    "resnet50_notop_max_64": (A.ResNet50, dict(include_top=False, input_shape=(64, 64, 3), pooling="max")),
    "resnet50_top_32_c10": (A.ResNet50, dict(input_shape=(32, 32, 3), classes=10)),
    "resnet50_top_224": (A.ResNet50, dict()),
}


def variants(out):
    os.makedirs(out, exist_ok=True)
    for key, (ctor, kw) in VARIANTS.items():
        model = ctor(weights=None, **kw)
        with open(os.path.join(out, key + ".json"), "w") as f:
            f.write(model.to_json())
        with open(os.path.join(out, key + ".params"), "w") as f:
            f.write("%d %d %d\n" % counts(model))
        tf.keras.backend.clear_session()


def builtins(out):
    for name, ctor in (("vgg16", A.VGG16), ("resnet50", A.ResNet50)):
        model = ctor(weights=None, input_shape=(32, 32, 3), classes=10)
        with open(os.path.join(out, name + ".json"), "w") as f:
            f.write(model.to_json())
        tf.keras.backend.clear_session()


def main(argv):
    if len(argv) >= 2 and argv[1] == "list":
        for key, _, _ in configs():
            print(key)
    elif len(argv) >= 3 and argv[1] == "make":
        make(argv[2], set(argv[3:]))
    elif len(argv) >= 3 and argv[1] == "check":
        for key in argv[3:]:
            check(argv[2], key)
    elif len(argv) == 3 and argv[1] == "lambda":
        lambda_model(argv[2])
    elif len(argv) == 3 and argv[1] == "batchnorm":
        batchnorm(argv[2])
    elif len(argv) == 3 and argv[1] == "batchnorm-check":
        batchnorm_check(argv[2])
    elif len(argv) == 3 and argv[1] == "variants":
        variants(argv[2])
    elif len(argv) == 4 and argv[1] == "predict":
        predict(argv[2], argv[3])
    elif len(argv) == 3 and argv[1] == "builtins":
        builtins(argv[2])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
