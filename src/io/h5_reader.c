/*
 * h5_reader.c - every HDF5 file opened for reading is read by libhdf5 in a
 * child process, so that a damaged file cannot crash or hang this one.
 *
 * Why. libhdf5 trusts a file's metadata: of 300 Keras files with a few
 * bytes of metadata changed, Debian 12's libhdf5 1.10.8 crashed on 4
 * (H5HG_read under H5Aread, H5O__msg_iterate_real under H5Aexists) and
 * spun for minutes on 1 (tests/data/h5 keeps such files). Its bugs are
 * not ours to fix, but a user who loads a downloaded weights file must
 * get an error, not a crash, and a process training for hours must
 * survive a bad file.
 *
 * How. h5_open forks (no exec) a reader: the child opens the file with
 * libhdf5 and then serves requests over a socketpair -- open a group, does
 * a path or an attribute exist, read an attribute's strings, a dataset's
 * shape or its float32 values -- by calling h5.c's own functions on its
 * in-process h5_file, and sends back each result, or the sy_status and
 * message of its failure. The parent's h5.c functions, given a file opened
 * for reading, send the request and wait for the reply (h5.c's
 * dispatch). Object ids are the child's libhdf5 ids, opaque to the parent.
 * So there is one reading path, and it always runs in the child.
 *
 * Before each request the child writes what it is doing ("reading
 * attribute 'layer_names' of '/'") into a page shared with the parent. If
 * the child dies (a signal, or an exit of its own) or sends nothing for
 * the time limit (SYSTOLIC_H5_TIMEOUT seconds, 30 by default; the limit
 * restarts whenever bytes arrive), the parent kills it and every later
 * request on the file fails with
 *   FILE: damaged HDF5 file (libhdf5 crashed with SIGSEGV reading
 *   attribute 'layer_names' of '/')
 * as SY_ERR_CORRUPT (a child that exits by itself with a status other than
 * 0, as a sanitizer's report makes it, "crashed" too). A yes/no request
 * answers no once the child is gone; h5_lost tells a load so. The library
 * stays usable: nothing of the parent was touched. h5_close kills the
 * child and reaps it.
 *
 * The child. After fork only the forking thread exists; the pool threads
 * of the parent do not, and the child runs nothing but h5.c and libhdf5
 * (with malloc, which glibc makes safe after fork) and leaves with
 * _exit, so no atexit handler (libhdf5's, a sanitizer's) runs. It drops
 * core dumps, restores the default action of the crash signals (a
 * sanitizer's handler would print a report for a crash that is libhdf5's;
 * the parent reports it) and closes every descriptor it does not need,
 * so it never holds a pipe of the parent's open. Under ASan and TSan fork
 * works: the child starts no thread, which is what TSan forbids after a
 * multi-threaded fork.
 *
 * Cost: one fork, and a round trip per request (about three per layer and
 * two per weight): some 5 ms a load on a busy 2-core machine, against
 * 0.5 ms in-process (docs/design/model-files.md, tools/h5_load_cost.c).
 */
#define _GNU_SOURCE /* close_range */
#include "io_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define STEP_BYTES        512
#define NAME_BYTES        1024 /* a name in a request, with its NUL */
#define DEFAULT_TIMEOUT_S 30.0
/* Bounds on a reply, far above what the child sends (h5.c bounds strings
 * at 1 << 20 and 64 MB). */
#define MAX_REPLY_STRINGS (1 << 20)
#define MAX_REPLY_STRING  (64u << 20)

typedef enum reader_op {
    OP_GROUP_OPEN = 1,
    OP_GROUP_CLOSE,
    OP_IS_GROUP,
    OP_EXISTS,
    OP_NAME,
    OP_ATTR_EXISTS,
    OP_ATTR_READ_STRINGS,
    OP_DATASET_SHAPE,
    OP_DATASET_READ,
} reader_op;

/* or'ed into a dataset request: the dataset may hold integers (issue 15, h5_dataset_shape_ex) */
#define OP_INTEGERS 0x100

