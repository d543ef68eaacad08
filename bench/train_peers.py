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

vgg16 and resnet50 are keras.applications' VGG16 at 32x32x3 and ResNet50
at 224x224x3 (weights=None, 1,000-class softmax top) trained with
SGD(0.001) on sparse categorical crossentropy, on the synthetic arrays
bench_models --dump-data wrote; PyTorch runs the same architectures built
from torch.nn here (Debian's python3-torch has no torchvision), NCHW.
systolic reads the model tf.keras wrote:

    .venv/bin/python bench/train_peers.py --write-json build/bench/data   # DIR/vgg16.json, DIR/resnet50.json
    .venv/bin/python bench/train_peers.py --flops                         # FLOPs per sample for bench_models.c

--runs N: best of N runs instead of 3.

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


APPLICATIONS = ("vgg16", "resnet50")


def keras_application(tf, model):
    if model == "vgg16":
        return tf.keras.applications.VGG16(weights=None, input_shape=(32, 32, 3))
    return tf.keras.applications.ResNet50(weights=None)


def keras_model(tf, model):
    """The model, its loss and its metric, as the tutorial writes them."""
    L = tf.keras.layers
    if model in APPLICATIONS:
        return keras_application(tf, model), "sparse_categorical_crossentropy", "sparse_categorical_accuracy"
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


def bench_tensorflow(d, model_name, batch, steps, threads, predict, runs):
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(threads)
    tf.config.threading.set_inter_op_parallelism_threads(threads)
    n = batch * (steps if predict else steps + 2)
    x = (d["x_test"] if predict else d["x_train"])[:n]
    x = x.astype(np.float32) if model_name == "fashion_mnist_cnn" else x
    y = d["y_train"][:n].astype(np.float32)
    best = 0.0
    for _ in range(runs):
        model, loss, metric = keras_model(tf, model_name)
        opt = (tf.keras.optimizers.SGD(learning_rate=1e-3) if model_name in APPLICATIONS
               else tf.keras.optimizers.Adam(learning_rate=1e-3))
        model.compile(optimizer=opt, loss=loss, metrics=[metric])
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


def torch_vgg16(nn):
    """keras.applications.VGG16 at 32x32: 13 3x3 'same' convs with ReLU in 5 blocks, each closed by a 2x2 max pool;
    Flatten; Dense 4096, 4096 (ReLU) and 1000 (softmax: left to the loss, CrossEntropyLoss takes logits)."""
    layers, c = [], 3
    for width, convs in ((64, 2), (128, 2), (256, 3), (512, 3), (512, 3)):
        for _ in range(convs):
            layers += [nn.Conv2d(c, width, 3, padding=1), nn.ReLU(inplace=True)]
            c = width
        layers.append(nn.MaxPool2d(2, 2))
    layers += [nn.Flatten(), nn.Linear(512, 4096), nn.ReLU(inplace=True), nn.Linear(4096, 4096), nn.ReLU(inplace=True),
               nn.Linear(4096, 1000)]
    return nn.Sequential(*layers)


def torch_resnet50(torch, nn):
    """keras.applications.ResNet50 (v1): ZeroPadding 3, 7x7/2 conv, BN, ReLU, ZeroPadding 1, 3x3/2 max pool; stacks of
    3, 4, 6, 3 bottleneck blocks (1x1 with the block's stride, 3x3, 1x1 to 4x the width; a 1x1 conv + BN shortcut in
    each stack's first block); global average pool; Dense 1000. Every conv has a bias, as Keras's; BatchNormalization
    with Keras's epsilon 1.001e-5 and momentum 0.99."""
    def bn(c):
        return nn.BatchNorm2d(c, eps=1.001e-5, momentum=0.01)

    class Block(nn.Module):
        def __init__(self, c, width, stride, shortcut):
            super().__init__()
            self.body = nn.Sequential(nn.Conv2d(c, width, 1, stride), bn(width), nn.ReLU(inplace=True),
                                      nn.Conv2d(width, width, 3, padding=1), bn(width), nn.ReLU(inplace=True),
                                      nn.Conv2d(width, 4 * width, 1), bn(4 * width))
            self.shortcut = nn.Sequential(nn.Conv2d(c, 4 * width, 1, stride), bn(4 * width)) if shortcut else None

        def forward(self, x):
            s = self.shortcut(x) if self.shortcut is not None else x
            return torch.relu(self.body(x) + s)

    layers = [nn.ZeroPad2d(3), nn.Conv2d(3, 64, 7, 2), bn(64), nn.ReLU(inplace=True), nn.ZeroPad2d(1), nn.MaxPool2d(3, 2)]
    c = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)):
        for i in range(blocks):
            layers.append(Block(c, width, stride if i == 0 else 1, i == 0))
            c = 4 * width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(2048, 1000)]
    return nn.Sequential(*layers)


