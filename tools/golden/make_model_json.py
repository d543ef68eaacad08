#!/usr/bin/env python3
"""make_model_json.py - Keras's own model.to_json() output, for test_config.c.

Builds Sequential models in tf.keras 2.15 -- the built-in models of
src/cli/builtin.c and a spread of every layer kind systolic has with
non-default arguments -- and writes into tests/data/keras/:

  <case>.json         model.to_json(), byte for byte as Keras wrote it
  <case>.expect.json  what Keras built from it: the weights in order with
                      their names and shapes, each layer's output shape and
                      the parameter count

test_config.c checks that systolic writes the same JSON for the same model
(compared parsed, and byte for byte), reads each file back into the same
layers, weights and shapes, and writes it again unchanged. The expect file
of functional_chain.json (a Functional model that is a plain chain) is what
its layers become as a Sequential model. unbuilt.json (no input shape) is
only written; unsupported_layer.json and unsupported_argument.json are
refused, by the test and by the command's tests (tests/CMakeLists.txt).

Every case starts from keras.backend.clear_session(), so automatic names
("sequential", "conv2d", ...) start afresh and no case depends on another.
Nothing here is random: to_json holds no weights.

Usage (from the repository root; .gl/ is the TensorFlow venv of make
bench-deps):
    .gl/bin/python tools/golden/make_model_json.py [--out DIR]
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import argparse
import json

import tensorflow as tf

keras = tf.keras
L = keras.layers
I = keras.initializers


def fashion_mnist_cnn():
    """The Cloud TPU tutorial's CNN (builtin.c: fashion_mnist_cnn and mnist_cnn)."""
    return keras.Sequential([
        L.Conv2D(64, (3, 3), input_shape=(28, 28, 1)),
        L.MaxPooling2D(pool_size=(2, 2), strides=(2, 2)),
        L.Activation("relu"),
        L.Flatten(),
        L.Dense(10),
        L.Activation("softmax"),
    ])


def imdb_lstm():
    """The Keras IMDB tutorial (builtin.c: imdb_lstm)."""
    return keras.Sequential([
        L.Embedding(15000, 32, input_length=250),
        L.LSTM(100),
        L.Dense(1, activation="sigmoid"),
    ])


def imdb_bilstm():
    """Keras's Bidirectional LSTM on IMDB with mask_zero (builtin.c: imdb_bilstm; issue 17, masking)."""
    return keras.Sequential([
        L.Embedding(20000, 128, mask_zero=True, input_shape=(200,)),
        L.Bidirectional(L.LSTM(64, return_sequences=True)),
        L.Bidirectional(L.LSTM(64)),
        L.Dense(1, activation="sigmoid"),
    ])


def cifar10_vgg16():
    """The Cloud TPU guides' third tutorial's model (builtin.c: cifar10_vgg16 and fashion_mnist_vgg16)."""
    return keras.applications.vgg16.VGG16(weights=None, input_shape=(32, 32, 3))


def conv_options():
    """Conv2D and pooling arguments away from their defaults."""
    return keras.Sequential([
        L.Conv2D(8, (3, 5), strides=(2, 1), padding="same", use_bias=False, activation="tanh",
                 kernel_initializer=I.HeNormal(seed=7), input_shape=(9, 10, 3), name="features"),
        L.Conv2D(4, 2, activation="relu", bias_initializer=I.Constant(0.1)),
        L.AveragePooling2D(pool_size=(2, 3), strides=(1, 2), padding="same"),
        L.MaxPooling2D(pool_size=(2, 2), padding="valid"),
        L.Activation("sigmoid"),
        L.Flatten(),
        L.Dense(5, activation="relu", use_bias=False,
                kernel_initializer=I.RandomNormal(mean=0.1, stddev=0.2, seed=3)),
        L.Dropout(0.25, seed=5),
        L.Dense(3, activation="softmax", bias_initializer=I.Ones()),
    ], name="convnet")


def recurrent_options():
    """LSTM and GRU arguments away from their defaults."""
    return keras.Sequential([
        L.LSTM(6, input_shape=(7, 4), return_sequences=True, go_backwards=True, dropout=0.1,
               recurrent_dropout=0.2, use_bias=False, activation="relu", recurrent_activation="tanh",
               unit_forget_bias=False, recurrent_initializer=I.Orthogonal(gain=2.0, seed=1)),
        L.GRU(5, return_sequences=True, go_backwards=True, activation="sigmoid",
              bias_initializer=I.RandomUniform(-0.1, 0.1), reset_after=True),
        L.LSTM(3, return_sequences=True, bias_initializer=I.Constant(0.5), unit_forget_bias=False),
        L.GRU(2, use_bias=False, dropout=0.5, kernel_initializer=I.LecunUniform(seed=11)),
        L.Dense(1, activation="linear"),
    ])


def embedding_options():
    """Embedding, Reshape (with an inferred dimension) and Dropout."""
    return keras.Sequential([
        L.Embedding(100, 8, input_length=12, embeddings_initializer=I.RandomUniform(-0.1, 0.1, seed=4)),
        L.Reshape((4, -1)),
        L.Dropout(0.5),
        L.Reshape((3, 4, 8)),
        L.MaxPooling2D(pool_size=(3, 1)),
        L.Flatten(),
        L.Dense(1, activation="sigmoid"),
    ])


