/*
 * h5.c - HDF5 files through libhdf5, as Keras's .h5 files need them: a
 * thin layer that knows nothing of models (saving.c in keras gives it
 * names, strings and float32 arrays).
 *
 * Errors. libhdf5 reports a failure by pushing records on its error stack
 * and, by default, printing the stack to stderr. Printing is turned off
 * once (h5_init); each failing call here instead walks the stack from the
 * API call down to the innermost record, which holds the most specific
 * reason ("truncated file: eof = 1024, ..., stored_eof = 8000"), and makes
 * it the tail of an sy_error that names the file and the object first.
 * The walk must come before any other libhdf5 call, which would clear the
 * stack. Before opening, a file is checked to exist, to be a regular file
 * and to carry HDF5's signature (H5Fis_hdf5), so the common mistakes get a
 * plain message rather than libhdf5's.
 *
 * Writing. libhdf5 builds the whole file in memory (the core driver
 * without a backing store); h5_commit takes its image (H5Fget_file_image)
 * and writes it with io_write_file_atomic: a temporary file beside the
 * target, fsync'd, renamed over it, the directory synced. Any failure
 * removes the temporary, and h5_close of an uncommitted file writes
 * nothing: the target is never touched unless the whole new file is on
 * disk. Letting libhdf5 write to disk
 * itself was tried first: when a write failed (a full disk, a file-size
 * limit), its H5Fclose failed too and left the file half-closed in its
 * tables, and libhdf5's atexit cleanup then crashed in H5F__close_cb.
 * Keeping libhdf5 off the disk keeps every I/O error in our hands. Model
 * files are the size of the weights (2 MB for the IMDB model).
 *
 * Strings. h5py 3 writes a Python str as a variable-length UTF-8 string,
 * bytes as variable-length ASCII, a list of bytes as an array of
 * variable-length ASCII strings, and [] as an empty float64 array; h5py 2
 * and older Keras versions wrote fixed-length strings (numpy 'S' arrays).
 * The reader takes all of these, and Keras's chunked attributes (name0,
 * name1, ...) that save_attributes_to_hdf5_group makes when a list would
 * pass the 64 KB object-header limit; the writer writes what Keras 2.15
 * with h5py 3 writes. Sizes a file declares are bounded before anything
 * is allocated for them.
 *
 * Links. Only hard links are followed: an external or soft link in a
 * damaged or hostile file would make libhdf5 open other files.
 *
 * Reading. h5_open does not open the file here: it starts h5_reader.c's
 * child process, which opens it with h5_open_here and serves requests by
 * calling the functions below on its own in-process h5_file. So each read
 * function starts by handing a file opened with h5_open (f->reader set)
 * to h5_reader.c, and otherwise does the libhdf5 work itself; in this
 * process that is only ever the writer's, and a damaged file that crashes
 * or hangs libhdf5 takes down only the child.
 */
#define _GNU_SOURCE /* mkostemp: the temporary file with O_CLOEXEC */
#include "io_internal.h"


#include <errno.h>
#include <fcntl.h>
#include <hdf5.h>
#include <math.h> /* llrintf */
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(sizeof(hid_t) == sizeof(h5_id), "hid_t is 64-bit since libhdf5 1.10");

/* Keras's HDF5_OBJECT_HEADER_LIMIT: a longer attribute is split. */
#define H5_ATTR_LIMIT 64512
/* Bounds on what a file may declare, checked before allocating. */
#define H5_MAX_STRINGS (1 << 20)
#define H5_MAX_STRING_BYTES (64 << 20)

struct h5_file {
    hid_t id;          /* the root; in a file opened for reading, the reader's */
    char *path;        /* the target: every message names it */
    bool writing;      /* made by h5_create: in memory until h5_commit */
    h5_reader *reader; /* opened for reading: libhdf5 runs there */
    bool integers;     /* issue 15: the dataset being read may hold integers (Keras's int64 variables) */
};

void h5_allow_integers(h5_file *f, bool on) { f->integers = on; }

static pthread_once_t h5_once = PTHREAD_ONCE_INIT;