struct h5_reader {
    pid_t pid;
    int fd;         /* the parent's end of the socketpair; -1 once the child is gone */
    char *step;     /* STEP_BYTES shared with the child: what it is doing */
    double timeout; /* seconds of silence before the child is stopped */
    char *path;
    char *dead; /* once the child is gone: the message every request gets */
};

/* ---- bytes over the socket ------------------------------------------------------------ */

typedef struct wbuf {
    char *p;
    size_t n, cap;
    bool oom;
} wbuf;

static void put(wbuf *b, const void *p, size_t n) {
    if (b->oom || n == 0) return; /* n == 0: p may be NULL, which memcpy may not take */
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n) cap *= 2;
        char *q = sy_realloc_array(b->p, b->n, cap, 1);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = cap;
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void put_i64(wbuf *b, int64_t v) {
    put(b, &v, sizeof v);
}
static void put_i32(wbuf *b, int32_t v) {
    put(b, &v, sizeof v);
}
static void put_str(wbuf *b, const char *s) {
    uint32_t n = s ? (uint32_t)strlen(s) : 0;
    put(b, &n, sizeof n);
    put(b, s, n);
}

static bool send_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n > 0) {
        ssize_t k = send(fd, c, n, MSG_NOSIGNAL); /* a dead peer is EPIPE, not SIGPIPE */
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        c += k;
        n -= (size_t)k;
    }
    return true;
}

/* The child's blocking read of a request; false at the parent's close. */
static bool recv_all(int fd, void *p, size_t n) {
    char *c = p;
    while (n > 0) {
        ssize_t k = recv(fd, c, n, 0);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return false;
        c += k;
        n -= (size_t)k;
    }
    return true;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- the child ---------------------------------------------------------------------- */

static char *child_step;

/* What the child is about to do, for the parent's message should it not
 * come back: "<what> '<name>' of '<object>'". */
static void step(const char *what, const char *name, h5_file *f, h5_id obj) {
    char quoted[1100] = "", where[256] = "";
    if (name) snprintf(quoted, sizeof quoted, " '%s'", name);
    /* first without the object: naming it is a libhdf5 call too */
    snprintf(child_step, STEP_BYTES, "%s%s", what, quoted);
    if (obj >= 0 && strcmp(h5_name(f, obj, where, sizeof where), "?") != 0)
        snprintf(child_step, STEP_BYTES, "%s%s of '%s'", what, quoted, where);
}

static bool recv_str(int fd, char *out, size_t size) {
    uint32_t n;
    if (!recv_all(fd, &n, sizeof n) || n >= size) return false;
    if (!recv_all(fd, out, n)) return false;
    out[n] = '\0';
    return true;
}

/* Serve one request; false when the parent has gone. */
static bool serve(int fd, h5_file *f) {
    int32_t op;
    int64_t id;
    char name[NAME_BYTES];
    if (!recv_all(fd, &op, sizeof op) || !recv_all(fd, &id, sizeof id) ||
        !recv_str(fd, name, sizeof name))
        return false;
    h5_allow_integers(f, (op & OP_INTEGERS) != 0);
    op &= ~OP_INTEGERS;
    sy_shape shape = {0};
    if (op == OP_DATASET_READ) {
        if (!recv_all(fd, &shape.rank, sizeof shape.rank) || shape.rank < 0 ||
            shape.rank > SY_MAX_RANK ||
            !recv_all(fd, shape.dims, sizeof shape.dims[0] * (size_t)shape.rank))
            return false;
    }
    wbuf b = {0};
    sy_status st = SY_OK;
    int64_t out_id = -1;
    bool flag = false;
    h5_strings s = {0};
    float *data = NULL;
    size_t data_bytes = 0;
    char text[256];
    switch ((reader_op)op) {
    case OP_GROUP_OPEN:
        step("opening group", name, f, id);
        st = h5_group_open(f, id, name, &out_id);
        break;
    case OP_GROUP_CLOSE:
        step("closing a group", NULL, f, -1);
        h5_group_close(f, id);
        break;
    case OP_IS_GROUP:
    case OP_EXISTS:
        step("looking up", name, f, id);
        flag = op == OP_IS_GROUP ? h5_is_group(f, id, name) : h5_exists(f, id, name);
        break;
    case OP_NAME:
        step("finding the name of an object", NULL, f, -1);
        h5_name(f, id, text, sizeof text);
        break;
    case OP_ATTR_EXISTS:
        step("looking up attribute", name, f, id);
        flag = h5_attr_exists(f, id, name);
        break;
    case OP_ATTR_READ_STRINGS:
        step("reading attribute", name, f, id);
        st = h5_attr_read_strings(f, id, name, &s, &flag);
        break;
    case OP_DATASET_SHAPE:
        step("reading the shape of dataset", name, f, id);
        st = h5_dataset_shape(f, id, name, &shape);
        break;
    case OP_DATASET_READ:
        step("reading dataset", name, f, id);
        data_bytes = (size_t)sy_shape_count(&shape) * sizeof(float);
        if (!(data = sy_malloc(data_bytes ? data_bytes : 1)))
            st = sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory for dataset '%s' (%zu bytes)",
                          h5_path(f), name, data_bytes);
        else
            st = h5_dataset_read_f32(f, id, name, &shape, data);
        break;
    default:
        return false;
    }
    snprintf(child_step, STEP_BYTES, "sending what was read");
    put_i32(&b, (int32_t)st);
    put_str(&b, st ? sy_last_error() : "");
    if (!st) {
        switch ((reader_op)op) {
        case OP_GROUP_OPEN:
            put_i64(&b, out_id);
            break;
        case OP_IS_GROUP:
        case OP_EXISTS:
        case OP_ATTR_EXISTS:
            put_i32(&b, flag);
            break;
        case OP_NAME:
            put_str(&b, text);
            break;
        case OP_ATTR_READ_STRINGS:
            put_i32(&b, flag);
            put_i64(&b, s.n);
            for (int64_t i = 0; i < s.n; i++) put_str(&b, s.v[i]);
            break;
        case OP_DATASET_SHAPE:
            put_i32(&b, shape.rank);
            put(&b, shape.dims, sizeof shape.dims[0] * (size_t)shape.rank);
            break;
        case OP_DATASET_READ:
            put(&b, data, data_bytes);
            break;
        default:
            break;
        }
    }
    h5_strings_free(&s);
    sy_free(data);
    bool ok = !b.oom && send_all(fd, b.p, b.n);
    sy_free(b.p);
    snprintf(child_step, STEP_BYTES, "waiting for a request");
    return ok;
}