def embedding_no_length():
    """Embedding without input_length after an explicit input shape (rank 2)."""
    return keras.Sequential([
        L.Embedding(50, 4, input_shape=(3, 5)),
        L.Reshape((15, 4)),
        L.GRU(3),
    ])


def initializers():
    """Every initializer systolic has, one Dense layer each."""
    inits = [lambda: I.Zeros(), lambda: I.Ones(), lambda: I.Constant(-0.75),
             lambda: I.RandomUniform(-0.2, 0.3, seed=1), lambda: I.RandomNormal(0.5, 2.0),
             lambda: I.TruncatedNormal(stddev=0.01, seed=2), lambda: I.GlorotUniform(seed=3),
             lambda: I.GlorotNormal(), lambda: I.HeUniform(), lambda: I.HeNormal(seed=4), lambda: I.LecunUniform(),
             lambda: I.LecunNormal(seed=5), lambda: I.Orthogonal(gain=0.5)]
    # the kernel takes each initializer in turn, the bias the one before it
    layers = [L.Dense(4, kernel_initializer=inits[0](), bias_initializer=inits[1](), input_shape=(4,))]
    layers += [L.Dense(4, kernel_initializer=k(), bias_initializer=b()) for k, b in zip(inits[2:], inits[1:])]
    return keras.Sequential(layers)


def activations():
    """Every activation, as a Dense argument and as an Activation layer."""
    names = ["linear", "relu", "sigmoid", "tanh", "softmax"]
    layers = [L.Dense(3, activation=names[0], input_shape=(2, 6))]
    for n in names[1:]:
        layers += [L.Dense(3, activation=n), L.Activation(n)]
    return keras.Sequential(layers)


def activation_layers():
    """Issue 15: every other activation name (silu is written as swish), the activation layers with their
    arguments, Rescaling with scalars and lists, Dropout's noise_shape."""
    names = ["elu", "selu", "gelu", "swish", "silu", "softplus", "softsign", "hard_sigmoid", "exponential", "relu6"]
    layers = [L.Dense(4, activation=names[0], input_shape=(3, 4))]
    for n in names[1:]:
        layers += [L.Dense(4, activation=n), L.Activation(n)]
    layers += [L.ReLU(), L.ReLU(max_value=6), L.ReLU(max_value=1.5, negative_slope=0.1, threshold=0.25),
               L.LeakyReLU(), L.LeakyReLU(alpha=0.2), L.ELU(), L.ELU(alpha=0.7), L.PReLU(),
               L.PReLU(alpha_initializer=I.Constant(0.25), alpha_regularizer="l2", shared_axes=1),
               L.Softmax(), L.Softmax(axis=1), L.Rescaling(1.0 / 255), L.Rescaling(2, offset=-1),
               L.Rescaling([0.5, 2, 1.5, 1.0], offset=[0.1, 0, -0.2, 0.3]), L.Dropout(0.25, noise_shape=(None, 1, 4)),
               L.Dropout(0.5, noise_shape=[None, 3, 1], seed=7)]
    return keras.Sequential(layers)


def regularizers():
    """Issue 15: kernel, bias, activity and embeddings regularizers as classes and as strings."""
    R = keras.regularizers
    return keras.Sequential([
        L.Embedding(20, 4, input_length=6, embeddings_regularizer="l1", activity_regularizer=R.L1L2(l2=0.001)),
        L.Reshape((6, 4, 1)),
        L.Conv2D(3, 2, kernel_regularizer=R.L2(0.05), bias_regularizer="l1_l2", activity_regularizer=R.L1(0.001)),
        L.Flatten(),
        L.Dense(5, kernel_regularizer=R.L1L2(), bias_regularizer="l2", activity_regularizer="l1"),
        L.Dense(2, kernel_regularizer=R.L1L2(l1=0.125, l2=0.25)),
    ])


def input_layer():
    """An explicit keras.Input: the InputLayer is input_1, the first layer has no batch_input_shape."""
    return keras.Sequential([keras.Input(shape=(5,)), L.Dense(2), L.Dense(1)])


def built():
    """No input shape on the layers, then model.build(): the first layer has no batch_input_shape."""
    m = keras.Sequential([L.Dense(2, name="hidden"), L.Dense(1)], name="built_later")
    m.build((None, 3))
    return m


def functional_chain():
    """A Functional model whose graph is a plain chain (read as a Sequential model)."""
    x = keras.Input(shape=(6, 6, 2), name="pixels")
    h = L.Conv2D(3, 3, padding="same", activation="relu")(x)
    h = L.Flatten()(h)
    y = L.Dense(2, activation="softmax", name="out")(h)
    return keras.Model(x, y, name="chain")


def unbuilt():
    """No input shape anywhere: no InputLayer, no build_config (systolic writes it; reading it is refused)."""
    return keras.Sequential([L.Dense(3), L.Dropout(0.1), L.Dense(1)])


