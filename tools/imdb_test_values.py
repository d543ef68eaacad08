#!/usr/bin/env python3
"""The expected values of tests/test_imdb.c, computed by Keras itself, and
the tar fixtures and fuzz seeds of the IMDB reader.

    .gl/bin/python tools/imdb_test_values.py            # prints the C tables
    .gl/bin/python tools/imdb_test_values.py --write    # also writes the files

Needs TensorFlow 2.15 (make bench-deps installs it in .gl/). It prints, as C
initializers to paste into tests/test_imdb.c:

- keras.utils.pad_sequences on a few sequences with every padding and
  truncating, maxlen None (0 here), shorter and longer than the longest,
  and two padding values;
- keras.preprocessing.text.text_to_word_sequence on tricky strings, next to
  the ASCII-only lower-casing systolic applies (imdb.py explains why); they
  differ only where a non-ASCII capital is lower-cased by Python 3;
- keras.datasets.imdb.load_data on the synthetic dataset the C test writes
  (the same reviews and word index as below), through a stand-in imdb.npz
  whose sequences are the reviews' word ranks in systolic's fixed order.
  Keras shuffles with numpy and systolic with its own RNG, so each split is
  printed sorted (label, then the sequence), and the C test sorts its
  result the same way before comparing.

When $SYSTOLIC_DATASETS is set it also rebuilds the real dataset the same
way (imdb/aclImdb_v1_labeled.tar.gz and imdb/imdb_word_index.json) and
prints order-free facts of load_data's result for the C test to check:
counts, labels, lengths, sums, how many words the index lacks.

With --write it also writes tests/data/tar_{ustar,gnu,pax}.tar[.gz]
(archives by Python's tarfile, which the C test reads back) and the seed
corpora tests/fuzz/corpus/fuzz_tar and fuzz_word_index.
"""
import gzip
import io
import json
import os
import sys
import tarfile

import numpy as np

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
from keras.src.datasets import imdb  # noqa: E402
from keras.src.preprocessing.text import text_to_word_sequence  # noqa: E402
from keras.src.utils.data_utils import pad_sequences  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

# ---- pad_sequences -----------------------------------------------------------

PAD_SEQUENCES = [[1], [2, 3], [4, 5, 6], [], [7, 8, 9, 10, 11]]


def print_pad():
    print("/* keras.utils.pad_sequences(%s, maxlen, padding=, truncating=, value=) */"
          % PAD_SEQUENCES)
    print("static const pad_case pad_cases[] = {")
    for maxlen in (None, 2, 4, 7):
        for padding in ("pre", "post"):
            for truncating in ("pre", "post"):
                for value in (0, -1):
                    x = pad_sequences(PAD_SEQUENCES, maxlen=maxlen, padding=padding,
                                      truncating=truncating, value=value)
                    vals = ", ".join(str(v) for v in x.flatten())
                    print('    {%d, "%s", "%s", %d, %d, {%s}},'
                          % (maxlen or 0, padding, truncating, value, x.shape[1], vals))
    print("};")


# ---- the tokenizer -----------------------------------------------------------

TOKENIZER_STRINGS = [
    "Hello, World! This is a TEST.",
    "I loved it.<br /><br />The end",
    "don't won't 'quoted' it's o'clock''",
    "  multiple   spaces\there\nand\n\nnewlines  ",
    "a-b_c/d\\e|f~g`h^i{j}k[l]m@n?o>p=q<r;s:t+u*v)w(x&y%z$#\"!",
    "123 4.5 $100 10/10 1990's",
    "\r\nwindows\rline\x0bvt\x0cff",
    "caf\u00e9 na\u00efve \u2026ellipsis\u2014dash \u201cquotes\u201d a\u00a0b",
    "Caf\u00c9 \u00c1ngela \u00c9COLE",
    "!!! ... ---",
    "",
]