/* The child's whole life: open the file, tell the parent how that went,
 * serve until the parent closes its end. */
static _Noreturn void child_main(int fd, const char *path) {
    static const int crash_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGSYS, SIGTRAP};
    for (size_t i = 0; i < sizeof crash_signals / sizeof crash_signals[0]; i++)
        signal(crash_signals[i], SIG_DFL);
    signal(SIGPIPE, SIG_IGN);
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    /* keep stdin, stdout, stderr (a sanitizer's report) and the socket */
    if (fd != 3 && dup2(fd, 3) == 3) fd = 3;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    if (fd == 3) close_range(4, ~0u, 0);
#endif
    snprintf(child_step, STEP_BYTES, "opening the file");
    h5_file *f = NULL;
    sy_status st = h5_open_here(path, &f);
    wbuf b = {0};
    put_i32(&b, (int32_t)st);
    put_str(&b, st ? sy_last_error() : "");
    if (!st) put_i64(&b, h5_root(f));
    bool ok = !b.oom && send_all(fd, b.p, b.n);
    snprintf(child_step, STEP_BYTES, "waiting for a request");
    while (ok && !st && serve(fd, f)) {
    }
    /* no cleanup: _exit, and the kernel frees everything */
    _exit(0);
}

/* ---- the parent ---------------------------------------------------------------------- */

static double reader_timeout(void) {
    const char *v = getenv("SYSTOLIC_H5_TIMEOUT");
    char *end;
    double t = v && *v ? strtod(v, &end) : 0;
    return v && *v && !*end && t > 0 && isfinite(t) ? t : DEFAULT_TIMEOUT_S;
}

