#!/usr/bin/env python3
"""bench_int8.py - issue 18 point 3: int8 inference against float32 and TFLite.

On the same images, in one run: systolic's float32 path (`systolic predict
MODEL.h5`), systolic's int8 path (`systolic predict MODEL.tflite`) and
TensorFlow Lite's interpreter (its default delegate, XNNPACK, on the same
.tflite file, as many threads as systolic uses), for

  cnn       the Fashion-MNIST tutorial CNN (`systolic train fashion_mnist_cnn`,
            then `systolic quantize`), on the 10,000 test images, batch 1,000;
  resnet50  keras.applications' ResNet50 (weights=None, 224x224x3, seeded),
            int8 by TFLiteConverter (100 random calibration images), on 64
            random images, batch 16.

systolic's times are the predict command's wall time less the same command's
on one batch (loading, compiling and writing, not inference), each command's
the best of --repeat runs; TFLite's are invoke() alone, the best of --repeat
passes. Also the file sizes and, for the CNN, the test accuracy of both paths.

    SYSTOLIC_DATASETS=../shared/datasets .venv/bin/python bench/bench_int8.py build/systolic
"""
import argparse, gzip, os, shutil, subprocess, sys, tempfile, time

import numpy as np


def wall(cmd):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def systolic_time(sy, model, x, d, batch, repeat, extra=()):
    np.save(os.path.join(d, "x_all.npy"), x)
    np.save(os.path.join(d, "x_one.npy"), x[:batch])
    out = os.path.join(d, "y.npy")
    base = [sy, "predict", model, "--batch-size", str(batch), "--output", out, "--verbose", "0", *extra]
    # the best of each, then the difference: the best of the differences would pick the run whose one-batch
    # command stalled longest (a float32 one stalled 0.1 s now and then, giving negative times)
    t_all, t_one = float("inf"), float("inf")
    for _ in range(repeat):
        t_all = min(t_all, wall(base + ["--input", os.path.join(d, "x_all.npy")]))
        t_one = min(t_one, wall(base + ["--input", os.path.join(d, "x_one.npy")]))
    subprocess.run(base + ["--input", os.path.join(d, "x_all.npy")], check=True, stdout=subprocess.DEVNULL)
    return (t_all - t_one) * len(x) / (len(x) - batch), np.load(out)


def tflite_time(path, x, batch, threads, repeat):
    import tensorflow as tf
    it = tf.lite.Interpreter(model_path=path, num_threads=threads)
    inp = it.get_input_details()[0]
    it.resize_tensor_input(inp["index"], [batch, *x.shape[1:]])
    it.allocate_tensors()
    inp, out = it.get_input_details()[0], it.get_output_details()[0]
    xs = x.astype(inp["dtype"])
    best, ys = float("inf"), None
    for _ in range(repeat):
        outs = []
        t = time.perf_counter()
        for i in range(0, len(x), batch):
            it.set_tensor(inp["index"], xs[i:i + batch])
            it.invoke()
            outs.append(it.get_tensor(out["index"]).copy())
        best = min(best, time.perf_counter() - t)
        ys = np.concatenate(outs)
    return best, ys


def row(name, n, t_float, t_int8, t_tfl, size_f, size_q):
    print("| %s | %d | %.3f s (%.0f/s) | %.3f s (%.0f/s) | %.3f s (%.0f/s) | %.2fx | %.2fx | %d -> %d bytes (%.2fx) |" % (
        name, n, t_float, n / t_float, t_int8, n / t_int8, t_tfl, n / t_tfl, t_float / t_int8, t_tfl / t_int8,
        size_f, size_q, size_f / size_q))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("systolic")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--only", choices=["cnn", "resnet50"])
    ap.add_argument("--keep", action="store_true", help="keep the models and inputs it made (their directory is printed)")
    a = ap.parse_args()
    sy = os.path.abspath(a.systolic)
    data = os.environ.get("SYSTOLIC_DATASETS")
    d = tempfile.mkdtemp(prefix="bench-int8-")
    try:
        return run(a, sy, data, d)
    finally:
        if a.keep:
            print("kept: %s" % d)
        else:
            shutil.rmtree(d, ignore_errors=True)


def run(a, sy, data, d):
    print("| model | images | systolic float32 | systolic int8 | TFLite (XNNPACK, %d threads) int8 | int8 vs float32 | int8 vs TFLite | file |" % a.threads)
    print("|---|---|---|---|---|---|---|---|")
    if a.only in (None, "cnn"):
        fm = os.path.join(data, "fashion-mnist")
        x = np.frombuffer(gzip.open(os.path.join(fm, "t10k-images-idx3-ubyte.gz")).read()[16:], np.uint8)
        x = x.reshape(-1, 28, 28, 1).astype(np.float32)
        lab = np.frombuffer(gzip.open(os.path.join(fm, "t10k-labels-idx1-ubyte.gz")).read()[8:], np.uint8)
        h5, tfl = os.path.join(d, "cnn.h5"), os.path.join(d, "cnn.tflite")
        subprocess.run([sy, "train", "fashion_mnist_cnn", "--verbose", "0", "--save-model", h5], check=True,
                       stdout=subprocess.DEVNULL)
        subprocess.run([sy, "quantize", h5, "--dataset", "fashion_mnist", "--batch-size", "100",
                        "--calibration-steps", "10", "-o", tfl], check=True, stdout=subprocess.DEVNULL)
        tf_, yf = systolic_time(sy, h5, x, d, 1000, a.repeat)
        tq, yq = systolic_time(sy, tfl, x, d, 1000, a.repeat)
        tl, yl = tflite_time(tfl, x, 1000, a.threads, a.repeat)
        row("Fashion-MNIST CNN", len(x), tf_, tq, tl, os.path.getsize(h5), os.path.getsize(tfl))
        print("accuracy on the 10,000 test images: float32 %.2f%%, int8 %.2f%% (TFLite's XNNPACK %.2f%%); "
              "int8 outputs equal to XNNPACK's on %.2f%%" % (
                  100 * np.mean(yf.argmax(1) == lab), 100 * np.mean(yq.argmax(1) == lab),
                  100 * np.mean(yl.argmax(1) == lab), 100 * np.mean(yq == yl)))
    if a.only in (None, "resnet50"):
        import tensorflow as tf
        tf.keras.utils.set_random_seed(0)
        m = tf.keras.applications.ResNet50(weights=None, input_shape=(224, 224, 3), classes=1000)
        h5, tfl = os.path.join(d, "resnet50.h5"), os.path.join(d, "resnet50.tflite")
        m.save(h5)
        rng = np.random.default_rng(0)
        cal = rng.uniform(-1, 1, (100, 224, 224, 3)).astype(np.float32)
        conv = tf.lite.TFLiteConverter.from_keras_model(m)
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = lambda: ([cal[i:i + 1]] for i in range(len(cal)))
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        open(tfl, "wb").write(conv.convert())
        x = rng.uniform(-1, 1, (64, 224, 224, 3)).astype(np.float32)
        tf_, _ = systolic_time(sy, h5, x, d, 16, a.repeat)
        tq, yq = systolic_time(sy, tfl, x, d, 16, a.repeat)
        tl, yl = tflite_time(tfl, x, 16, a.threads, a.repeat)
        row("ResNet-50 224x224", len(x), tf_, tq, tl, os.path.getsize(h5), os.path.getsize(tfl))
        print("ResNet-50: systolic's int8 outputs equal to XNNPACK's on %.2f%%" % (100 * np.mean(yq == yl)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