def c_string(s):
    out = ""
    for b in s.encode("utf-8"):
        c = chr(b)
        if c == '"' or c == "\\":
            out += "\\" + c
        elif 0x20 <= b < 0x7F:
            out += c
        else:
            out += '\\x%02x""' % b
    return '"' + out + '"'


def ascii_lower_words(s):
    """What systolic does: Keras's filters and split, ASCII-only lower()."""
    low = "".join(c.lower() if c < "\x80" else c for c in s)
    return text_to_word_sequence(low, lower=False)


def print_tokenizer():
    print("/* keras.preprocessing.text.text_to_word_sequence(s), and systolic's words where")
    print(" * they differ (Python 3 lower-cases non-ASCII capitals; Keras's word index was")
    print(" * made lower-casing ASCII only) */")
    print("static const token_case token_cases[] = {")
    for s in TOKENIZER_STRINGS:
        keras_words = text_to_word_sequence(s)
        ours = ascii_lower_words(s)
        if ours != keras_words:
            print("    /* Keras: %s */" % ", ".join(c_string(w) for w in keras_words))
        words = ", ".join(c_string(w) for w in ours) or "NULL"
        print("    {%s, %d, {%s}}," % (c_string(s), len(ours), words))
    print("};")


# ---- load_data on the synthetic dataset ----------------------------------------

WORD_INDEX = {"the": 1, "movie": 2, "a": 3, "br": 4, "good": 5, "bad": 6, "it's": 7, "was": 8,
              "not": 9, "caf\u00e9": 10, "plot": 11, "great": 12}

# (split, label, id, rating, text): the same as tests/test_imdb.c's reviews[]
REVIEWS = [
    ("train", "pos", 0, 9, "The movie was GOOD.<br /><br />A good, good plot!"),
    ("train", "pos", 1, 10, "Great caf\u00e9; great plot -- it's great."),
    ("train", "pos", 12, 8, "good"),
    ("train", "neg", 3, 1, "Bad movie. The plot was bad, bad, BAD (not good)."),
    ("train", "neg", 2, 2, "It's not a good movie...unknownword"),
    ("train", "neg", 10, 4, "the the the the the the the the the the the the"),
    ("test", "pos", 0, 7, "A great movie, not bad.<br />"),
    ("test", "pos", 5, 9, "Good good good; testonlyword."),
    ("test", "neg", 0, 3, "The plot? Bad. The caf\u00e9? Bad."),
    ("test", "neg", 1, 1, "zzz yyy"),
]

# (num_words, skip_top, maxlen, start_char, oov_char, index_from); None as Keras's
LOAD_CASES = [
    (None, 0, None, 1, 2, 3),
    (8, 0, None, 1, 2, 3),
    (8, 0, None, 1, None, 3),
    (None, 4, None, 1, 2, 3),
    (20, 0, None, None, 2, 2),
    (None, 0, 10, 1, 2, 3),
    (12, 2, None, 7, 0, 5),
    (15, 3, 9, None, None, 1),
]


def raw_sequences(split):
    """Each review's ranks, in systolic's fixed order: neg by id, then pos."""
    rows = sorted((label == "pos", rid, text) for s, label, rid, _, text in REVIEWS if s == split)
    xs = [[WORD_INDEX[w] for w in ascii_lower_words(t) if w in WORD_INDEX] for _, _, t in rows]
    return xs, [int(p) for p, _, _ in rows]


def keras_load(case, npz_path):
    num_words, skip_top, maxlen, start_char, oov_char, index_from = case
    imdb.get_file = lambda *a, **k: npz_path
    return imdb.load_data(num_words=num_words, skip_top=skip_top, maxlen=maxlen,
                          start_char=start_char, oov_char=oov_char, index_from=index_from)


def c_opt(v, none):
    return none if v is None else v


