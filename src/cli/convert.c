/*
 * convert.c - `systolic convert`: a dataset as sharded TFRecord files of
 * tf.train.Example records, named as TensorFlow's tools name them
 * (OUTDIR/train-00000-of-00006.tfrecord, OUTDIR/test-00000-of-00001.tfrecord),
 * for tf.data.TFRecordDataset or systolic's own pipeline.
 *
 * What each record holds:
 *
 *   images (fashion_mnist, mnist, IDX files): "image", a bytes_list of one
 *     value, the H*W*C raw uint8 pixels, row-major, channels last;
 *     "height", "width", "channels", int64; "label", int64 (when there are
 *     labels). As TensorFlow's TFRecord tutorial stores images: the bytes
 *     with their dimensions beside them, read back with
 *     tf.io.decode_raw(x["image"], tf.uint8). Raw bytes keep a 28x28 image
 *     one 784-byte value; an int64_list would spend a varint per pixel and
 *     parse far slower, and PNG would need a decoder (libpng) to read back.
 *   imdb: "text", an int64_list, the review's word indices exactly as
 *     Keras's imdb.load_data() returns them with its defaults (start mark
 *     1, out-of-vocabulary 2, ranks from 3, every word), not padded; "label",
 *     int64, 1 for positive. Padding to 250 words and a 15,000-word
 *     vocabulary are the tutorial model's choices, not the data's: a reader
 *     pads (padded_batch, pad_sequences) and maps indices >= its vocabulary
 *     to 2 itself, and the files serve every model.
 *
 * Shards: --shards N files per split, records in order (shard k holds a
 * contiguous range); by default one file per 10,000 records, so the 60,000
 * Fashion-MNIST training images make 6 files of about 5 MB: more files than
 * readers for parallel, interleaved reads and file-level shuffling, as
 * tf.data's performance guide advises, without files so small that opening
 * them costs more than reading them.
 *
 * Files: each shard is written atomically (sy_tfrecord_writer: a temporary
 * file renamed into place at close), and OUTDIR is created. A careful tool
 * neither mixes nor silently replaces data sets: shards of a split that
 * already exist in OUTDIR (of any count) are refused unless --overwrite;
 * with --overwrite the new shards replace them, and once the split is
 * complete the old shards with other names (another shard count) are
 * removed, so that a glob finds one whole set. A run that fails removes the
 * shards it wrote for the split that failed.
 */
#include "cli_internal.h"

#include "io/io_internal.h" /* io_make_dirs */

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fnmatch.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define RECORDS_PER_SHARD 10000
#define MAX_SHARDS        99999 /* five digits in the names */

/* One split's records: images (with their labels, if any) or sequences. */
typedef struct split_data {
    const char *name;
    int64_t count;
    const sy_tensor *images;  /* uint8 (N, H, W) or (N, H, W, C) */
    const sy_tensor *labels;  /* (N,) integers, or NULL */
    const sy_sequences *text; /* IMDB's reviews */
} split_data;

typedef struct convert_opts {
    const char *images, *labels, *split, *compression;
    int64_t shards;
    bool overwrite;
} convert_opts;

static void usage(FILE *out, const flag *f, int n) {
    fprintf(
        out,
        "usage: systolic convert DATASET OUTDIR [flags]\n"
        "       systolic convert --images PATH [--labels PATH] [--split NAME] OUTDIR [flags]\n\n"
        "Write a dataset as sharded TFRecord files of tf.train.Example records, as TensorFlow's "
        "tools name them:\n"
        "OUTDIR/train-00000-of-00006.tfrecord ... OUTDIR/test-00000-of-00001.tfrecord.\n\n"
        "datasets and their features:\n"
        "  fashion_mnist, mnist  \"image\": bytes, the 28x28 raw uint8 pixels, row-major; "
        "\"height\", \"width\",\n"
        "                        \"channels\": int64 (28, 28, 1); \"label\": int64, 0..9\n"
        "  imdb                  \"text\": int64 list, the word indices of Keras's "
        "imdb.load_data() (start 1,\n"
        "                        out-of-vocabulary 2, ranks from 3, every word; not padded); "
        "\"label\": int64, 1 positive\n"
        "  --images PATH         IDX files: \"image\", \"height\", \"width\", \"channels\" as "
        "above for uint8 images\n"
        "                        (N, H, W) or (N, H, W, C), and \"label\" from --labels (N,)\n\n"
        "flags:\n");
    flags_help(out, f, n);
    fprintf(
        out,
        "\nRead back in TensorFlow (compression_type=\"GZIP\" for --compression GZIP):\n"
        "  spec = {\"image\": tf.io.FixedLenFeature([], tf.string), \"label\": "
        "tf.io.FixedLenFeature([], tf.int64)}\n"
        "  def parse(record):\n"
        "      x = tf.io.parse_single_example(record, spec)\n"
        "      return tf.reshape(tf.io.decode_raw(x[\"image\"], tf.uint8), [28, 28, 1]), "
        "x[\"label\"]\n"
        "  ds = "
        "tf.data.TFRecordDataset(tf.io.gfile.glob(\"OUTDIR/train-*.tfrecord\")).map(parse)\n\n"
        "Datasets are read from $SYSTOLIC_DATASETS, then the cache, else downloaded (IMDB's review "
        "archive\n"
        "has no public download: put aclImdb_v1_labeled.tar.gz in $SYSTOLIC_DATASETS/imdb/).\n");
}