static const char *signal_name(int sig) {
    switch (sig) {
    case SIGSEGV:
        return "SIGSEGV";
    case SIGBUS:
        return "SIGBUS";
    case SIGABRT:
        return "SIGABRT";
    case SIGILL:
        return "SIGILL";
    case SIGFPE:
        return "SIGFPE";
    case SIGKILL:
        return "SIGKILL";
    case SIGTERM:
        return "SIGTERM";
    case SIGINT:
        return "SIGINT";
    case SIGSYS:
        return "SIGSYS";
    case SIGTRAP:
        return "SIGTRAP";
    }
    return NULL;
}

/* Stop the child (if it still runs) and reap it; its wait status, or -1
 * when it cannot be had (SIGCHLD ignored by the application). */
static int reap(h5_reader *r, bool kill_it) {
    int status = -1;
    if (r->fd >= 0) {
        close(r->fd);
        r->fd = -1;
    }
    if (r->pid > 0) {
        if (kill_it) kill(r->pid, SIGKILL);
        while (waitpid(r->pid, &status, 0) < 0 && errno == EINTR) {
        }
        r->pid = 0;
    }
    return status;
}

/* The child died or went silent: stop it, and from now on every request
 * fails with why. */
static sy_status reader_lost(h5_reader *r, bool timed_out) {
    if (r->dead) return sy_error(SY_ERR_CORRUPT, "%s", r->dead);
    char what[STEP_BYTES + 8], msg[STEP_BYTES + 1200];
    snprintf(what, sizeof what, "%.*s", STEP_BYTES - 1, r->step);
    int status = reap(r, true);
    if (timed_out) {
        snprintf(msg, sizeof msg,
                 "%s: damaged HDF5 file (libhdf5 timed out %s: no progress in %g s; "
                 "SYSTOLIC_H5_TIMEOUT sets the "
                 "limit)",
                 r->path, what, r->timeout);
    } else if (status >= 0 && WIFSIGNALED(status)) {
        const char *name = signal_name(WTERMSIG(status));
        char sig[32];
        if (!name) snprintf(sig, sizeof sig, "signal %d", WTERMSIG(status));
        snprintf(msg, sizeof msg, "%s: damaged HDF5 file (libhdf5 crashed with %s %s)", r->path,
                 name ? name : sig, what);
    } else if (status >= 0 && WIFEXITED(status)) {
        /* the child exits by itself only with 0, at the parent's close:
         * another status is an abort (a sanitizer's report, libFuzzer's
         * malloc limit) */
        snprintf(msg, sizeof msg,
                 "%s: damaged HDF5 file (libhdf5 crashed: its reader process exited with status %d %s)", r->path,
                 WEXITSTATUS(status), what);
    } else {
        snprintf(msg, sizeof msg, "%s: damaged HDF5 file (libhdf5's reader process ended %s)",
                 r->path, what);
    }
    r->dead = sy_strdup(msg);
    return sy_error(SY_ERR_CORRUPT, "%s", msg);
}

/* Read exactly n bytes of a reply (into p, or discarded when p is NULL),
 * allowing the child r->timeout seconds of silence. */
static sy_status rd(h5_reader *r, void *p, size_t n) {
    char *c = p, sink[4096];
    double deadline = now_s() + r->timeout;
    while (n > 0) {
        double left = deadline - now_s();
        if (left <= 0) return reader_lost(r, true);
        struct pollfd pfd = {.fd = r->fd, .events = POLLIN};
        int k = poll(&pfd, 1, (int)ceil(left * 1000 > 1e9 ? 1e9 : left * 1000));
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return reader_lost(r, false);
        if (k == 0) continue; /* the deadline check above decides */
        size_t want = c ? n : (n < sizeof sink ? n : sizeof sink);
        ssize_t got = recv(r->fd, c ? c : sink, want, 0);
        if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (got <= 0) return reader_lost(r, false);
        if (c) c += got;
        n -= (size_t)got;
        deadline = now_s() + r->timeout;
    }
    return SY_OK;
}

/* The status and message that start every reply: SY_OK, or the child's
 * failure raised here with its message. */