static void h5_init_once(void) {
    H5open();
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

static void h5_init(void) {
    pthread_once(&h5_once, h5_init_once);
}

/* ---- errors ------------------------------------------------------------------------- */

typedef struct err_walk {
    char desc[256], minor[128];
} err_walk;

static herr_t walk_record(unsigned n, const H5E_error2_t *e, void *ctx) {
    (void)n;
    err_walk *w = ctx;
    /* downward: the last record seen is the innermost, the most specific */
    snprintf(w->desc, sizeof w->desc, "%s", e->desc ? e->desc : "");
    if (H5Eget_msg(e->min_num, NULL, w->minor, sizeof w->minor) < 0) w->minor[0] = '\0';
    return 0;
}

/* libhdf5's reason for the call that just failed; clears its stack. */
static void h5_reason(char *buf, size_t size) {
    err_walk w = {{0}, {0}};
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, walk_record, &w);
    H5Eclear2(H5E_DEFAULT);
    if (w.desc[0] && w.minor[0] && !strstr(w.desc, w.minor))
        snprintf(buf, size, "%s (%s)", w.desc, w.minor);
    else if (w.desc[0] || w.minor[0])
        snprintf(buf, size, "%s", w.desc[0] ? w.desc : w.minor);
    else
        snprintf(buf, size, "no reason given");
}

const char *h5_name(const h5_file *f, h5_id obj, char *buf, size_t size) {
    if (f->reader) {
        h5_reader_name(f->reader, obj, buf, size);
        return buf;
    }
    ssize_t n = obj >= 0 ? H5Iget_name((hid_t)obj, buf, size) : -1;
    if (n <= 0) {
        H5Eclear2(H5E_DEFAULT);
        snprintf(buf, size, "?");
    }
    return buf;
}

/* "<file>: <what> in '<object>': libhdf5: <reason>". The reason is taken
 * first, before h5_name's call could clear the stack. */
__attribute__((format(printf, 4, 5))) static sy_status h5_fail(const h5_file *f, hid_t obj, sy_status code,
                                                               const char *fmt, ...) {
    char reason[400], what[600], name[256];
    h5_reason(reason, sizeof reason);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (obj >= 0)
        return sy_error(code, "%s: %s in '%s': libhdf5: %s", f->path, what, h5_name(f, obj, name, sizeof name), reason);
    return sy_error(code, "%s: %s: libhdf5: %s", f->path, what, reason);
}

/* ---- files ---------------------------------------------------------------------------- */

const char *h5_path(const h5_file *f) { return f->path; }
h5_id h5_root(const h5_file *f) { return f->id; }

static void file_free(h5_file *f) {
    if (f->reader) {
        h5_reader_close(f->reader);
    } else if (f->id >= 0) {
        H5Fclose(f->id);
        H5Eclear2(H5E_DEFAULT);
    }
    sy_free(f->path);
    sy_free(f);
}

sy_status h5_lost(const h5_file *f) { return f && f->reader ? h5_reader_lost(f->reader) : SY_OK; }

void h5_close(h5_file *f) {
    if (f) file_free(f);
}

/* A file access property list whose close shuts every object still open,
 * so H5Fclose really closes (and flushes) the file. */
static hid_t strong_fapl(void) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl >= 0 && H5Pset_fclose_degree(fapl, H5F_CLOSE_STRONG) < 0) {
        H5Pclose(fapl);
        fapl = -1;
    }
    return fapl;
}

static h5_file *file_new(const char *path) {
    h5_file *f = sy_calloc(1, sizeof *f);
    if (!f) return NULL;
    f->id = -1;
    if (!(f->path = sy_strdup(path))) {
        sy_free(f);
        return NULL;
    }
    return f;
}

