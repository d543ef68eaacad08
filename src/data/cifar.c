/*
 * cifar.c - CIFAR-10 (Krizhevsky, 2009) from its binary version, as Keras's
 * cifar10.load_data() returns it: x uint8 (N, 32, 32, 3), channels last;
 * y uint8 (N, 1); 50,000 training and 10,000 test images.
 *
 * The publisher's cifar-10-binary.tar.gz holds the directory
 * cifar-10-batches-bin/ with five training batches, data_batch_1.bin ..
 * data_batch_5.bin, the test batch, test_batch.bin, and two files not read
 * here (batches.meta.txt, the class names; readme.html). A batch is 10,000
 * records of 3,073 bytes with nothing before or between them:
 *
 *   offset  bytes
 *        0      1  the label, 0..9
 *        1   1024  the red plane: 32 rows of 32 pixels, row-major
 *     1025   1024  the green plane
 *     2049   1024  the blue plane
 *
 * Keras reads the same batches in their Python version: it stacks
 * data_batch_1..5 in that order, reshapes each image's 3,072 bytes to
 * (3, 32, 32) and transposes the array with x.transpose(0, 2, 3, 1), so
 * x[n, h, w, c] is byte 1 + 1024 c + 32 h + w of record n; the labels become
 * a column, y reshaped to (N, 1). The same is done here, record by record.
 *
 * The archive is read front to back through the tar reader (tar.c), so the
 * members may come in any order; each batch is read whole (30.7 MB) and its
 * records are written straight into the split's tensors. Its size is checked
 * before its data is read. After the last member the rest of the archive is
 * read too, so that a gzip'd archive's CRC is checked, and only then are the
 * missing batches named.
 *
 * Errors are SY_ERR_CORRUPT naming the archive, the member and the byte
 * offset: a batch that is not a whole number of records or holds a number
 * of records other than 10,000 (the offset of its header), a label above 9
 * (the record, its offset in the member and in the uncompressed tar), a
 * batch that is missing, appears twice or is not a regular file, and what
 * the tar reader finds (damaged headers or gzip data, truncation). An
 * archive of the Python version (cifar-10-batches-py/) is named as such.
 *
 * Cost, measured on this machine with an archive of random pixels of the
 * real one's size (the real file is not here): its SHA-256 0.7 s, then
 * reading, inflating and transposing 0.45 s, mostly page faults and copies
 * of the 184 MB (the file read whole, the tensors, each batch's buffer);
 * the transposition itself 0.03 s.
 */
#include "data_internal.h"

#include <limits.h>
#include <string.h>

#define CIFAR_SIDE      32
#define CIFAR_PLANE     (CIFAR_SIDE * CIFAR_SIDE) /* 1,024 */
#define CIFAR_CHANNELS  3
#define CIFAR_PIXELS    (CIFAR_PLANE * CIFAR_CHANNELS) /* 3,072 */
#define CIFAR_RECORD    (1 + CIFAR_PIXELS)             /* 3,073 */
#define CIFAR_CLASSES   10
#define CIFAR_TRAIN     5 /* training batches */
#define CIFAR_BATCHES   (CIFAR_TRAIN + 1)
#define TAR_HEADER_SIZE 512

static const char batch_dir[] = "cifar-10-batches-bin/";
static const char python_dir[] = "cifar-10-batches-py/";

/* In the split's order: the training batches, then the test batch. */
static const char *const batch_names[CIFAR_BATCHES] = {"data_batch_1.bin", "data_batch_2.bin",
                                                       "data_batch_3.bin", "data_batch_4.bin",
                                                       "data_batch_5.bin", "test_batch.bin"};

/* A member's path without a leading "./". */
static const char *member_path(const char *name) {
    return strncmp(name, "./", 2) == 0 ? name + 2 : name;
}

/* The batch a member holds (0..5), or -1 when it is not one. */
static int batch_of(const char *name) {
    const char *p = member_path(name);
    if (strncmp(p, batch_dir, sizeof batch_dir - 1) != 0) return -1;
    p += sizeof batch_dir - 1;
    for (int b = 0; b < CIFAR_BATCHES; b++)
        if (strcmp(p, batch_names[b]) == 0) return b;
    return -1;
}

