/*
 * events.c - TensorBoard event files, written as TensorFlow 2.15's summary
 * writer (tf.summary.create_file_writer, whose C++ side is EventsWriter)
 * writes them, so that TensorBoard reads them as it reads TensorFlow's.
 *
 * The file. One per writer, in its directory (created with its parents),
 * named as TensorFlow names it:
 *
 *   events.out.tfevents.<seconds, 10 digits>.<hostname>.<pid>.<n>.v2
 *
 * where n counts the writers this process opened (TensorFlow's
 * file_id_counter) and ".v2" is create_file_writer's filename_suffix.
 * TensorBoard finds event files by "tfevents" in the name and reads them
 * in name order. The file is a TFRecord file (src/io/tfrecord.c's
 * framing, tfrecord_frame) of serialized tensorflow.Event messages
 * (src/data/proto/tensorflow/core/util/event.proto, through protobuf-c).
 *
 * The records, byte for byte as TensorFlow's (test_events compares them
 * with a file TensorFlow wrote, tests/data/events/):
 *   - first an Event with wall_time (whole seconds), file_version
 *     "brain.Event:2" and source_metadata.writer
 *     "tensorflow.core.util.events_writer", flushed at once;
 *   - then one Event per scalar, as TF2's tf.summary.scalar writes it:
 *     wall_time (seconds, microsecond resolution), step, and a Summary
 *     holding one Value: the tag, metadata.plugin_data.plugin_name
 *     "scalars" (empty content) and a TensorProto of dtype DT_FLOAT, an
 *     empty (scalar) shape and the float's 4 little-endian bytes in
 *     tensor_content. Step 0 and other zeros are left out, as proto3 does.
 *
 * Unlike this module's other writers, an event file is not written to a
 * temporary name and renamed: TensorBoard reads it while training goes on
 * (it follows a file as it grows and a new file as it appears), so it is
 * created under its final name, exclusively (O_EXCL: an existing file is
 * never opened, let alone truncated) and appended to. Records collect in a
 * 64 KiB buffer, written out when it fills and at each io_events_flush
 * (the callback flushes at every epoch's end), which also fsyncs; a crash
 * can cost the records since the last flush, never the ones before, and
 * TensorBoard's reader stops cleanly at a torn last record. A failed
 * write (a full disk, a file past RLIMIT_FSIZE) is SY_ERR_IO naming the
 * file and the reason; every later call repeats it.
 */
#include "io_internal.h"

#include "tensorflow/core/util/event.pb-c.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EVENTS_BUFFER (64 * 1024)
#define FRAME_HEAD    12 /* length, its masked CRC */
#define FRAME_FOOT    4  /* the data's masked CRC */

struct io_events {
    char *path;
    int fd;
    uint8_t *buf; /* framed records on their way to the file */
    size_t len, cap;
    sy_status failed; /* sticky: every later call repeats it */
    char *failure;
};

/* ---- the messages ------------------------------------------------------------------ */

size_t io_event_pack(const io_event *e, uint8_t *buf, size_t cap) {
    Tensorflow__Event ev = TENSORFLOW__EVENT__INIT;
    Tensorflow__SourceMetadata source = TENSORFLOW__SOURCE_METADATA__INIT;
    Tensorflow__Summary summary = TENSORFLOW__SUMMARY__INIT;
    Tensorflow__Summary__Value value = TENSORFLOW__SUMMARY__VALUE__INIT, *values[1] = {&value};
    Tensorflow__SummaryMetadata meta = TENSORFLOW__SUMMARY_METADATA__INIT;
    Tensorflow__SummaryMetadata__PluginData plugin =
        TENSORFLOW__SUMMARY_METADATA__PLUGIN_DATA__INIT;
    Tensorflow__TensorProto tensor = TENSORFLOW__TENSOR_PROTO__INIT;
    Tensorflow__TensorShapeProto shape = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT;
    uint8_t content[4];
    ev.wall_time = e->wall_time;
    ev.step = e->step;
    if (e->file_version) {
        ev.what_case = TENSORFLOW__EVENT__WHAT_FILE_VERSION;
        ev.file_version = (char *)e->file_version;
        source.writer = (char *)"tensorflow.core.util.events_writer";
        ev.source_metadata = &source;
    } else {
        uint32_t bits;
        memcpy(&bits, &e->value, sizeof bits);
        for (int i = 0; i < 4; i++) content[i] = (uint8_t)(bits >> (8 * i));
        tensor.dtype = TENSORFLOW__DATA_TYPE__DT_FLOAT;
        tensor.tensor_shape = &shape;
        tensor.tensor_content.data = content;
        tensor.tensor_content.len = sizeof content;
        plugin.plugin_name = (char *)"scalars";
        meta.plugin_data = &plugin;
        value.tag = (char *)e->tag;
        value.metadata = &meta;
        value.value_case = TENSORFLOW__SUMMARY__VALUE__VALUE_TENSOR;
        value.tensor = &tensor;
        summary.n_value = 1;
        summary.value = values;
        ev.what_case = TENSORFLOW__EVENT__WHAT_SUMMARY;
        ev.summary = &summary;
    }
    size_t n = tensorflow__event__get_packed_size(&ev);
    if (buf && n <= cap) tensorflow__event__pack(&ev, buf);
    return n;
}

/* ---- the file ---------------------------------------------------------------------- */

static sy_status events_fail(io_events *w, sy_status st) {
    if (!w->failed) {
        w->failed = st;
        w->failure = sy_strdup(sy_last_error());
    }
    return st;
}

