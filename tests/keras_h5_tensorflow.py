#!/usr/bin/env python3
"""keras_h5_tensorflow.py - the Python side of keras_h5_tensorflow.sh.

  layout DIR ROOT       h5py: systolic's files have Keras 2.15's layout
  keras-save DIR ROOT   tf.keras saves weights of its own (seed 21) and its
                        predictions, for test_saving to load
  keras-check DIR ROOT  tf.keras loads systolic's weights and full models and
                        predicts what systolic predicted; systolic predicted
                        what Keras did with Keras's weights

The architectures and inputs are those of tools/golden/make_keras_h5.py.
"""

import importlib.util
import os
import sys

import h5py
import numpy as np

NAMES = ("cnn", "lstm", "mixed")
FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what)


def inputs(root, name):
    return np.load(os.path.join(root, "tests", "data", "keras", name + ".npz"))["x"]


def vlen_strings(attr_id):
    t = attr_id.get_type()
    return isinstance(t, h5py.h5t.TypeStringID) and t.is_variable_str()


def check_weights_group(g, where, nested=()):
    """A group as save_weights_to_hdf5_group writes it; the layers named in
    nested are models, whose weights keep the inner model's names."""
    for key in ("layer_names", "backend", "keras_version"):
        check(key in g.attrs, f"{where}: attribute {key}")
    check(vlen_strings(g.attrs.get_id("layer_names")), f"{where}: layer_names are variable-length strings")
    check(g.attrs.get_id("layer_names").shape == (len(g.attrs["layer_names"]),), f"{where}: layer_names is an array")
    check(g.attrs.get_id("backend").shape == (), f"{where}: backend is a scalar")
    check(g.attrs["backend"] == "tensorflow", f"{where}: backend tensorflow")
    check(g.attrs["keras_version"] == "2.15.0", f"{where}: keras_version 2.15.0")
    check("top_level_model_weights" in g, f"{where}: top_level_model_weights group")
    for layer in g.attrs["layer_names"]:
        lg = g[layer]
        names = lg.attrs["weight_names"]
        if len(names) == 0:
            check(names.dtype == np.float64, f"{where}/{layer}: empty weight_names as h5py writes [] (float64)")
            continue
        check(vlen_strings(lg.attrs.get_id("weight_names")), f"{where}/{layer}: weight_names are strings")
        for w in names:
            check((layer in nested or w.startswith(layer + "/")) and w.endswith(":0"), f"{where}/{layer}: weight name {w}")
            d = lg[w]
            check(isinstance(d, h5py.Dataset) and d.dtype == np.float32, f"{where}/{layer}/{w}: float32 dataset")


def layout(d, root):
    for name in NAMES:
        with h5py.File(os.path.join(d, name + "_systolic_weights.h5"), "r") as f:
            check_weights_group(f, name + "_systolic_weights.h5")
        with h5py.File(os.path.join(d, name + "_systolic.h5"), "r") as f:
            where = name + "_systolic.h5"
            for key in ("model_config", "training_config", "backend", "keras_version"):
                check(key in f.attrs and f.attrs.get_id(key).shape == (), f"{where}: scalar attribute {key}")
            check("optimizer_weights" not in f, f"{where}: no optimizer_weights (docs/design/model-files.md)")
            check_weights_group(f["model_weights"], where + "/model_weights")
    # the layer and weight names of the CNN, exactly
    with h5py.File(os.path.join(d, "cnn_systolic_weights.h5"), "r") as f:
        check(list(f.attrs["layer_names"]) == ["conv2d", "max_pooling2d", "activation", "flatten", "dense",
                                               "activation_1"], "cnn: layer_names")
        check(list(f["conv2d"].attrs["weight_names"]) == ["conv2d/kernel:0", "conv2d/bias:0"], "cnn: weight_names")
        check(f["conv2d/conv2d/kernel:0"].shape == (3, 3, 1, 4), "cnn: conv2d/conv2d/kernel:0 (3, 3, 1, 4)")
    # issue 15: a Functional model with a nested Sequential one, as Keras's nested_seq_in_fn_weights.h5
    with h5py.File(os.path.join(root, "tests", "data", "keras", "nested_seq_in_fn_weights.h5"), "r") as k:
        for fname in ("nested_systolic_weights.h5", "nested_systolic.h5"):
            with h5py.File(os.path.join(d, fname), "r") as f:
                g = f["model_weights"] if "model_weights" in f else f
                check_weights_group(g, fname, nested=("features",))
                check(list(g.attrs["layer_names"]) == list(k.attrs["layer_names"]), f"{fname}: layer_names as Keras's")
                for layer in k.attrs["layer_names"]:
                    check(list(g[layer].attrs["weight_names"]) == list(k[layer].attrs["weight_names"]),
                          f"{fname}/{layer}: weight_names as Keras's")
    print("keras_h5_tensorflow: layout of %d files checked" % (2 * len(NAMES) + 2))