def print_load(tmp):
    npz_path = os.path.join(tmp, "imdb.npz")
    x_train, y_train = raw_sequences("train")
    x_test, y_test = raw_sequences("test")
    obj = lambda xs: np.array([list(x) for x in xs] + [None], dtype=object)[:-1]  # noqa: E731
    np.savez(npz_path, x_train=obj(x_train), y_train=np.array(y_train),
             x_test=obj(x_test), y_test=np.array(y_test))
    print("/* keras.datasets.imdb.load_data(num_words, skip_top, maxlen, start_char=,")
    print(" * oov_char=, index_from=) on the synthetic reviews; each split sorted by")
    print(" * (label, sequence). Keras's None is 0 (num_words, maxlen) or -1. */")
    print("static const load_case load_cases[] = {")
    for case in LOAD_CASES:
        (xtr, ytr), (xte, yte) = keras_load(case, npz_path)
        num_words, skip_top, maxlen, start_char, oov_char, index_from = case
        print("    {{%d, %d, %d, 113, %d, %d, %d}," % (
            c_opt(num_words, 0), skip_top, c_opt(maxlen, 0), c_opt(start_char, -1),
            c_opt(oov_char, -1), index_from))
        for xs, ys in ((xtr, ytr), (xte, yte)):
            rows = sorted((int(y), list(x)) for x, y in zip(xs, ys))
            print("     {%d, {%s}}," % (len(rows), ", ".join(
                "{%d, %d, {%s}}" % (y, len(x), ", ".join(map(str, x)) or "0") for y, x in rows)))
        print("    },")
    print("};")
    try:
        keras_load((None, 0, 2, 1, 2, 3), npz_path)
        print("/* maxlen=2: no error?! */")
    except ValueError as e:
        print("/* maxlen=2: ValueError: %s */" % e)


# ---- the real dataset --------------------------------------------------------------

def real_facts(datasets, tmp):
    with open(os.path.join(datasets, "imdb", "imdb_word_index.json")) as f:
        word_index = json.load(f)
    words = {"train": [0, 0], "test": [0, 0]}  # [in the index, all]
    rows = {"train": [], "test": []}
    with tarfile.open(os.path.join(datasets, "imdb", "aclImdb_v1_labeled.tar.gz")) as t:
        for m in t:
            parts = m.name.split("/")
            if not m.isfile() or len(parts) != 4 or parts[2] not in ("pos", "neg"):
                continue
            rid = int(parts[3].split("_")[0])
            text = t.extractfile(m).read().decode("utf-8")
            ws = ascii_lower_words(text)
            seq = [word_index[w] for w in ws if w in word_index]
            words[parts[1]][0] += len(seq)
            words[parts[1]][1] += len(ws)
            rows[parts[1]].append((parts[2] == "pos", rid, seq))
    npz_path = os.path.join(tmp, "imdb.npz")
    split = {}
    for name in ("train", "test"):
        r = sorted(rows[name])
        split[name] = (np.array([x for _, _, x in r] + [None], dtype=object)[:-1],
                       np.array([int(p) for p, _, _ in r]))
    np.savez(npz_path, x_train=split["train"][0], y_train=split["train"][1],
             x_test=split["test"][0], y_test=split["test"][1])
    print("/* the real dataset: words of the reviews found in the word index / all words */")
    for name in ("train", "test"):
        print("/* %s: %d / %d = %.6f */" % (name, words[name][0], words[name][1],
                                         words[name][0] / words[name][1]))
    print("/* keras.datasets.imdb.load_data(...) on the rebuilt sequences: per split the")
    print(" * reviews, positive ones, values, their sum, how many are 1 and 2, the longest */")
    for case in [(None, 0, None, 1, 2, 3), (10000, 20, 500, 1, 2, 3)]:
        (xtr, ytr), (xte, yte) = keras_load(case, npz_path)
        print("/* %s */" % (case,))
        for xs, ys in ((xtr, ytr), (xte, yte)):
            flat = np.concatenate([np.array(x, dtype=np.int64) for x in xs])
            print("    {%d, %d, %d, %dll, %d, %d, %d}," % (
                len(xs), int(np.sum(ys)), len(flat), int(flat.sum()), int((flat == 1).sum()),
                int((flat == 2).sum()), max(len(x) for x in xs)))
    wi = word_index
    for w in ("the", "br", "movie", "na\u00efve", "it's", "\u00c1ngela"):
        print("/* word_index[%s] = %d */" % (c_string(w), wi[w]))