static sy_status rd_status(h5_reader *r) {
    int32_t code;
    uint32_t len;
    sy_status st;
    if ((st = rd(r, &code, sizeof code)) || (st = rd(r, &len, sizeof len))) return st;
    if (len > 65536) return reader_lost(r, false);
    char *msg = sy_malloc((size_t)len + 1);
    if (!msg) {
        if ((st = rd(r, NULL, len))) return st;
        return sy_error(code ? (sy_status)code : SY_ERR_OUT_OF_MEMORY, "%s: out of memory",
                        r->path);
    }
    if ((st = rd(r, msg, len))) {
        sy_free(msg);
        return st;
    }
    msg[len] = '\0';
    st = code ? sy_error((sy_status)code, "%s", msg) : SY_OK;
    sy_free(msg);
    return st;
}

/* A string of the reply, new (sy_free). */
static sy_status rd_str(h5_reader *r, char **out) {
    uint32_t len;
    sy_status st = rd(r, &len, sizeof len);
    if (st) return st;
    if (len > MAX_REPLY_STRING) return reader_lost(r, false);
    if (!(*out = sy_malloc((size_t)len + 1))) {
        (void)rd(r, NULL, len);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory reading strings", r->path);
    }
    if ((st = rd(r, *out, len))) {
        sy_free(*out);
        *out = NULL;
        return st;
    }
    (*out)[len] = '\0';
    return SY_OK;
}

sy_status h5_reader_open(const char *path, h5_reader **out, h5_id *root) {
    *out = NULL;
    h5_reader *r = sy_calloc(1, sizeof *r);
    if (!r || !(r->path = sy_strdup(path))) {
        sy_free(r);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    }
    r->fd = -1;
    r->timeout = reader_timeout();
    int sv[2] = {-1, -1};
    void *page = mmap(NULL, STEP_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
        int e = errno;
        if (page != MAP_FAILED) munmap(page, STEP_BYTES);
        sy_free(r->path);
        sy_free(r);
        return sy_error(SY_ERR_IO, "%s: cannot set up the process that reads HDF5 files: %s", path,
                        strerror(e));
    }
    r->step = page;
    snprintf(r->step, STEP_BYTES, "starting");
    pid_t pid = fork();
    if (pid == 0) {
        close(sv[0]);
        child_step = r->step;
        child_main(sv[1], path);
    }
    int e = errno;
    close(sv[1]);
    r->fd = sv[0];
    r->pid = pid > 0 ? pid : 0;
    if (pid < 0) {
        h5_reader_close(r);
        return sy_error(SY_ERR_IO, "%s: cannot start the process that reads HDF5 files: %s", path,
                        strerror(e));
    }
    sy_status st = rd_status(r);
    if (!st) st = rd(r, root, sizeof *root);
    if (st) {
        h5_reader_close(r);
        return st;
    }
    *out = r;
    return SY_OK;
}

sy_status h5_reader_lost(const h5_reader *r) {
    return r->dead ? sy_error(SY_ERR_CORRUPT, "%s", r->dead) : SY_OK;
}

void h5_reader_close(h5_reader *r) {
    if (!r) return;
    reap(r, true);
    if (r->step) munmap(r->step, STEP_BYTES);
    sy_free(r->dead);
    sy_free(r->path);
    sy_free(r);
}

/* Send a request: op, object, name, and for a dataset read the shape. */
static sy_status request(h5_reader *r, reader_op op, h5_id id, const char *name,
                         const sy_shape *shape) {
    if (r->dead) return sy_error(SY_ERR_CORRUPT, "%s", r->dead);
    if (name && strlen(name) >= NAME_BYTES)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: HDF5 name too long (%zu bytes)", r->path,
                        strlen(name));
    wbuf b = {0};
    put_i32(&b, (int32_t)op);
    put_i64(&b, id);
    put_str(&b, name);
    if (shape) {
        put_i32(&b, shape->rank);
        put(&b, shape->dims, sizeof shape->dims[0] * (size_t)shape->rank);
    }
    if (b.oom) return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory", r->path);
    bool ok = send_all(r->fd, b.p, b.n);
    sy_free(b.p);
    return ok ? rd_status(r) : reader_lost(r, false);
}