static int fail(const char *what) {
    fprintf(stderr, "systolic convert: %s%s%s\n", what ? what : "", what ? ": " : "",
            sy_last_error());
    return 1;
}

/* The serialized Example of record i; *words is scratch for a review's indices as int64. */
static sy_status make_example(const split_data *s, int64_t i, int64_t **words, int64_t *cap,
                              sy_tensor **out) {
    *out = NULL;
    sy_example *e;
    sy_status st = sy_example_new(&e);
    if (st) return st;
    if (s->images) {
        sy_shape sh = sy_tensor_shape(s->images);
        int64_t dims[3] = {sh.dims[1], sh.dims[2], sh.rank == 4 ? sh.dims[3] : 1},
                n = dims[0] * dims[1] * dims[2];
        sy_string image = {(const uint8_t *)sy_tensor_data(s->images) + i * n, n};
        st = sy_example_add_bytes(e, "image", &image, 1);
        const char *names[3] = {"height", "width", "channels"};
        for (int d = 0; d < 3 && !st; d++) st = sy_example_add_int64s(e, names[d], &dims[d], 1);
    } else {
        int64_t n = sy_sequences_length(s->text, i);
        const int32_t *d = sy_sequences_data(s->text, i);
        if (n > *cap) {
            sy_free(*words);
            *words = sy_malloc(sizeof **words * (size_t)n);
            *cap = *words ? n : 0;
            if (!*words) st = SY_ERR_OUT_OF_MEMORY;
        }
        for (int64_t k = 0; k < n && !st; k++) (*words)[k] = d[k];
        if (!st) st = sy_example_add_int64s(e, "text", *words, n);
    }
    if (s->labels && !st) {
        int64_t label = (int64_t)sy_tensor_get(s->labels, i);
        st = sy_example_add_int64s(e, "label", &label, 1);
    }
    if (!st) st = sy_example_serialize(e, out);
    sy_example_free(e);
    return st;
}

/* The shards of `split` in dir (any shard count, by their names): how many,
 * and the first one's path; with remove_other_than > 0, those of another
 * count are removed. */
static int64_t shards_in(const char *dir, const char *split, int64_t remove_other_than, char *first,
                         size_t size) {
    char pattern[256], keep[48];
    snprintf(pattern, sizeof pattern,
             "%s-[0-9][0-9][0-9][0-9][0-9]-of-[0-9][0-9][0-9][0-9][0-9].tfrecord", split);
    snprintf(keep, sizeof keep, "-of-%05lld.tfrecord", (long long)remove_other_than);
    DIR *d = opendir(dir);
    int64_t n = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (fnmatch(pattern, e->d_name, 0) != 0) continue;
        if (!n && first) snprintf(first, size, "%s/%s", dir, e->d_name);
        n++;
        if (remove_other_than > 0 && !strstr(e->d_name, keep)) {
            char path[4096];
            int len = snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            if (len > 0 && (size_t)len < sizeof path && unlink(path) != 0)
                fprintf(stderr, "systolic convert: cannot remove '%s': %s\n", path,
                        strerror(errno));
        }
    }
    if (d) closedir(d);
    return n;
}

static void shard_path(char *path, size_t size, const char *dir, const char *split, int64_t k,
                       int64_t shards) {
    snprintf(path, size, "%s/%s-%05lld-of-%05lld.tfrecord", dir, split, (long long)k,
             (long long)shards);
}

