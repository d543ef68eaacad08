#!/usr/bin/env python3
"""Write the CIFAR-10 fixtures that tests/test_cifar.c reads, and the seed
corpus of tests/fuzz/fuzz_cifar.c.

    /usr/bin/python3 tools/make_cifar_fixtures.py

tests/data/cifar_tiny.tar.gz is cifar-10-binary.tar.gz in miniature,
written by Python's tarfile (GNU format, as the publisher's archive) and
gzip: cifar-10-batches-bin/ with data_batch_1.bin .. data_batch_5.bin and
test_batch.bin of one record each (1 label byte, then 3,072 random pixel
bytes: the red plane, the green, the blue, each 32 x 32 row-major), in a
shuffled order, beside batches.meta.txt and readme.html.
tests/data/cifar_tiny_expected.npz holds what Keras's cifar10.load_data()
makes of those records, computed by its own steps (keras/datasets/cifar.py
load_batch and cifar10.py): each batch reshaped to (N, 3, 32, 32), the
training batches stacked in order, the labels reshaped to (N, 1), and
x.transpose(0, 2, 3, 1) for channels last. The C test compares its load of
the archive with these arrays element by element.

The fuzz seeds (tests/fuzz/corpus/fuzz_cifar/) are small archives of one
record per batch, as the target reads them: valid (gzip'd and plain) and
with a label of 10, a batch of two records, a batch cut short, a member of
the Python version, and a truncated gzip stream. Everything is
deterministic (fixed seed, mtime 0).
"""
import gzip
import io
import os
import tarfile

import numpy as np

BATCHES = ["data_batch_%d.bin" % i for i in range(1, 6)] + ["test_batch.bin"]
ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")


def records(labels, pixels):
    """Binary records: per image its label byte, then its 3,072 bytes."""
    return b"".join(bytes([l]) + p.tobytes() for l, p in zip(labels, pixels))


def tar_bytes(members):
    """A GNU tar of (name, data) members; data None makes a directory."""
    f = io.BytesIO()
    with tarfile.open(fileobj=f, mode="w", format=tarfile.GNU_FORMAT) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.mtime = 0
            if data is None:
                info.type, info.mode = tarfile.DIRTYPE, 0o755
                t.addfile(info)
            else:
                info.size, info.mode = len(data), 0o644
                t.addfile(info, io.BytesIO(data))
    return f.getvalue()


def gz(data):
    return gzip.compress(data, mtime=0)


def archive(batches, order=(5, 4, 1, 0, 3, 2), prefix="cifar-10-batches-bin/"):
    """The members in a shuffled order, with the files that are not read."""
    members = [(prefix, None), (prefix + "batches.meta.txt", b"airplane\nautomobile\n")]
    members += [(prefix + BATCHES[b], batches[b]) for b in order]
    members += [(prefix + "readme.html", b"<meta HTTP-EQUIV=\"REFRESH\">\n")]
    return tar_bytes(members)


def keras_load(batches):
    """Keras's cifar10.load_data() steps on the binary records."""
    def load_batch(data):
        rows = np.frombuffer(data, dtype=np.uint8).reshape(-1, 3073)
        return rows[:, 1:].reshape(-1, 3, 32, 32), rows[:, 0]

    parts = [load_batch(batches[b]) for b in range(5)]
    x_train = np.concatenate([p[0] for p in parts])
    y_train = np.concatenate([p[1] for p in parts])
    x_test, y_test = load_batch(batches[5])
    y_train = np.reshape(y_train, (len(y_train), 1))
    y_test = np.reshape(y_test, (len(y_test), 1))
    x_train = x_train.transpose(0, 2, 3, 1)
    x_test = x_test.transpose(0, 2, 3, 1)
    return {"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test}


def main():
    rng = np.random.default_rng(10)
    labels = [0, 9, 3, 7, 5, 2]
    pixels = rng.integers(0, 256, size=(6, 3072), dtype=np.uint8)
    batches = [records([labels[b]], pixels[b : b + 1]) for b in range(6)]
    data = os.path.join(ROOT, "tests", "data")
    with open(os.path.join(data, "cifar_tiny.tar.gz"), "wb") as f:
        f.write(gz(archive(batches)))
    np.savez(os.path.join(data, "cifar_tiny_expected.npz"), **keras_load(batches))

    corpus = os.path.join(ROOT, "tests", "fuzz", "corpus", "fuzz_cifar")
    os.makedirs(corpus, exist_ok=True)

    def seed(name, data):
        with open(os.path.join(corpus, name), "wb") as f:
            f.write(data)

    # patterned pixels, so that the gzip'd seeds stay small
    flat = [records([b], [np.arange(3072, dtype=np.uint32).astype(np.uint8)]) for b in range(6)]
    seed("valid.tar.gz", gz(archive(flat)))
    seed("valid.tar", archive(flat, order=range(6)))
    bad = list(flat)
    bad[2] = b"\x0a" + flat[2][1:]
    seed("label-10.tar.gz", gz(archive(bad)))
    bad = list(flat)
    bad[4] = flat[4] * 2
    seed("two-records.tar.gz", gz(archive(bad)))
    bad = list(flat)
    bad[5] = flat[5][:3000]
    seed("short-batch.tar.gz", gz(archive(bad)))
    seed("python-version.tar.gz", gz(archive(flat, prefix="cifar-10-batches-py/")))
    seed("truncated.tar.gz", gz(archive(flat))[:700])


if __name__ == "__main__":
    main()