def torch_model(torch, model):
    """The same model, its loss, and a function giving the accuracy metric's hits."""
    nn = torch.nn
    if model in APPLICATIONS:
        net = torch_vgg16(nn) if model == "vgg16" else torch_resnet50(torch, nn)
        return net, nn.CrossEntropyLoss(), lambda out, y: out.argmax(1) == y
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


def bench_torch(d, model_name, batch, steps, threads, predict, runs):
    import torch
    torch.set_num_threads(threads)
    n = batch * (steps if predict else steps + 2)
    x = (d["x_test"] if predict else d["x_train"])[:n]
    if model_name in APPLICATIONS:
        xs = torch.from_numpy(x).permute(0, 3, 1, 2).contiguous()
        ys = torch.from_numpy(d["y_train"][:n].astype(np.int64))
    elif model_name == "fashion_mnist_cnn":
        xs = torch.from_numpy(x.astype(np.float32)).permute(0, 3, 1, 2).contiguous()
        ys = torch.from_numpy(d["y_train"][:n].astype(np.int64))
    else:
        xs = torch.from_numpy(x.astype(np.int64))
        ys = torch.from_numpy(d["y_train"][:n].astype(np.float32))
    best = 0.0
    for _ in range(runs):
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
        opt = (torch.optim.SGD(model.parameters(), lr=1e-3) if model_name in APPLICATIONS
               else torch.optim.Adam(model.parameters(), lr=1e-3, eps=1e-7))
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


def write_json(data):
    """The Keras models' JSON, for systolic to read (bench_models --data DIR)."""
    import tensorflow as tf
    os.makedirs(data, exist_ok=True)
    for model in APPLICATIONS:
        path = os.path.join(data, f"{model}.json")
        with open(path, "w") as f:
            f.write(keras_application(tf, model).to_json())
        print(path)


def flops():
    """2 x output size x window of every Conv2D and Dense, per sample: forward, and training as three times the forward
    less the first conv's input gradient (bench_models.c's table)."""
    import tensorflow as tf
    for model in APPLICATIONS:
        fwd, first = 0.0, None
        for layer in keras_application(tf, model).layers:
            if isinstance(layer, tf.keras.layers.Conv2D):
                o, k = layer.output_shape, layer.kernel.shape
                f = 2.0 * o[1] * o[2] * o[3] * k[0] * k[1] * k[2]
                first = f if first is None else first
                fwd += f
            elif isinstance(layer, tf.keras.layers.Dense):
                fwd += 2.0 * layer.kernel.shape[0] * layer.kernel.shape[1]
        print(f"{model}: train {3 * fwd - first:.0f}, predict {fwd:.0f} FLOP per sample")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--write-json", metavar="DIR")
    p.add_argument("--flops", action="store_true")
    p.add_argument("--framework", choices=["tensorflow", "torch"])
    p.add_argument("--model", choices=["fashion_mnist_cnn", "imdb_lstm"] + list(APPLICATIONS),
                   default="fashion_mnist_cnn")
    p.add_argument("--data", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "bench",
                                                  "data"))
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--predict", action="store_true")
    p.add_argument("--runs", type=int, default=3)
    a = p.parse_args()
    if a.write_json:
        return write_json(a.write_json)
    if a.flops:
        return flops()
    if not a.framework:
        p.error("--framework is required")
    d = load(a.data, a.model)
    fn = bench_tensorflow if a.framework == "tensorflow" else bench_torch
    name, rate = fn(d, a.model, a.batch, a.steps, a.threads, a.predict, a.runs)
    print(f"{name} {a.model} {'predict' if a.predict else 'train'}: batch {a.batch}, {a.threads} threads: "
          f"{rate:.{1 if rate < 100 else 0}f} samples/s ({1e3 * a.batch / rate:.1f} ms/step)")


if __name__ == "__main__":
    main()