/* Write one split's shards; on failure remove the ones written. */
static int write_split(const split_data *s, const char *dir, const convert_opts *o,
                       sy_compression c) {
    int64_t shards = o->shards ? o->shards : (s->count + RECORDS_PER_SHARD - 1) / RECORDS_PER_SHARD;
    if (shards > s->count) shards = s->count; /* no empty shards */
    if (shards < 1) shards = 1;
    char path[4096];
    int64_t *words = NULL, cap = 0, bytes = 0, k;
    sy_status st = SY_OK;
    for (k = 0; k < shards && !st; k++) {
        int64_t begin, end;
        sy_split_range(s->count, (int)k, (int)shards, &begin, &end);
        shard_path(path, sizeof path, dir, s->name, k, shards);
        sy_tfrecord_writer *w;
        if ((st = sy_tfrecord_writer_open(path, c, &w))) break;
        for (int64_t i = begin; i < end && !st; i++) {
            sy_tensor *ex;
            if (!(st = make_example(s, i, &words, &cap, &ex))) {
                sy_string b = sy_tensor_string(ex, 0);
                st = sy_tfrecord_write(w, b.data, (size_t)b.size);
            }
            sy_tensor_free(ex);
        }
        if (st) {
            sy_tfrecord_writer_abort(w);
            break;
        }
        if ((st = sy_tfrecord_writer_close(w))) break;
        struct stat sb;
        if (stat(path, &sb) == 0) bytes += (int64_t)sb.st_size;
    }
    sy_free(words);
    if (st) {
        fprintf(stderr, "systolic convert: %s: %s\n", s->name, sy_last_error());
        for (int64_t j = 0; j < k; j++) {
            shard_path(path, sizeof path, dir, s->name, j, shards);
            unlink(path);
        }
        fprintf(stderr, "systolic convert: %s: the %lld shard%s written by this run were removed\n",
                s->name, (long long)k, k == 1 ? "" : "s");
        return 1;
    }
    if (o->overwrite) shards_in(dir, s->name, shards, NULL, 0);
    shard_path(path, sizeof path, dir, s->name, 0, shards);
    printf("%s: %lld records, %.1f MB, in %lld file%s: %s%s\n", s->name, (long long)s->count,
           (double)bytes / 1e6, (long long)shards, shards == 1 ? "" : "s", path,
           shards > 1 ? " ..." : "");
    return 0;
}

/* A name that is safe in a file name and a glob: letters, digits, '_', '-', '.'. */
static bool plain_name(const char *s) {
    if (!*s || *s == '.') return false;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '_' && *s != '-' && *s != '.') return false;
    return true;
}

/* The IDX files of --images and --labels, checked. */
static int load_idx(const convert_opts *o, sy_tensor **images, sy_tensor **labels) {
    char buf[SY_SHAPE_STR_MAX];
    if (sy_idx_read(o->images, images)) return fail(NULL);
    sy_shape s = sy_tensor_shape(*images);
    if (sy_tensor_dtype(*images) != SY_U8 || s.rank < 3 || s.rank > 4) {
        fprintf(stderr,
                "systolic convert: %s holds %s %s; images are uint8 (N, H, W) or (N, H, W, C)\n",
                o->images, sy_dtype_name(sy_tensor_dtype(*images)),
                sy_shape_format(&s, buf, sizeof buf));
        return 1;
    }
    if (!o->labels) return 0;
    if (sy_idx_read(o->labels, labels)) return fail(NULL);
    sy_shape l = sy_tensor_shape(*labels);
    sy_dtype dt = sy_tensor_dtype(*labels);
    if (l.rank != 1 || l.dims[0] != s.dims[0] || (dt != SY_U8 && dt != SY_I32)) {
        fprintf(stderr,
                "systolic convert: %s holds %s %s; labels for %lld images are integers (%lld,)\n",
                o->labels, sy_dtype_name(dt), sy_shape_format(&l, buf, sizeof buf),
                (long long)s.dims[0], (long long)s.dims[0]);
        return 1;
    }
    return 0;
}