/* One image: (3, 32, 32) planes to (32, 32, 3), as Keras's transpose.
 * Written as three named planes with restrict, GCC vectorises it: 0.03 s
 * for the 60,000 images here, where the loop over (pixel, channel) took
 * 0.13 s. */
static void record_to_hwc(uint8_t *restrict hwc /* (32, 32, 3) */,
                          const uint8_t *restrict planes /* (3, 32, 32) */) {
    const uint8_t *r = planes, *g = planes + CIFAR_PLANE, *b = planes + 2 * CIFAR_PLANE;
    for (int p = 0; p < CIFAR_PLANE; p++) {
        hwc[3 * p] = r[p];
        hwc[3 * p + 1] = g[p];
        hwc[3 * p + 2] = b[p];
    }
}

typedef struct cifar_load {
    const char *what; /* the archive, in messages */
    int64_t records;  /* per batch */
    bool seen[CIFAR_BATCHES];
    uint64_t header_at[CIFAR_BATCHES];
    bool python; /* a member of the Python version was seen */
} cifar_load;

/* The member's size must be `records` whole records. */
static sy_status check_size(const cifar_load *l, const tar_entry *e) {
    uint64_t want = (uint64_t)l->records * CIFAR_RECORD;
    if (e->size == want) return SY_OK;
    if (e->size % CIFAR_RECORD)
        return sy_error(SY_ERR_CORRUPT,
                        "%s: the member '%s' (header at byte %llu) has %llu bytes, not a whole "
                        "number of %d-byte records (1 label byte and %d pixel bytes): %llu "
                        "records and %llu bytes more; a batch has %lld records, %llu bytes",
                        l->what, e->name, (unsigned long long)e->offset,
                        (unsigned long long)e->size, CIFAR_RECORD, CIFAR_PIXELS,
                        (unsigned long long)(e->size / CIFAR_RECORD),
                        (unsigned long long)(e->size % CIFAR_RECORD), (long long)l->records,
                        (unsigned long long)want);
    return sy_error(SY_ERR_CORRUPT,
                    "%s: the member '%s' (header at byte %llu) holds %llu records (%llu bytes), "
                    "expected %lld (%llu bytes): every CIFAR-10 batch holds the same number",
                    l->what, e->name, (unsigned long long)e->offset,
                    (unsigned long long)(e->size / CIFAR_RECORD), (unsigned long long)e->size,
                    (long long)l->records, (unsigned long long)want);
}

/* Batch b's records (data, already checked to be l->records of them) into
 * rows [first, first + records) of x (N, 32, 32, 3) and y (N, 1). */
static sy_status decode_batch(const cifar_load *l, const tar_entry *e, const uint8_t *data,
                              int64_t first, uint8_t *x, uint8_t *y) {
    for (int64_t i = 0; i < l->records; i++) {
        const uint8_t *rec = data + i * CIFAR_RECORD;
        if (rec[0] >= CIFAR_CLASSES) {
            uint64_t at = (uint64_t)i * CIFAR_RECORD;
            return sy_error(SY_ERR_CORRUPT,
                            "%s: the member '%s', record %lld (byte %llu of the member, byte %llu "
                            "of the uncompressed tar): label %u, expected 0..%d",
                            l->what, e->name, (long long)i, (unsigned long long)at,
                            (unsigned long long)(e->offset + TAR_HEADER_SIZE + at), rec[0],
                            CIFAR_CLASSES - 1);
        }
        y[first + i] = rec[0];
        record_to_hwc(x + (first + i) * CIFAR_PIXELS, rec + 1);
    }
    return SY_OK;
}