sy_status h5_create(const char *path, h5_file **out) {
    *out = NULL;
    h5_init();
    if (!path || !*path) return sy_error(SY_ERR_INVALID_ARGUMENT, "HDF5 file: no path given");
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    struct stat sb;
    if (!*base || (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)))
        return sy_error(SY_ERR_IO, "cannot write '%s': it names a directory", path);
    h5_file *f = file_new(path);
    if (!f) return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    f->writing = true;
    /* in memory (the core driver, no backing store): the name only has to
     * be unique among the files libhdf5 has open */
    static _Atomic unsigned long serial;
    char name[64];
    snprintf(name, sizeof name, "systolic-h5-%ld-%lu", (long)getpid(), (unsigned long)++serial);
    hid_t fapl = strong_fapl();
    if (fapl >= 0 && H5Pset_fapl_core(fapl, 1 << 20, 0) < 0) {
        H5Pclose(fapl);
        fapl = -1;
    }
    f->id = fapl >= 0 ? H5Fcreate(name, H5F_ACC_TRUNC, H5P_DEFAULT, fapl) : -1;
    /* the reason first: any later libhdf5 call clears it */
    sy_status st = f->id < 0 ? h5_fail(f, -1, SY_ERR_IO, "cannot create an HDF5 file in memory") : SY_OK;
    if (fapl >= 0) H5Pclose(fapl);
    if (st) {
        file_free(f);
        return st;
    }
    *out = f;
    return SY_OK;
}

sy_status h5_commit(h5_file *f) {
    if (!f) return SY_OK;
    if (!f->writing) {
        file_free(f);
        return sy_error(SY_ERR_INTERNAL, "h5_commit: the file was opened for reading");
    }
    sy_status st = SY_OK;
    void *image = NULL;
    ssize_t n = -1;
    if (H5Fflush(f->id, H5F_SCOPE_GLOBAL) < 0 || (n = H5Fget_file_image(f->id, NULL, 0)) < 0)
        st = h5_fail(f, -1, SY_ERR_IO, "cannot finish the file in memory");
    else if (!(image = sy_malloc((size_t)n)))
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory for the file's %zd bytes", f->path, n);
    else if (H5Fget_file_image(f->id, image, (size_t)n) != n)
        st = h5_fail(f, -1, SY_ERR_IO, "cannot copy the file's image out of memory");
    if (!st) {
        const void *bufs[1] = {image};
        size_t sizes[1] = {(size_t)n};
        st = io_write_file_atomic(f->path, bufs, sizes, 1);
    }
    sy_free(image);
    if (st) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", sy_last_error());
        sy_error(st, "%s; the temporary file was removed and any earlier '%s' left as it was", msg, f->path);
    }
    file_free(f);
    return st;
}

sy_status h5_open(const char *path, h5_file **out) {
    *out = NULL;
    if (!path || !*path) return sy_error(SY_ERR_INVALID_ARGUMENT, "HDF5 file: no path given");
    h5_file *f = file_new(path);
    if (!f) return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    h5_init(); /* once, here: each child starts with libhdf5 ready (a fork is cheaper than H5open) */
    h5_id root;
    sy_status st = h5_reader_open(path, &f->reader, &root);
    if (st) {
        file_free(f);
        return st;
    }
    f->id = (hid_t)root;
    *out = f;
    return SY_OK;
}