def unsupported_layer():
    """A layer systolic lacks (UnitNormalization): refused by name."""
    return keras.Sequential([L.Dense(4, input_shape=(3,)), L.UnitNormalization(), L.Dense(1)])


def unsupported_argument():
    """A Conv2D over channels_first data: refused naming the argument and its value."""
    return keras.Sequential([L.Conv2D(2, 3, data_format="channels_first", input_shape=(1, 8, 8)), L.Flatten(), L.Dense(1)])


def conv_family():
    """The convolution family (issue 15) with arguments away from their defaults."""
    return keras.Sequential([
        L.ZeroPadding2D(((1, 2), (0, 1)), input_shape=(10, 9, 4), name="pad"),
        L.Conv2D(8, 3, dilation_rate=(2, 1), groups=2, padding="same", activation="relu"),
        L.DepthwiseConv2D((3, 2), strides=(2, 1), padding="same", depth_multiplier=2, use_bias=False,
                          activation="tanh", depthwise_initializer=I.HeNormal(seed=3), bias_initializer=I.Constant(0.2)),
        L.SeparableConv2D(6, 3, dilation_rate=2, depth_multiplier=3, activation="sigmoid",
                          pointwise_initializer=I.LecunUniform(seed=1), depthwise_initializer=I.Ones(),
                          kernel_initializer=I.Zeros()),
        L.Conv2DTranspose(5, (3, 2), strides=(2, 3), output_padding=(1, 2), padding="same", use_bias=False,
                          kernel_initializer=I.HeUniform(seed=2)),
        L.Conv2DTranspose(3, 2, activation="relu"),
        L.Cropping2D(((1, 0), (2, 3))),
        L.UpSampling2D((2, 1), interpolation="bilinear"),
        L.UpSampling2D(),
        L.GlobalMaxPooling2D(keepdims=True),
        L.GlobalAveragePooling2D(),
        L.Dense(2),
    ])


def conv_family_defaults():
    """The same layers with Keras's defaults (and the forms Keras normalises: an int padding, cropping)."""
    return keras.Sequential([
        L.ZeroPadding2D(input_shape=(8, 7, 3)),
        L.DepthwiseConv2D(3),
        L.SeparableConv2D(4, 2),
        L.Conv2DTranspose(2, 3),
        L.Cropping2D(2),
        L.UpSampling2D(),
        L.GlobalMaxPooling2D(),
    ])


def recurrent_activations():
    """Issue 15, recurrent activations: LSTM and GRU with every other activation name as activation and
    recurrent_activation (silu is written as swish)."""
    return keras.Sequential([
        L.LSTM(4, input_shape=(5, 3), return_sequences=True, activation="gelu", recurrent_activation="hard_sigmoid"),
        L.GRU(4, return_sequences=True, activation="swish", recurrent_activation="softsign"),
        L.LSTM(3, return_sequences=True, activation="elu", recurrent_activation="selu"),
        L.GRU(3, return_sequences=True, activation="softplus", recurrent_activation="exponential"),
        L.LSTM(3, return_sequences=True, activation="relu6", recurrent_activation="linear"),
        L.GRU(2, return_sequences=True, activation="silu", recurrent_activation="relu6"),
        L.LSTM(2, activation="exponential", recurrent_activation="gelu"),
    ])


def softmax_axes():
    """Issue 15: Softmax's axis as a list, written back as given."""
    return keras.Sequential([
        L.Softmax(axis=[1, 2], input_shape=(3, 4, 2)),
        L.Softmax(axis=[-1, 1]),
        L.Softmax(axis=[3]),
        L.Softmax(axis=2),
    ])


CASES = [fashion_mnist_cnn, imdb_lstm, cifar10_vgg16, conv_options, recurrent_options, embedding_options, embedding_no_length,
         initializers, activations, input_layer, built, functional_chain, unbuilt, unsupported_layer,
         unsupported_argument, conv_family, conv_family_defaults, activation_layers, regularizers, recurrent_activations,
         softmax_axes, imdb_bilstm]


def expectations(model):
    if not model.built:
        return {"layers": [{"name": l.name, "class_name": type(l).__name__} for l in model.layers]}
    layers = [l for l in model.layers if not isinstance(l, L.InputLayer)]
    return {
        "layers": [{"name": l.name, "class_name": type(l).__name__,
                    "output_shape": list(l.output_shape[1:]), "params": l.count_params()} for l in layers],
        "input_shape": list(model.input_shape[1:]),
        "weights": [[w.name, list(w.shape)] for w in model.weights],
        "params": model.count_params(),
    }


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=os.path.join("tests", "data", "keras"))
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for case in CASES:
        keras.backend.clear_session()
        model = case()
        with open(os.path.join(args.out, case.__name__ + ".json"), "w") as f:
            f.write(model.to_json())
        with open(os.path.join(args.out, case.__name__ + ".expect.json"), "w") as f:
            json.dump(expectations(model), f, indent=1)
            f.write("\n")
        print(case.__name__, model.count_params() if model.built else "unbuilt")
    import keras as keras_package

    print("keras", keras_package.__version__, "tensorflow", tf.__version__)


if __name__ == "__main__":
    main()