sy_status h5_reader_group_open(h5_reader *r, h5_id parent, const char *name, h5_id *out) {
    sy_status st = request(r, OP_GROUP_OPEN, parent, name, NULL);
    return st ? st : rd(r, out, sizeof *out);
}

void h5_reader_group_close(h5_reader *r, h5_id group) {
    if (!r->dead) (void)request(r, OP_GROUP_CLOSE, group, NULL, NULL);
}

/* OP_IS_GROUP, OP_EXISTS, OP_ATTR_EXISTS: false when the child is gone
 * (the next request that reads says why). */
static bool h5_reader_ask(h5_reader *r, int op, h5_id obj, const char *name) {
    int32_t flag = 0;
    if (r->dead || request(r, (reader_op)op, obj, name, NULL) || rd(r, &flag, sizeof flag))
        return false;
    return flag != 0;
}

bool h5_reader_is_group(h5_reader *r, h5_id parent, const char *path) {
    return h5_reader_ask(r, OP_IS_GROUP, parent, path);
}
bool h5_reader_exists(h5_reader *r, h5_id parent, const char *path) {
    return h5_reader_ask(r, OP_EXISTS, parent, path);
}
bool h5_reader_attr_exists(h5_reader *r, h5_id obj, const char *name) {
    return h5_reader_ask(r, OP_ATTR_EXISTS, obj, name);
}

void h5_reader_name(h5_reader *r, h5_id obj, char *buf, size_t size) {
    char *s = NULL;
    if (!r->dead && !request(r, OP_NAME, obj, NULL, NULL) && !rd_str(r, &s))
        snprintf(buf, size, "%s", s);
    else
        snprintf(buf, size, "?");
    sy_free(s);
}

sy_status h5_reader_attr_read_strings(h5_reader *r, h5_id obj, const char *name, h5_strings *out,
                                      bool *found) {
    out->v = NULL;
    out->n = 0;
    *found = false;
    int32_t flag;
    int64_t n;
    sy_status st = request(r, OP_ATTR_READ_STRINGS, obj, name, NULL);
    if (st || (st = rd(r, &flag, sizeof flag)) || (st = rd(r, &n, sizeof n))) return st;
    if (n < 0 || n > MAX_REPLY_STRINGS) return reader_lost(r, false);
    *found = flag != 0;
    if (n > 0 && !(out->v = sy_calloc((size_t)n, sizeof *out->v))) {
        /* read the rest, to keep the conversation in step */
        for (int64_t i = 0; i < n && !st; i++) {
            char *s = NULL;
            st = rd_str(r, &s);
            sy_free(s);
        }
        return st ? st
                  : sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory reading attribute '%s'",
                             r->path, name);
    }
    for (int64_t i = 0; i < n; i++) {
        char *s = NULL;
        sy_status e = rd_str(r, &s);
        if (e && e != SY_ERR_OUT_OF_MEMORY) {
            h5_strings_free(out);
            return e;
        }
        if (!st) st = e;
        if (s) out->v[out->n++] = s;
    }
    if (st) h5_strings_free(out);
    return st;
}

sy_status h5_reader_dataset_shape(h5_reader *r, h5_id parent, const char *name, bool integers, sy_shape *shape) {
    memset(shape, 0, sizeof *shape);
    int32_t rank;
    sy_status st = request(r, OP_DATASET_SHAPE | (integers ? OP_INTEGERS : 0), parent, name, NULL);
    if (st || (st = rd(r, &rank, sizeof rank))) return st;
    if (rank < 0 || rank > SY_MAX_RANK) return reader_lost(r, false);
    shape->rank = rank;
    return rd(r, shape->dims, sizeof shape->dims[0] * (size_t)rank);
}

sy_status h5_reader_dataset_read_f32(h5_reader *r, h5_id parent, const char *name, bool integers,
                                     const sy_shape *shape, float *out) {
    sy_status st = request(r, OP_DATASET_READ | (integers ? OP_INTEGERS : 0), parent, name, shape);
    return st ? st : rd(r, out, (size_t)sy_shape_count(shape) * sizeof(float));
}