sy_status h5_open_here(const char *path, h5_file **out) {
    *out = NULL;
    h5_init();
    if (!path || !*path) return sy_error(SY_ERR_INVALID_ARGUMENT, "HDF5 file: no path given");
    struct stat sb;
    if (stat(path, &sb) != 0) return sy_error(SY_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    if (S_ISDIR(sb.st_mode)) return sy_error(SY_ERR_IO, "cannot read '%s': it is a directory", path);
    if (!S_ISREG(sb.st_mode)) /* stat, not open: a FIFO cannot block here */
        return sy_error(SY_ERR_IO, "cannot read '%s': it is %s, not a regular file", path, io_file_kind(sb.st_mode));
    if (access(path, R_OK) != 0) return sy_error(SY_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
    h5_file *f = file_new(path);
    if (!f) return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory", path);
    htri_t is = H5Fis_hdf5(path);
    if (is == 0) {
        H5Eclear2(H5E_DEFAULT);
        file_free(f);
        return sy_error(SY_ERR_CORRUPT,
                        "%s is not an HDF5 file (no HDF5 signature in its %lld bytes); expected a Keras .h5 file",
                        path, (long long)sb.st_size);
    }
    hid_t fapl = strong_fapl();
    f->id = is > 0 && fapl >= 0 ? H5Fopen(path, H5F_ACC_RDONLY, fapl) : -1;
    sy_status st = f->id < 0 ? h5_fail(f, -1, SY_ERR_CORRUPT, "cannot open the HDF5 file (damaged or truncated?)")
                             : SY_OK;
    if (fapl >= 0) H5Pclose(fapl);
    if (st) {
        file_free(f);
        return st;
    }
    *out = f;
    return SY_OK;
}

/* ---- groups and links ------------------------------------------------------------------- */

sy_status h5_group_create(h5_file *f, h5_id parent, const char *name, h5_id *out) {
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    if (lcpl >= 0) H5Pset_create_intermediate_group(lcpl, 1);
    hid_t g = lcpl >= 0 ? H5Gcreate2((hid_t)parent, name, lcpl, H5P_DEFAULT, H5P_DEFAULT) : -1;
    if (g < 0) {
        sy_status st = h5_fail(f, (hid_t)parent, SY_ERR_IO, "cannot create group '%s'", name);
        if (lcpl >= 0) H5Pclose(lcpl);
        return st;
    }
    H5Pclose(lcpl);
    *out = g;
    return SY_OK;
}

/* Every step of `path` is a hard link that exists (a missing or odd step
 * is "no", never an error). */
static bool hard_path(hid_t parent, const char *path) {
    char buf[1024];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) return false;
    memcpy(buf, path, n + 1);
    for (size_t i = 0; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0') continue;
        if (i == 0) return false;
        char c = buf[i];
        buf[i] = '\0';
        H5L_info_t info;
        bool ok = H5Lexists(parent, buf, H5P_DEFAULT) > 0 && H5Lget_info(parent, buf, &info, H5P_DEFAULT) >= 0 &&
                  info.type == H5L_TYPE_HARD;
        buf[i] = c;
        if (!ok) {
            H5Eclear2(H5E_DEFAULT);
            return false;
        }
    }
    return true;
}

static H5I_type_t object_type(hid_t parent, const char *path) {
    if (!hard_path(parent, path)) return H5I_BADID;
    hid_t o = H5Oopen(parent, path, H5P_DEFAULT);
    if (o < 0) {
        H5Eclear2(H5E_DEFAULT);
        return H5I_BADID;
    }
    H5I_type_t t = H5Iget_type(o);
    H5Oclose(o);
    return t;
}

bool h5_exists(h5_file *f, h5_id parent, const char *path) {
    if (f->reader) return h5_reader_exists(f->reader, parent, path);
    return object_type((hid_t)parent, path) != H5I_BADID;
}

bool h5_is_group(h5_file *f, h5_id parent, const char *path) {
    if (f->reader) return h5_reader_is_group(f->reader, parent, path);
    return object_type((hid_t)parent, path) == H5I_GROUP;
}

sy_status h5_group_open(h5_file *f, h5_id parent, const char *name, h5_id *out) {
    if (f->reader) return h5_reader_group_open(f->reader, parent, name, out);
    char where[256];
    if (!h5_is_group(f, parent, name))
        return sy_error(SY_ERR_NOT_FOUND, "%s: no group '%s' in '%s'", f->path, name,
                        h5_name(f, parent, where, sizeof where));
    hid_t g = H5Gopen2((hid_t)parent, name, H5P_DEFAULT);
    if (g < 0) return h5_fail(f, (hid_t)parent, SY_ERR_CORRUPT, "cannot open group '%s'", name);
    *out = g;
    return SY_OK;
}

void h5_group_close(h5_file *f, h5_id group) {
    if (group < 0) return;
    if (f->reader) h5_reader_group_close(f->reader, group);
    else H5Gclose((hid_t)group);
}

/* ---- string attributes ------------------------------------------------------------------- */

void h5_strings_free(h5_strings *s) {
    if (!s) return;
    for (int64_t i = 0; i < s->n; i++) sy_free(s->v[i]);
    sy_free(s->v);
    s->v = NULL;
    s->n = 0;
}

bool h5_attr_exists(h5_file *f, h5_id obj, const char *name) {
    if (f->reader) return h5_reader_attr_exists(f->reader, obj, name);
    htri_t r = H5Aexists((hid_t)obj, name);
    if (r < 0) H5Eclear2(H5E_DEFAULT);
    return r > 0;
}

static hid_t vlen_string_type(H5T_cset_t cset) {
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t >= 0 && (H5Tset_size(t, H5T_VARIABLE) < 0 || H5Tset_cset(t, cset) < 0)) {
        H5Tclose(t);
        t = -1;
    }
    return t;
}