# ---- fixtures and seeds -----------------------------------------------------------

def tar_bytes(fmt, members, compress=False):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.mtime = 1309046400
            if data is None:
                info.type = tarfile.DIRTYPE
                t.addfile(info)
            else:
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
    raw = buf.getvalue()
    return gzip.compress(raw, mtime=0) if compress else raw


LONG = "aclImdb/" + "a-rather-long-directory-name/" * 4 + "and-a-file-name-of-some-length.txt"
FIXTURE_MEMBERS = [
    ("aclImdb", None),
    ("aclImdb/README", b"Large Movie Review Dataset v1.0\n"),
    (LONG, b"long name"),
    ("aclImdb/empty.txt", b""),
    ("aclImdb/train/pos/0_9.txt", b"A good movie.<br />Great!"),
]


def write_files():
    data = os.path.join(ROOT, "tests", "data")
    fixtures = {
        "tar_ustar.tar": tar_bytes(tarfile.USTAR_FORMAT, FIXTURE_MEMBERS),
        "tar_gnu.tar.gz": tar_bytes(tarfile.GNU_FORMAT, FIXTURE_MEMBERS, compress=True),
        "tar_pax.tar": tar_bytes(tarfile.PAX_FORMAT, FIXTURE_MEMBERS),
    }
    for name, b in fixtures.items():
        with open(os.path.join(data, name), "wb") as f:
            f.write(b)
    corpus = os.path.join(ROOT, "tests", "fuzz", "corpus")
    seeds = dict(fixtures)
    reviews = [("aclImdb/%s/%s/%d_%d.txt" % (s, label, rid, rating), t.encode("utf-8"))
               for s, label, rid, rating, t in REVIEWS]
    seeds["reviews.tar.gz"] = tar_bytes(tarfile.GNU_FORMAT, reviews, compress=True)
    whole = tar_bytes(tarfile.USTAR_FORMAT, FIXTURE_MEMBERS)
    seeds["truncated.tar"] = whole[:1500]
    bad = bytearray(whole)
    bad[148:156] = b"0000000\0"
    seeds["bad-checksum.tar"] = bytes(bad)
    os.makedirs(os.path.join(corpus, "fuzz_tar"), exist_ok=True)
    for name, b in seeds.items():
        with open(os.path.join(corpus, "fuzz_tar", name), "wb") as f:
            f.write(b)
    words = {
        "small.json": json.dumps(WORD_INDEX).encode("utf-8"),
        "escapes.json": b'{"caf\\u00e9": 2, "\\ud83d\\ude00": 1, "it\'s": 3}',
        "pretty.json": json.dumps(WORD_INDEX, indent=2).encode("utf-8"),
        "bad-syntax.json": b'{"the": 1,\n "a": 2,\n "b" 3}',
        "bad-rank.json": b'{"the": 1, "a": 1, "b": 0, "c": 2.5}',
        "not-object.json": b'[["the", 1]]',
    }
    os.makedirs(os.path.join(corpus, "fuzz_word_index"), exist_ok=True)
    for name, b in words.items():
        with open(os.path.join(corpus, "fuzz_word_index", name), "wb") as f:
            f.write(b)


def main():
    import tempfile
    print_pad()
    print()
    print_tokenizer()
    print()
    with tempfile.TemporaryDirectory() as tmp:
        print_load(tmp)
        if os.environ.get("SYSTOLIC_DATASETS"):
            print()
            real_facts(os.environ["SYSTOLIC_DATASETS"], tmp)
    if "--write" in sys.argv:
        write_files()


if __name__ == "__main__":
    main()