def keras_module(root):
    spec = importlib.util.spec_from_file_location("make_keras_h5", os.path.join(root, "tools", "golden",
                                                                               "make_keras_h5.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def keras_save(d, root):
    mk = keras_module(root)
    for name in NAMES:
        mk.keras.backend.clear_session()
        mk.tf.keras.utils.set_random_seed(21)
        m = mk.MODELS[name]()[0]
        m.save_weights(os.path.join(d, name + "_keras_weights.h5"))
        np.save(os.path.join(d, name + "_keras.npy"), m.predict(inputs(root, name), verbose=0))


def close(a, b, what):
    ok = a.shape == b.shape and np.allclose(a, b, rtol=1e-5, atol=1e-6)
    check(ok, f"{what}: max difference {np.max(np.abs(a - b)) if a.shape == b.shape else 'shapes differ'}")


def keras_check(d, root):
    mk = keras_module(root)
    keras = mk.keras
    for name in NAMES:
        x = inputs(root, name)
        mine = np.fromfile(os.path.join(d, name + "_systolic.f32"), dtype=np.float32)
        # weights saved by systolic, loaded by Keras into the same architecture
        keras.backend.clear_session()
        m = mk.MODELS[name]()[0]
        m.load_weights(os.path.join(d, name + "_systolic_weights.h5"))
        pred = m.predict(x, verbose=0)
        close(pred.reshape(-1), mine, f"{name}: Keras with systolic's weights")
        # a full model saved by systolic: load_model, compiled as it was
        keras.backend.clear_session()
        full = keras.models.load_model(os.path.join(d, name + "_systolic.h5"))
        close(full.predict(x, verbose=0).reshape(-1), mine, f"{name}: keras.models.load_model of systolic's file")
        ref = mk.MODELS[name]()[0]
        check(full.optimizer is not None and type(full.optimizer).__name__ == type(ref.optimizer).__name__,
              f"{name}: load_model compiled with {type(ref.optimizer).__name__}")
        check(abs(float(full.optimizer.learning_rate) - float(ref.optimizer.learning_rate)) < 1e-9,
              f"{name}: learning rate {float(full.optimizer.learning_rate)}")
        check([l.name for l in full.layers] == [l.name for l in ref.layers], f"{name}: layer names")
        # Keras's weights, loaded by systolic (test_saving), predict as Keras did
        theirs = np.load(os.path.join(d, name + "_keras.npy")).reshape(-1)
        loaded = np.fromfile(os.path.join(d, name + "_keras_loaded.f32"), dtype=np.float32)
        close(loaded, theirs, f"{name}: systolic with Keras's weights")
    # issue 15: the nested model's files written by systolic, loaded by Keras
    x = np.load(os.path.join(root, "tests", "data", "keras", "nested.npz"))["x"]
    mine = np.fromfile(os.path.join(d, "nested_systolic.f32"), dtype=np.float32)
    keras.backend.clear_session()
    full = keras.models.load_model(os.path.join(d, "nested_systolic.h5"))
    close(full.predict(x, verbose=0).reshape(-1), mine, "nested: keras.models.load_model of systolic's file")
    keras.backend.clear_session()
    with open(os.path.join(root, "tests", "data", "keras", "nested_seq_in_fn.json")) as f:
        m = keras.models.model_from_json(f.read())
    m.load_weights(os.path.join(d, "nested_systolic_weights.h5"))
    close(m.predict(x, verbose=0).reshape(-1), mine, "nested: Keras with systolic's weights")
    print("keras_h5_tensorflow: %d models both ways, and a nested one" % len(NAMES))


def main():
    what, d, root = sys.argv[1:4]
    {"layout": layout, "keras-save": keras_save, "keras-check": keras_check}[what](d, root)
    if FAILURES:
        print("keras_h5_tensorflow: %d checks failed" % len(FAILURES))
        sys.exit(1)


if __name__ == "__main__":
    main()