/* An attribute `name` of `n` variable-length strings: scalar when rank 0,
 * else an array of n. */
static sy_status write_vlen(h5_file *f, hid_t obj, const char *name, const char *const *v, int64_t n, int rank,
                            bool utf8) {
    hsize_t dims[1] = {(hsize_t)n};
    hid_t type = vlen_string_type(utf8 ? H5T_CSET_UTF8 : H5T_CSET_ASCII);
    hid_t space = rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, dims, NULL);
    hid_t a = type >= 0 && space >= 0 ? H5Acreate2(obj, name, type, space, H5P_DEFAULT, H5P_DEFAULT) : -1;
    sy_status st = SY_OK;
    if (a < 0 || H5Awrite(a, type, v) < 0) st = h5_fail(f, obj, SY_ERR_IO, "cannot write attribute '%s'", name);
    if (a >= 0) H5Aclose(a);
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    return st;
}

sy_status h5_attr_write_string(h5_file *f, h5_id obj, const char *name, const char *value, bool utf8) {
    return write_vlen(f, (hid_t)obj, name, &value, 1, 0, utf8);
}

sy_status h5_attr_write_strings(h5_file *f, h5_id obj, const char *name, const char *const *values, int64_t n) {
    hid_t o = (hid_t)obj;
    if (n == 0) {
        /* h5py's attrs[name] = []: an empty float64 array */
        hsize_t dims[1] = {0};
        hid_t space = H5Screate_simple(1, dims, NULL);
        hid_t a = space >= 0 ? H5Acreate2(o, name, H5T_IEEE_F64LE, space, H5P_DEFAULT, H5P_DEFAULT) : -1;
        sy_status st = a < 0 ? h5_fail(f, o, SY_ERR_IO, "cannot write attribute '%s'", name) : SY_OK;
        if (a >= 0) H5Aclose(a);
        if (space >= 0) H5Sclose(space);
        return st;
    }
    /* Keras splits by the size of numpy's fixed-width copy: n x the longest */
    size_t longest = 1;
    for (int64_t i = 0; i < n; i++) {
        size_t len = strlen(values[i]);
        if (len > H5_ATTR_LIMIT)
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "%s: attribute '%s': string %lld is %zu bytes, more than HDF5's object header holds "
                            "(%d)",
                            f->path, name, (long long)i, len, H5_ATTR_LIMIT);
        if (len > longest) longest = len;
    }
    int64_t chunks = 1;
    while ((size_t)((n + chunks - 1) / chunks) * longest > H5_ATTR_LIMIT) chunks++;
    if (chunks == 1) return write_vlen(f, o, name, values, n, 1, false);
    /* numpy's array_split: the first n % chunks parts have one more */
    int64_t at = 0;
    for (int64_t c = 0; c < chunks; c++) {
        int64_t len = n / chunks + (c < n % chunks ? 1 : 0);
        char chunk_name[256];
        snprintf(chunk_name, sizeof chunk_name, "%s%lld", name, (long long)c);
        sy_status st = write_vlen(f, o, chunk_name, values + at, len, 1, false);
        if (st) return st;
        at += len;
    }
    return SY_OK;
}

static sy_status strings_push(h5_file *f, h5_strings *s, const char *p, size_t len) {
    char *copy = sy_malloc(len + 1);
    char **grown = copy ? sy_realloc_array(s->v, (size_t)s->n, (size_t)s->n + 1, sizeof *s->v) : NULL;
    if (!grown) {
        sy_free(copy);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory reading strings", f->path);
    }
    memcpy(copy, p, len);
    copy[len] = '\0';
    s->v = grown;
    s->v[s->n++] = copy;
    return SY_OK;
}

