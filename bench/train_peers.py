#!/usr/bin/env python3
"""The built-in models trained or run in TensorFlow (tf.keras) or PyTorch,
timed the way bench_models.c times systolic, on the same arrays: the ones
`build/bench/bench_models --model M --dump-data DIR` wrote from systolic's
own loader (DIR/M_x_train.npy, M_y_train.npy, M_x_test.npy), so the peers
see exactly what systolic sees (for IMDB: the 25,000 training reviews as
systolic rebuilt, shuffled and padded them).

Training: `steps` steps over the training data in order after two warm-up
steps, best of 3 runs. --predict: predictions for the first steps x batch
test samples after a warm-up call, best of 3.

    python3 bench/train_peers.py --framework torch --model imdb_lstm --data build/bench/data --batch 64 --steps 20 --threads 1
    .gl/bin/python bench/train_peers.py --framework tensorflow ...

Prints one line: "<framework> <version> <model> <train|predict>: batch B, T threads: X samples/s (Y ms/step)".
"""
import argparse
import os
import time

import numpy as np


def load(data, model):
    arrays = {}
    for name in ("x_train", "y_train", "x_test"):
        path = os.path.join(data, f"{model}_{name}.npy")
        if not os.path.exists(path):
            raise SystemExit(f"train_peers.py: {path} not found; write it with "
                             f"build/bench/bench_models --model {model} --dump-data {data}")
        arrays[name] = np.load(path)
    return arrays


def keras_model(tf, model):
    """The model, its loss and its metric, as the tutorial writes them."""
    L = tf.keras.layers
    if model == "fashion_mnist_cnn":
        return tf.keras.Sequential([
            L.Conv2D(64, (3, 3), input_shape=(28, 28, 1)),
            L.MaxPooling2D(pool_size=(2, 2), strides=(2, 2)),
            L.Activation("relu"),
            L.Flatten(),
            L.Dense(10),
            L.Activation("softmax")]), "sparse_categorical_crossentropy", "sparse_categorical_accuracy"
    return tf.keras.Sequential([
        L.Embedding(15000, 32, input_length=250),
        L.LSTM(100),
        L.Dense(1, activation="sigmoid")]), "binary_crossentropy", "accuracy"


def bench_tensorflow(d, model_name, batch, steps, threads, predict):
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    n = batch * (steps if predict else steps + 2)
    x = (d["x_test"] if predict else d["x_train"])[:n]
    x = x.astype(np.float32) if model_name == "fashion_mnist_cnn" else x
    y = d["y_train"][:n].astype(np.float32)
    best = 0.0
    for _ in range(3):
        model, loss, metric = keras_model(tf, model_name)
        model.compile(optimizer=tf.keras.optimizers.Adam(learning_rate=1e-3), loss=loss, metrics=[metric])
        if predict:
            model.predict(x[:batch], batch_size=batch, verbose=0)
            t0 = time.perf_counter()
            model.predict(x, batch_size=batch, verbose=0)
            best = max(best, n / (time.perf_counter() - t0))
            continue
        times = {}

        class Timer(tf.keras.callbacks.Callback):
            def on_train_batch_end(self, b, logs=None):
                times[b] = time.perf_counter()

        model.fit(x, y, batch_size=batch, epochs=1, steps_per_epoch=steps + 2, shuffle=False, verbose=0,
                  callbacks=[Timer()])
        best = max(best, steps * batch / (times[steps + 1] - times[1]))
    return f"tensorflow {tf.__version__}", best


def torch_model(torch, model):
    """The same model, its loss, and a function giving the accuracy metric's hits."""
    nn = torch.nn
    if model == "fashion_mnist_cnn":
        net = nn.Sequential(nn.Conv2d(1, 64, 3), nn.MaxPool2d(2, 2), nn.ReLU(), nn.Flatten(), nn.Linear(10816, 10))
        return net, nn.CrossEntropyLoss(), lambda out, y: out.argmax(1) == y

    class ImdbLstm(nn.Module):
        def __init__(self):
            super().__init__()
            self.embedding = nn.Embedding(15000, 32)
            self.lstm = nn.LSTM(32, 100, batch_first=True)
            self.dense = nn.Linear(100, 1)

        def forward(self, x):
            _, (h, _) = self.lstm(self.embedding(x))
            return torch.sigmoid(self.dense(h[-1])).squeeze(1)

    return ImdbLstm(), nn.BCELoss(), lambda out, y: (out > 0.5).float() == y


def bench_torch(d, model_name, batch, steps, threads, predict):
    import torch
    torch.set_num_threads(threads)
    n = batch * (steps if predict else steps + 2)
    x = (d["x_test"] if predict else d["x_train"])[:n]
    if model_name == "fashion_mnist_cnn":
        xs = torch.from_numpy(x.astype(np.float32)).permute(0, 3, 1, 2).contiguous()
        ys = torch.from_numpy(d["y_train"][:n].astype(np.int64))
    else:
        xs = torch.from_numpy(x.astype(np.int64))
        ys = torch.from_numpy(d["y_train"][:n].astype(np.float32))
    best = 0.0
    for _ in range(3):
        model, loss_fn, hits = torch_model(torch, model_name)
        if predict:
            model.eval()
            with torch.no_grad():
                model(xs[:batch])
                t0 = time.perf_counter()
                for s in range(steps):
                    model(xs[s * batch:(s + 1) * batch])
                best = max(best, n / (time.perf_counter() - t0))
            continue
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7)
        t1 = None
        for s in range(steps + 2):
            xb, yb = xs[s * batch:(s + 1) * batch], ys[s * batch:(s + 1) * batch]
            opt.zero_grad()
            out = model(xb)
            loss = loss_fn(out, yb)
            loss.backward()
            opt.step()
            hits(out, yb).float().mean().item()  # the accuracy metric, as fit computes it
            if s == 1:
                t1 = time.perf_counter()
        best = max(best, steps * batch / (time.perf_counter() - t1))
    return f"torch {torch.__version__}", best


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--framework", choices=["tensorflow", "torch"], required=True)
    p.add_argument("--model", choices=["fashion_mnist_cnn", "imdb_lstm"], default="fashion_mnist_cnn")
    p.add_argument("--data", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "bench",
                                                  "data"))
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--predict", action="store_true")
    a = p.parse_args()
    d = load(a.data, a.model)
    fn = bench_tensorflow if a.framework == "tensorflow" else bench_torch
    name, rate = fn(d, a.model, a.batch, a.steps, a.threads, a.predict)
    print(f"{name} {a.model} {'predict' if a.predict else 'train'}: batch {a.batch}, {a.threads} threads: "
          f"{rate:.0f} samples/s ({1e3 * a.batch / rate:.1f} ms/step)")


if __name__ == "__main__":
    main()