/* Read one member that names a batch. */
static sy_status read_batch(cifar_load *l, tar_reader *tar, const tar_entry *e, int b,
                            sy_data_split *out) {
    if (e->type != '0')
        return sy_error(SY_ERR_CORRUPT,
                        "%s: the member '%s' (header at byte %llu) is not a regular file (tar "
                        "type '%c')",
                        l->what, e->name, (unsigned long long)e->offset, e->type);
    if (l->seen[b])
        return sy_error(SY_ERR_CORRUPT,
                        "%s: the member '%s' appears twice (headers at bytes %llu "
                        "and %llu)",
                        l->what, e->name, (unsigned long long)l->header_at[b],
                        (unsigned long long)e->offset);
    l->seen[b] = true;
    l->header_at[b] = e->offset;
    sy_status st = check_size(l, e);
    if (st) return st;
    uint8_t *data;
    size_t n;
    if ((st = tar_read(tar, &data, &n)))
        return sy_error(st, "%s (reading the member '%s')", sy_last_error(), e->name);
    bool test = b == CIFAR_TRAIN;
    sy_tensor *x = test ? out->x_test : out->x_train, *y = test ? out->y_test : out->y_train;
    return decode_batch(l, e, data, test ? 0 : b * l->records, sy_tensor_data(x),
                        sy_tensor_data(y));
}

/* Every batch was found, or the error names the first one missing. */
static sy_status check_found(const cifar_load *l) {
    for (int b = 0; b < CIFAR_BATCHES; b++) {
        if (l->seen[b]) continue;
        return sy_error(SY_ERR_CORRUPT,
                        "%s: no member %s%s: the binary version of CIFAR-10 "
                        "(cifar-10-binary.tar.gz) has data_batch_1.bin .. data_batch_5.bin and "
                        "test_batch.bin in %s%s",
                        l->what, batch_dir, batch_names[b], batch_dir,
                        l->python ? "; this archive holds the Python version "
                                    "(cifar-10-batches-py/, cifar-10-python.tar.gz), which "
                                    "systolic does not read"
                                  : "");
    }
    return SY_OK;
}

static sy_status new_images(int64_t n, sy_tensor **x, sy_tensor **y) {
    sy_status st = sy_tensor_new(
        SY_U8, sy_shape_of(4, n, (int64_t)CIFAR_SIDE, (int64_t)CIFAR_SIDE, (int64_t)CIFAR_CHANNELS),
        x);
    return st ? st : sy_tensor_new(SY_U8, sy_shape_of(2, n, (int64_t)1), y);
}

sy_status cifar10_load_tar(tar_reader *tar, int64_t records, sy_data_split *out) {
    memset(out, 0, sizeof *out);
    SY_ASSERT(records > 0 && records <= INT64_MAX / (CIFAR_TRAIN * CIFAR_RECORD));
    cifar_load l = {.what = tar_name(tar), .records = records};
    sy_status st = new_images(CIFAR_TRAIN * records, &out->x_train, &out->y_train);
    if (!st) st = new_images(records, &out->x_test, &out->y_test);
    while (!st) {
        const tar_entry *e;
        if ((st = tar_next(tar, &e)) || !e) break;
        int b = batch_of(e->name);
        if (b >= 0)
            st = read_batch(&l, tar, e, b, out);
        else if (strncmp(member_path(e->name), python_dir, sizeof python_dir - 1) == 0)
            l.python = true;
    }
    if (!st) st = check_found(&l);
    if (st) sy_data_split_free(out);
    return st;
}

sy_status cifar10_load_file(const char *archive, int64_t records, sy_data_split *out) {
    memset(out, 0, sizeof *out);
    tar_reader *tar = NULL;
    sy_status st = tar_open_file(archive, &tar);
    if (!st) st = cifar10_load_tar(tar, records, out);
    tar_close(tar);
    return st;
}

sy_status sy_cifar10_load_data(sy_data_split *out) {
    memset(out, 0, sizeof *out);
    char archive[PATH_MAX];
    sy_status st = sy_dataset_file("cifar10", "cifar-10-binary.tar.gz", archive, sizeof archive);
    return st ? st : cifar10_load_file(archive, CIFAR10_RECORDS, out);
}