/* Append the strings of attribute `name` (which exists) to out. */
static sy_status read_attr_strings(h5_file *f, hid_t obj, const char *name, h5_strings *out) {
    sy_status st = SY_OK;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT), type = -1, space = -1, mem = -1;
    if (a < 0) return h5_fail(f, obj, SY_ERR_CORRUPT, "cannot open attribute '%s'", name);
    if ((type = H5Aget_type(a)) < 0 || (space = H5Aget_space(a)) < 0) {
        st = h5_fail(f, obj, SY_ERR_CORRUPT, "cannot read attribute '%s'", name);
        goto done;
    }
    hssize_t n = H5Sget_simple_extent_npoints(space);
    H5T_class_t cls = H5Tget_class(type);
    if (n < 0 || cls == H5T_NO_CLASS) {
        st = h5_fail(f, obj, SY_ERR_CORRUPT, "cannot read attribute '%s'", name);
        goto done;
    }
    if (cls != H5T_STRING) {
        if (n == 0) goto done; /* h5py's empty list: a float64 array of none */
        char where[256];
        st = sy_error(SY_ERR_CORRUPT, "%s: attribute '%s' of '%s' holds %lld numbers; expected strings", f->path,
                      name, h5_name(f, obj, where, sizeof where), (long long)n);
        goto done;
    }
    if (n > H5_MAX_STRINGS) {
        st = sy_error(SY_ERR_CORRUPT, "%s: attribute '%s' claims %lld strings (at most %d)", f->path, name,
                      (long long)n, H5_MAX_STRINGS);
        goto done;
    }
    htri_t vlen = H5Tis_variable_str(type);
    H5T_cset_t cset = H5Tget_cset(type);
    if (vlen < 0 || cset < 0) {
        st = h5_fail(f, obj, SY_ERR_CORRUPT, "cannot read the string type of attribute '%s'", name);
        goto done;
    }
    if (vlen) {
        char **buf = sy_calloc((size_t)n + 1, sizeof *buf);
        if (!buf) {
            st = sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory reading attribute '%s'", f->path, name);
            goto done;
        }
        if ((mem = vlen_string_type(cset)) < 0 || H5Aread(a, mem, buf) < 0) {
            st = h5_fail(f, obj, SY_ERR_CORRUPT, "cannot read attribute '%s'", name);
        } else {
            for (hssize_t i = 0; i < n && !st; i++) st = strings_push(f, out, buf[i] ? buf[i] : "", buf[i] ? strlen(buf[i]) : 0);
            H5Dvlen_reclaim(mem, space, H5P_DEFAULT, buf);
        }
        sy_free(buf);
    } else {
        size_t size = H5Tget_size(type);
        H5T_str_t pad = H5Tget_strpad(type);
        if (size == 0 || (uint64_t)size * (uint64_t)n > H5_MAX_STRING_BYTES) {
            st = sy_error(SY_ERR_CORRUPT, "%s: attribute '%s' claims %lld strings of %zu bytes", f->path, name,
                          (long long)n, size);
            goto done;
        }
        char *buf = sy_malloc(size * (size_t)n + 1);
        if (!buf) {
            st = sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory reading attribute '%s'", f->path, name);
            goto done;
        }
        if ((mem = H5Tcopy(type)) < 0 || H5Aread(a, mem, buf) < 0) {
            st = h5_fail(f, obj, SY_ERR_CORRUPT, "cannot read attribute '%s'", name);
        } else {
            for (hssize_t i = 0; i < n && !st; i++) {
                const char *p = buf + (size_t)i * size;
                size_t len = strnlen(p, size);
                while (pad == H5T_STR_SPACEPAD && len > 0 && p[len - 1] == ' ') len--;
                st = strings_push(f, out, p, len);
            }
        }
        sy_free(buf);
    }
done:
    if (mem >= 0) H5Tclose(mem);
    if (space >= 0) H5Sclose(space);
    if (type >= 0) H5Tclose(type);
    H5Aclose(a);
    return st;
}

sy_status h5_attr_read_strings(h5_file *f, h5_id obj, const char *name, h5_strings *out, bool *found) {
    if (f->reader) return h5_reader_attr_read_strings(f->reader, obj, name, out, found);
    out->v = NULL;
    out->n = 0;
    *found = false;
    sy_status st = SY_OK;
    if (h5_attr_exists(f, obj, name)) {
        *found = true;
        st = read_attr_strings(f, (hid_t)obj, name, out);
    } else {
        for (int64_t c = 0; !st; c++) {
            char chunk_name[256];
            snprintf(chunk_name, sizeof chunk_name, "%s%lld", name, (long long)c);
            if (!h5_attr_exists(f, obj, chunk_name)) break;
            *found = true;
            st = read_attr_strings(f, (hid_t)obj, chunk_name, out);
        }
    }
    if (st) h5_strings_free(out);
    return st;
}