static sy_status repeat_failure(const io_events *w) {
    return sy_error(w->failed, "%s",
                    w->failure ? w->failure : "an earlier write to the event file failed");
}

/* Write the buffer out. */
static sy_status write_out(io_events *w) {
    for (size_t done = 0; done < w->len;) {
        ssize_t k = write(w->fd, w->buf + done, w->len - done);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            return events_fail(w, sy_error(SY_ERR_IO, "cannot write the event file '%s': %s",
                                           w->path, strerror(k < 0 ? errno : ENOSPC)));
        done += (size_t)k;
    }
    w->len = 0;
    return SY_OK;
}

double io_events_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (double)t.tv_sec + (double)(t.tv_nsec / 1000) * 1e-6;
}

sy_status io_events_write(io_events *w, const io_event *e) {
    if (!w) return sy_error(SY_ERR_INVALID_ARGUMENT, "io_events_write: the writer is NULL");
    if (w->failed) return repeat_failure(w);
    if (!e->file_version && !e->tag)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "%s: an event with neither a file version nor a tag", w->path);
    size_t n = io_event_pack(e, NULL, 0), framed = n + FRAME_HEAD + FRAME_FOOT;
    if (framed > w->cap - w->len && write_out(w)) return w->failed;
    if (framed > w->cap) { /* a record larger than the buffer: a very long tag */
        uint8_t *p = sy_realloc_array(w->buf, w->cap, framed, 1);
        if (!p)
            return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory for an event of %zu bytes",
                            w->path, n);
        w->buf = p;
        w->cap = framed;
    }
    uint8_t *rec = w->buf + w->len;
    io_event_pack(e, rec + FRAME_HEAD, n);
    tfrecord_frame(rec + FRAME_HEAD, n, rec, rec + FRAME_HEAD + n);
    w->len += framed;
    return SY_OK;
}

sy_status io_events_scalar(io_events *w, const char *tag, int64_t step, float value) {
    io_event e = {.wall_time = io_events_now(), .step = step, .tag = tag, .value = value};
    return io_events_write(w, &e);
}

sy_status io_events_flush(io_events *w) {
    if (!w) return SY_OK;
    if (w->failed) return repeat_failure(w);
    sy_status st = write_out(w);
    if (!st && fsync(w->fd) != 0 &&
        errno != EINVAL) /* EINVAL: a file that cannot be synced (a pipe) */
        st = events_fail(w, sy_error(SY_ERR_IO, "cannot write the event file '%s': fsync: %s",
                                     w->path, strerror(errno)));
    return st;
}

static void events_free(io_events *w) {
    if (w->fd >= 0) close(w->fd);
    sy_free(w->path);
    sy_free(w->buf);
    sy_free(w->failure);
    sy_free(w);
}

sy_status io_events_close(io_events *w) {
    if (!w) return SY_OK;
    sy_status st = io_events_flush(w);
    if (!st && close(w->fd) != 0)
        st = sy_error(SY_ERR_IO, "cannot write the event file '%s': close: %s", w->path,
                      strerror(errno));
    w->fd = -1;
    events_free(w);
    return st;
}

const char *io_events_path(const io_events *w) {
    return w ? w->path : NULL;
}

sy_status io_events_open(const char *dir, io_events **out) {
    static atomic_int_fast64_t file_counter; /* TensorFlow's file_id_counter: one per process */
    *out = NULL;
    if (!dir || !*dir)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "event files: no log directory given");
    sy_status st = io_make_dirs(dir);
    if (st) {
        char why[1024];
        snprintf(why, sizeof why, "%s", sy_last_error());
        return sy_error(st, "cannot write event files in '%s': %s", dir, why);
    }
    char host[256];
    if (gethostname(host, sizeof host) != 0 || !host[0]) snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    size_t dir_len = strlen(dir);
    while (dir_len > 1 && dir[dir_len - 1] == '/') dir_len--;
    double now = io_events_now();
    long long seconds = (long long)now, n = (long long)atomic_fetch_add(&file_counter, 1);
    char path[PATH_MAX];
    int k = snprintf(path, sizeof path, "%.*s/events.out.tfevents.%010lld.%s.%ld.%lld.v2",
                     (int)dir_len, dir, seconds, host, (long)getpid(), n);
    if (k < 0 || (size_t)k >= sizeof path)
        return sy_error(SY_ERR_IO, "cannot write event files in '%s': the path is too long", dir);
    io_events *w = sy_calloc(1, sizeof *w);
    if (w) {
        w->fd = -1;
        w->cap = EVENTS_BUFFER;
        w->path = sy_strdup(path);
        w->buf = sy_malloc(w->cap);
    }
    if (!w || !w->path || !w->buf) {
        if (w) events_free(w);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory for an event file writer", path);
    }
    w->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        st = sy_error(SY_ERR_IO, "cannot create the event file '%s': %s", path,
                      errno == EEXIST ? "a file of that name already exists (left as it is)"
                                      : strerror(errno));
        events_free(w);
        return st;
    }
    /* TensorFlow's first event: whole seconds, the version, flushed at once */
    io_event first = {.wall_time = (double)seconds, .file_version = "brain.Event:2"};
    st = io_events_write(w, &first);
    if (!st) st = io_events_flush(w);
    if (st) {
        unlink(path); /* ours, made just now, and holding nothing of use */
        events_free(w);
        return st;
    }
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%.*s", (int)dir_len, dir);
    io_sync_dir(parent);
    *out = w;
    return SY_OK;
}
