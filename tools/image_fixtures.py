#!/usr/bin/env python3
"""image_fixtures.py - small PNG and JPEG images with what TensorFlow
decodes from them, for tests/test_features.c (so the decoders are checked
against TensorFlow without it) and the fuzzers' seeds (issue 17, TFRecord
layouts).

    .venv/bin/python tools/image_fixtures.py      (TensorFlow 2.15: make deps)

Writes into tests/data/images/:

  *.png, *.jpg      images of 7 x 5 pixels (odd sizes, so chroma
                    subsampling and interlacing have edges): PNGs of 8-bit
                    gray, gray+alpha, RGB, RGBA, 16-bit RGB (tf.io.encode_png),
                    a palette PNG with a tRNS chunk and an interlaced one
                    (written here, byte by byte); JPEGs baseline RGB,
                    progressive RGB, grayscale (tf.io.encode_jpeg);
  expected.json     for each image and channels 0, 1, 3 (and 4 for PNGs):
                    the pixels tf.io.decode_image gives (shape, values;
                    it takes channels 0, 1, 3, 4, and a JPEG no 4),
                    and tf.image.resize(decode_image(x, 3), [4, 9]) as
                    float32 bit patterns;

and the images into tests/fuzz/corpus/fuzz_png and fuzz_jpeg.
"""
import json
import os
import struct
import sys
import zlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "images")
H, W = 5, 7


def pattern(channels, dtype=np.uint8, top=255):
    """Smooth ramps with a few sharp edges: what JPEG's DCT and upsampling see."""
    y, x = np.mgrid[0:H, 0:W]
    planes = [(x * 37 + y * 11) % (top + 1), (y * 53 + 7 * x * x) % (top + 1), ((x + y) % 3) * (top // 2),
              np.full((H, W), top - 3)]
    return np.stack(planes[:channels], axis=-1).astype(dtype)


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xffffffff)


def png_palette():
    """A palette PNG with a tRNS chunk: decode_image gives RGBA for channels 0."""
    palette = bytes([0, 0, 0, 255, 0, 0, 0, 255, 0, 0, 0, 255, 200, 100, 50])
    trns = bytes([255, 128, 0])
    rows = b"".join(b"\0" + bytes((x + y) % 5 for x in range(W)) for y in range(H))
    ihdr = struct.pack(">IIBBBBB", W, H, 8, 3, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"PLTE", palette) + chunk(b"tRNS", trns) +
            chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))


def png_interlaced():
    """An Adam7-interlaced 8-bit RGB PNG (TensorFlow's encoder never interlaces)."""
    img = pattern(3)
    passes = [(0, 0, 8, 8), (0, 4, 8, 8), (4, 0, 8, 4), (0, 2, 4, 4), (2, 0, 4, 2), (0, 1, 2, 2), (1, 0, 2, 1)]
    raw = b""
    for y0, x0, dy, dx in passes:
        sub = img[y0::dy, x0::dx]
        if sub.size == 0:
            continue
        raw += b"".join(b"\0" + row.tobytes() for row in sub)
    ihdr = struct.pack(">IIBBBBB", W, H, 8, 2, 0, 0, 1)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(raw)) +
            chunk(b"IEND", b""))


def main():
    os.makedirs(OUT, exist_ok=True)
    images = {
        "gray.png": tf.io.encode_png(pattern(1)).numpy(),
        "gray_alpha.png": tf.io.encode_png(pattern(2)).numpy(),
        "rgb.png": tf.io.encode_png(pattern(3)).numpy(),
        "rgba.png": tf.io.encode_png(pattern(4)).numpy(),
        "rgb16.png": tf.io.encode_png(pattern(3, np.uint16, 65535)).numpy(),
        "palette.png": png_palette(),
        "interlaced.png": png_interlaced(),
        "baseline.jpg": tf.io.encode_jpeg(pattern(3), quality=90).numpy(),
        "progressive.jpg": tf.io.encode_jpeg(pattern(3), quality=75, progressive=True).numpy(),
        "gray.jpg": tf.io.encode_jpeg(pattern(1), quality=95).numpy(),
    }
    expected = {}
    for name, data in sorted(images.items()):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
        corpus = os.path.join(ROOT, "tests", "fuzz", "corpus", "fuzz_png" if name.endswith(".png") else "fuzz_jpeg")
        os.makedirs(corpus, exist_ok=True)
        with open(os.path.join(corpus, name), "wb") as f:
            f.write(data)
        cases = {}
        for channels in ([0, 1, 3, 4] if name.endswith(".png") else [0, 1, 3]):
            img = tf.io.decode_image(data, channels=channels).numpy()
            cases[str(channels)] = {"shape": list(img.shape), "values": img.flatten().tolist()}
        resized = tf.image.resize(tf.io.decode_image(data, channels=3), [4, 9]).numpy().astype(np.float32)
        expected[name] = {"decoded": cases, "resized_4x9": {"shape": list(resized.shape),
                                                             "bits": resized.view(np.uint32).flatten().tolist()}}
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, separators=(",", ":"))
    print("wrote %d images and expected.json to %s" % (len(images), OUT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