sy_status h5_attr_read_string(h5_file *f, h5_id obj, const char *name, char **out) {
    *out = NULL;
    h5_strings s;
    bool found;
    char where[256];
    sy_status st = h5_attr_read_strings(f, obj, name, &s, &found);
    if (st) return st;
    if (!found) return sy_error(SY_ERR_NOT_FOUND, "%s: no attribute '%s' in '%s'", f->path, name, h5_name(f, obj, where, sizeof where));
    if (s.n != 1) {
        h5_strings_free(&s);
        return sy_error(SY_ERR_CORRUPT, "%s: attribute '%s' of '%s' holds %lld strings; expected one", f->path, name,
                        h5_name(f, obj, where, sizeof where), (long long)s.n);
    }
    *out = s.v[0];
    sy_free(s.v);
    return SY_OK;
}

/* ---- float32 datasets -------------------------------------------------------------------- */

/* A contiguous dataset of file type `type` from `data` in memory type `mem`. */
static sy_status write_dataset(h5_file *f, h5_id parent, const char *name, const sy_shape *shape, hid_t type,
                               hid_t mem, const void *data) {
    hid_t p = (hid_t)parent;
    hsize_t dims[SY_MAX_RANK];
    for (int i = 0; i < shape->rank; i++) dims[i] = (hsize_t)shape->dims[i];
    hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    if (lcpl >= 0) H5Pset_create_intermediate_group(lcpl, 1);
    hid_t space = shape->rank == 0 ? H5Screate(H5S_SCALAR) : H5Screate_simple(shape->rank, dims, NULL);
    hid_t d = lcpl >= 0 && space >= 0 ? H5Dcreate2(p, name, type, space, lcpl, H5P_DEFAULT, H5P_DEFAULT) : -1;
    sy_status st = SY_OK;
    if (d < 0) st = h5_fail(f, p, SY_ERR_IO, "cannot create dataset '%s'", name);
    else if (H5Dwrite(d, mem, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
        st = h5_fail(f, p, SY_ERR_IO, "cannot write dataset '%s'", name);
    if (d >= 0) H5Dclose(d);
    if (space >= 0) H5Sclose(space);
    if (lcpl >= 0) H5Pclose(lcpl);
    return st;
}

sy_status h5_dataset_write_f32(h5_file *f, h5_id parent, const char *name, const sy_shape *shape, const float *data) {
    return write_dataset(f, parent, name, shape, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, data);
}

sy_status h5_dataset_write_f32_as_i64(h5_file *f, h5_id parent, const char *name, const sy_shape *shape,
                                      const float *data) {
    int64_t n = sy_shape_count(shape);
    int64_t *v = sy_malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (!v) return sy_error(SY_ERR_OUT_OF_MEMORY, "%s: out of memory for dataset '%s'", f->path, name);
    for (int64_t i = 0; i < n; i++) v[i] = (int64_t)llrintf(data[i]);
    sy_status st = write_dataset(f, parent, name, shape, H5T_STD_I64LE, H5T_NATIVE_INT64, v);
    sy_free(v);
    return st;
}

static sy_status read_f32(h5_file *f, h5_id parent, const char *name, const sy_shape *shape, float *out);

/* Open dataset `name` and give its shape; checks as h5_dataset_shape. */
static sy_status open_dataset(h5_file *f, hid_t parent, const char *name, hid_t *out, sy_shape *shape) {
    char where[256];
    *out = -1;
    if (object_type(parent, name) != H5I_DATASET)
        return sy_error(SY_ERR_NOT_FOUND, "%s: no dataset '%s' in '%s'", f->path, name,
                        h5_name(f, parent, where, sizeof where));
    hid_t d = H5Dopen2(parent, name, H5P_DEFAULT);
    if (d < 0) return h5_fail(f, parent, SY_ERR_CORRUPT, "cannot open dataset '%s'", name);
    sy_status st = SY_OK;
    hid_t type = H5Dget_type(d), space = H5Dget_space(d);
    int rank = space >= 0 ? H5Sget_simple_extent_ndims(space) : -1;
    H5T_class_t cls = type >= 0 ? H5Tget_class(type) : H5T_NO_CLASS;
    if (type < 0 || space < 0 || rank < 0 || cls == H5T_NO_CLASS) {
        st = h5_fail(f, parent, SY_ERR_CORRUPT, "cannot read the type and shape of dataset '%s'", name);
    } else if (cls != H5T_FLOAT && !(cls == H5T_INTEGER && f->integers)) { /* integers: Keras's int64 variables */
        st = sy_error(SY_ERR_DTYPE, "%s: dataset '%s' in '%s' holds %s; expected float32 weights", f->path, name,
                      h5_name(f, parent, where, sizeof where),
                      cls == H5T_INTEGER ? "integers" : cls == H5T_STRING ? "strings" : "values that are not numbers");
    } else if (rank > SY_MAX_RANK) {
        st = sy_error(SY_ERR_CORRUPT, "%s: dataset '%s' in '%s' has %d dimensions (at most %d)", f->path, name,
                      h5_name(f, parent, where, sizeof where), rank, SY_MAX_RANK);
    } else {
        hsize_t dims[SY_MAX_RANK];
        if (H5Sget_simple_extent_dims(space, dims, NULL) < 0) {
            st = h5_fail(f, parent, SY_ERR_CORRUPT, "cannot read the shape of dataset '%s'", name);
        } else {
            shape->rank = rank;
            for (int i = 0; i < rank; i++) shape->dims[i] = (int64_t)dims[i];
        }
    }
    if (type >= 0) H5Tclose(type);
    if (space >= 0) H5Sclose(space);
    if (st) H5Dclose(d);
    else *out = d;
    return st;
}

sy_status h5_dataset_shape(h5_file *f, h5_id parent, const char *name, sy_shape *shape) {
    return h5_dataset_shape_ex(f, parent, name, false, shape);
}

sy_status h5_dataset_read_f32(h5_file *f, h5_id parent, const char *name, const sy_shape *shape, float *out) {
    return h5_dataset_read_f32_ex(f, parent, name, false, shape, out);
}

sy_status h5_dataset_shape_ex(h5_file *f, h5_id parent, const char *name, bool integers, sy_shape *shape) {
    if (f->reader) return h5_reader_dataset_shape(f->reader, parent, name, integers, shape);
    hid_t d;
    memset(shape, 0, sizeof *shape);
    bool was = f->integers;
    f->integers |= integers;
    sy_status st = open_dataset(f, (hid_t)parent, name, &d, shape);
    f->integers = was;
    if (!st) H5Dclose(d);
    return st;
}

sy_status h5_dataset_read_f32_ex(h5_file *f, h5_id parent, const char *name, bool integers, const sy_shape *shape,
                                 float *out) {
    if (f->reader) return h5_reader_dataset_read_f32(f->reader, parent, name, integers, shape, out);
    bool was = f->integers;
    f->integers |= integers;
    sy_status st = read_f32(f, parent, name, shape, out);
    f->integers = was;
    return st;
}

static sy_status read_f32(h5_file *f, h5_id parent, const char *name, const sy_shape *shape, float *out) {
    hid_t d, p = (hid_t)parent;
    sy_shape s = {0};
    sy_status st = open_dataset(f, p, name, &d, &s);
    if (st) return st;
    if (!sy_shape_equal(&s, shape)) {
        char a[SY_SHAPE_STR_MAX], b[SY_SHAPE_STR_MAX], where[256];
        st = sy_error(SY_ERR_SHAPE, "%s: dataset '%s' in '%s' has shape %s; expected %s", f->path, name,
                      h5_name(f, p, where, sizeof where), sy_shape_format(&s, a, sizeof a),
                      sy_shape_format(shape, b, sizeof b));
    } else if (H5Dread(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0) {
        st = h5_fail(f, p, SY_ERR_CORRUPT, "cannot read dataset '%s'", name);
    }
    H5Dclose(d);
    return st;
}
