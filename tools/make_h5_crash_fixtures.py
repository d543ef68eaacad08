#!/usr/bin/env python3
"""make_h5_crash_fixtures.py - damaged .h5 files that crash or hang libhdf5.

Makes the regression fixtures of tests/data/h5/: a small full Keras model
file written by systolic (tests/data/h5/tiny_cnn.json trained for one step
on Fashion-MNIST, saved with --save-model), then copies of it with 1 to 8
bytes of its metadata (the first 4 KB) changed at random, each read with
`systolic summary MUTANT.h5`. systolic reads HDF5 files in a child process
(src/io/h5_reader.c) and names what killed it: the mutants whose message
says libhdf5 crashed (one per signal and step) or timed out (first with a
limit of 3 s, then again with 20 s, to tell a hang from a slow read) are
kept, at most 5, as crash_<k>.h5 and hang_<k>.h5. docs/design/model-files.md
("Damaged-file fixtures") has what each did to libhdf5 in-process (gdb,
before the reader process) and what systolic says now. Deterministic for
a given seed and systolic build: the committed ones came from 3000 tries
with seed 13 (crash_1: try 97, crash_2: 440, crash_3: 1610, hang_1: 1849).

  SYSTOLIC_DATASETS=DIR python3 tools/make_h5_crash_fixtures.py build/systolic tests/data/h5 [TRIES [SEED]]

Before h5_reader.c, each of these files crashed or hung the process that
loaded it (Debian 12's libhdf5 1.10.8).
"""
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    cli, out = sys.argv[1], sys.argv[2]
    tries = int(sys.argv[3]) if len(sys.argv) > 3 else 600
    seed = int(sys.argv[4]) if len(sys.argv) > 4 else 13
    here = os.path.dirname(os.path.abspath(__file__))
    model_json = os.path.join(here, "..", "tests", "data", "h5", "tiny_cnn.json")
    tmp = tempfile.mkdtemp(prefix="systolic-h5-fixtures-")
    try:
        base = os.path.join(tmp, "base.h5")
        subprocess.run([cli, "train", model_json, "--dataset", "fashion_mnist", "--epochs", "1",
                        "--steps-per-epoch", "1", "--batch-size", "16", "--validation-steps", "1",
                        "--verbose", "0", "--save-model", base], check=True, stdout=subprocess.DEVNULL)
        data = open(base, "rb").read()
        rng = random.Random(seed)
        env = dict(os.environ, SYSTOLIC_H5_TIMEOUT="3")
        kept, seen = [], set()
        hangs = crashes = 0
        for i in range(tries):
            b = bytearray(data)
            for _ in range(rng.randint(1, 8)):
                b[rng.randrange(min(4096, len(b)))] = rng.randrange(256)
            path = os.path.join(tmp, "m.h5")
            with open(path, "wb") as f:
                f.write(b)
            r = subprocess.run([cli, "summary", path], env=env, capture_output=True, text=True,
                               errors="replace", timeout=60)
            m = re.search(r"damaged HDF5 file \(libhdf5 (crashed with \S+|timed out) ([^:;)]*)", r.stderr)
            if not m:
                continue
            hang = m.group(1) == "timed out"
            if hang and not (hangs or len(kept) >= 5):
                # a slow read (a huge damaged length copied) is not a hang:
                # keep only one that makes no progress for 20 s
                slow = subprocess.run([cli, "summary", path], env=dict(env, SYSTOLIC_H5_TIMEOUT="20"),
                                      capture_output=True, text=True, errors="replace", timeout=120)
                if "timed out" not in slow.stderr:
                    print(f"mutant {i}: slow, but not a hang")
                    continue
            key = (m.group(1), m.group(2) if not hang else "")
            print(f"mutant {i}: {m.group(1)} {m.group(2)}")
            if key in seen or len(kept) >= 5 or (hang and hangs) or (not hang and crashes >= 4):
                continue
            seen.add(key)
            if hang:
                hangs += 1
                name = f"hang_{hangs}.h5"
            else:
                crashes += 1
                name = f"crash_{crashes}.h5"
            shutil.copy(path, os.path.join(out, name))
            kept.append((name, i, m.group(0)))
        for name, i, msg in kept:
            print(f"{name}: mutant {i}: {msg})")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
