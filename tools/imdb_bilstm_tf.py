#!/usr/bin/env python3
"""Keras's "Bidirectional LSTM on IMDB" example in tf.keras 2.15, on the
same data `systolic train imdb_bilstm` trains on, for docs/benchmarks.md.

    SYSTOLIC_DATASETS=../shared/datasets .venv/bin/python tools/imdb_bilstm_tf.py [--epochs 2] [--summary]

The example (keras.io/examples/nlp/bidirectional_lstm_imdb): the 20,000
most frequent words, reviews padded or cut to 200 ('pre'),
Embedding(20000, 128) -> Bidirectional(LSTM(64, return_sequences=True))
-> Bidirectional(LSTM(64)) -> Dense(1, sigmoid); adam, binary_crossentropy,
accuracy; fit(batch_size=32, epochs=2, validation_data=test). As issue 17
asks, the Embedding has mask_zero=True, as systolic's built-in has; the
input is (200,) as systolic's static shape (the example's (None,) gives
the same model).

The data: keras.datasets.imdb.load_data(num_words=20000) over an imdb.npz
rebuilt from the Stanford review texts and Keras's word index in
$SYSTOLIC_DATASETS/imdb, exactly as tools/imdb_test_values.py rebuilds it
to check systolic's loader (the reviews tokenised as systolic does, in
its fixed order); load_data then shuffles and offsets the indices as
Keras always does.

--summary prints model.summary() only (what `systolic summary imdb_bilstm`
must print byte for byte). Prints each epoch's log and wall time.
"""
import argparse
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow import keras  # noqa: E402

MAX_FEATURES = 20000
MAXLEN = 200


def build():
    return keras.Sequential([
        keras.layers.Embedding(MAX_FEATURES, 128, mask_zero=True, input_length=MAXLEN),
        keras.layers.Bidirectional(keras.layers.LSTM(64, return_sequences=True)),
        keras.layers.Bidirectional(keras.layers.LSTM(64)),
        keras.layers.Dense(1, activation="sigmoid"),
    ])


def load(datasets, tmp):
    import contextlib
    import io

    import imdb_test_values as itv
    with contextlib.redirect_stdout(io.StringIO()):  # it prints C tables; only its npz is wanted
        itv.real_facts(datasets, tmp)
    (xtr, ytr), (xte, yte) = itv.keras_load((MAX_FEATURES, 0, None, 1, 2, 3), os.path.join(tmp, "imdb.npz"))
    pad = keras.utils.pad_sequences
    return (pad(xtr, maxlen=MAXLEN), ytr), (pad(xte, maxlen=MAXLEN), yte)


class EpochTime(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.t = time.time()

    def on_epoch_end(self, epoch, logs=None):
        print("epoch %d: %.1f s, %s" % (epoch + 1, time.time() - self.t,
                                        ", ".join("%s %.4f" % kv for kv in sorted(logs.items()))), flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--summary", action="store_true")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    keras.utils.set_random_seed(a.seed)
    model = build()
    if a.summary:
        model.summary()
        return
    with tempfile.TemporaryDirectory() as tmp:
        (x_train, y_train), (x_val, y_val) = load(os.environ["SYSTOLIC_DATASETS"], tmp)
    print("tensorflow %s, %d threads; x_train %s, x_val %s" % (tf.__version__, os.cpu_count(), x_train.shape,
                                                                x_val.shape), flush=True)
    model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
    model.fit(x_train, y_train, batch_size=32, epochs=a.epochs, validation_data=(x_val, y_val), verbose=2,
              callbacks=[EpochTime()])


if __name__ == "__main__":
    main()