int cmd_convert(int argc, char **argv) {
    convert_opts o = {NULL, NULL, "train", "NONE", 0, false};
    flag f[] = {
        {"--images", FLAG_STRING, &o.images, "PATH",
         "an IDX file of uint8 images, (N, H, W) or (N, H, W, C), gzip'd or not, instead of "
         "DATASET",
         .set = false},
        {"--labels", FLAG_STRING, &o.labels, "PATH",
         "an IDX file of their labels, (N,) integers (default: none)", .set = false},
        {"--split", FLAG_STRING, &o.split, "NAME",
         "the split --images makes: OUTDIR/NAME-00000-of-0000N.tfrecord (default train)",
         .set = false},
        {"--shards", FLAG_INT, &o.shards, "N",
         "files per split (default 0: one per 10,000 records; at most one per record)",
         .set = false, .min = 0, .max = MAX_SHARDS},
        {"--compression", FLAG_STRING, &o.compression, "NAME",
         "NONE, ZLIB or GZIP, TFRecordOptions' compression_type (default NONE)", .set = false},
        {"--overwrite", FLAG_BOOL, &o.overwrite, "",
         "replace the shards of the same splits in OUTDIR (default: refuse)", .set = false},
    };
    int n_flags = (int)(sizeof f / sizeof f[0]);
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout, f, n_flags);
            return 0;
        }
    const char *pos[2];
    int n_pos;
    int rc = flags_parse(argc, argv, f, n_flags, pos, 2, &n_pos, "convert");
    if (rc) return rc;
    int want = o.images ? 1 : 2;
    const char *bad =
        n_pos != want ? (o.images ? "with --images, give only OUTDIR" : "give DATASET and OUTDIR")
        : o.labels && !o.images ? "--labels goes with --images"
        : f[2].set && !o.images ? "--split goes with --images (a dataset has its own splits)"
        : !plain_name(o.split)  ? "--split must be letters, digits, '_', '-' or '.'"
        : !*pos[want - 1]       ? "OUTDIR is empty"
                                : NULL;
    if (bad) {
        fprintf(stderr, "systolic convert: %s (see systolic convert --help)\n", bad);
        return 2;
    }
    sy_compression c;
    if (sy_compression_from_name(o.compression, &c))
        return flag_refused("convert", "--compression");
    const char *dataset = o.images ? NULL : pos[0], *outdir = pos[want - 1];
    if (dataset && strcmp(dataset, "fashion_mnist") && strcmp(dataset, "mnist") &&
        strcmp(dataset, "imdb")) {
        fprintf(stderr,
                "systolic convert: unknown dataset '%s'; fashion_mnist, mnist, imdb, or IDX files "
                "with --images\n",
                dataset);
        return 2;
    }
    split_data splits[2];
    int n_splits = dataset ? 2 : 1;
    const char *names[2] = {dataset ? "train" : o.split, "test"};
    char first[4096];
    for (int k = 0; k < n_splits; k++) {
        int64_t found = shards_in(outdir, names[k], 0, first, sizeof first);
        if (found && !o.overwrite) {
            fprintf(
                stderr,
                "systolic convert: %s already exists%s; pass --overwrite to replace the %s split\n",
                first, found > 1 ? " (and more of its shards)" : "", names[k]);
            return 1;
        }
    }

    sy_data_split images = {0};
    sy_imdb_split imdb = {0};
    sy_tensor *idx_images = NULL, *idx_labels = NULL;
    rc = 0;
    if (!dataset) {
        rc = load_idx(&o, &idx_images, &idx_labels);
        splits[0] = (split_data){o.split, idx_images ? sy_tensor_shape(idx_images).dims[0] : 0,
                                 idx_images, idx_labels, NULL};
    } else if (!strcmp(dataset, "imdb")) {
        if (sy_imdb_load_data(NULL, &imdb)) rc = fail(dataset);
        splits[0] = (split_data){"train", sy_sequences_count(imdb.x_train), NULL, imdb.y_train,
                                 imdb.x_train};
        splits[1] =
            (split_data){"test", sy_sequences_count(imdb.x_test), NULL, imdb.y_test, imdb.x_test};
    } else {
        if ((!strcmp(dataset, "mnist") ? sy_mnist_load_data : sy_fashion_mnist_load_data)(&images))
            rc = fail(dataset);
        for (int k = 0; k < 2 && !rc; k++) {
            sy_tensor *x = k ? images.x_test : images.x_train,
                      *y = k ? images.y_test : images.y_train;
            splits[k] = (split_data){names[k], sy_tensor_shape(x).dims[0], x, y, NULL};
        }
    }
    if (!rc && io_make_dirs(outdir)) rc = fail(NULL);
    for (int k = 0; k < n_splits && !rc; k++) rc = write_split(&splits[k], outdir, &o, c);
    sy_data_split_free(&images);
    sy_imdb_split_free(&imdb);
    sy_tensor_free(idx_images);
    sy_tensor_free(idx_labels);
    return rc;
}
