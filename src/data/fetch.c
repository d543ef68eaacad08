/*
 * fetch.c - finding a dataset file, or downloading it into the cache, and
 * verifying its SHA-256.
 *
 * The search order (data.h and docs/design/datasets.md):
 *
 *   1. $SYSTOLIC_DATASETS/<dataset>/<file>, with the dataset's directory
 *      spelled as given ("fashion_mnist") or with '-' for '_'
 *      ("fashion-mnist", as the shared datasets directory has it);
 *   2. <cache>/datasets/<dataset>/<file> (data_cache_dir);
 *   3. a download into that cache path from each base URL in turn (or only
 *      from <mirror>/<dataset>/<file> when $SYSTOLIC_DATASETS_MIRROR is set).
 *
 * A file found in 1 or 2 must have the published SHA-256, or the call fails
 * (SY_ERR_CORRUPT) rather than silently looking further: a file the user put
 * in $SYSTOLIC_DATASETS is never modified or deleted, and a damaged cache
 * file is reported so the user can delete it (a partial download never
 * reaches the cache path, so a bad cache file means the disk or a person
 * changed it, which is worth knowing).
 *
 * A download goes to a temporary file in the cache directory itself (so the
 * final rename is atomic, on the same file system), is hashed as it arrives,
 * fsync'd, and renamed into place only when its size and SHA-256 match; on
 * any failure the temporary file is removed, so nothing half-written is left
 * behind and a concurrent reader sees either no file or the whole file.
 * Transfers fail on HTTP status >= 400, follow redirects (http and https
 * only), give up connecting after 20 s and abort when less than 1 KB/s
 * arrives for 30 s. libcurl honours the usual proxy variables (https_proxy,
 * no_proxy, ...).
 *
 * When every place fails, the message names the file, every place searched,
 * every URL tried with curl's reason, and how to fix it. A file with no
 * public URL (IMDB's labelled review archive) is only looked for, or
 * fetched from $SYSTOLIC_DATASETS_MIRROR, and its spec's note says why.
 */
#include "data_internal.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CONNECT_TIMEOUT_S 20L
#define LOW_SPEED_BYTES   1024L
#define LOW_SPEED_TIME_S  30L

/* An environment variable, NULL when unset or empty. */
static const char *env(const char *name) {
    const char *v = getenv(name);
    return v && *v ? v : NULL;
}

/* a/b/c (or a/b when c is NULL) into out; an error when it does not fit. */
static sy_status path_join(char *out, size_t size, const char *a, const char *b, const char *c) {
    int n = snprintf(out, size, "%s/%s%s%s", a, b, c ? "/" : "", c ? c : "");
    if (n < 0 || (size_t)n >= size)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "the path %s/%s/%s is longer than %zu bytes", a, b,
                        c ? c : "", size - 1);
    return SY_OK;
}

sy_status data_cache_dir(char *path, size_t size) {
    const char *dir = env("SYSTOLIC_CACHE_DIR"), *xdg = env("XDG_CACHE_HOME"), *home = env("HOME");
    int n;
    if (dir)
        n = snprintf(path, size, "%s", dir);
    else if (xdg)
        n = snprintf(path, size, "%s/systolic", xdg);
    else if (home)
        n = snprintf(path, size, "%s/.cache/systolic", home);
    else
        return sy_error(
            SY_ERR_IO,
            "no cache directory: SYSTOLIC_CACHE_DIR, XDG_CACHE_HOME and HOME are all unset; "
            "set SYSTOLIC_CACHE_DIR to a writable directory");
    if (n < 0 || (size_t)n >= size)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "the cache directory's path is too long");
    return SY_OK;
}

/* ---- the message of a failed search ------------------------------------------- */

typedef struct report {
    char text[1600];
    size_t len;
} report;

static void __attribute__((format(printf, 2, 3))) report_add(report *r, const char *fmt, ...) {
    if (r->len >= sizeof r->text - 1) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(r->text + r->len, sizeof r->text - r->len, fmt, ap);
    va_end(ap);
    if (n > 0) r->len = sy_min64((int64_t)(r->len + (size_t)n), (int64_t)sizeof r->text - 1);
}

/* The caller's copy of the path found. */
static sy_status give_path(const char *found, char *path, size_t size) {
    size_t len = strlen(found);
    if (len >= size)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: the path does not fit in %zu bytes", found,
                        size);
    memcpy(path, found, len + 1);
    return SY_OK;
}

/* ---- checking a file that is there -------------------------------------------- */

/* Where a file was found: it decides what the user is told to do. */
typedef enum { FOUND_IN_DATASETS, FOUND_IN_CACHE } found_in;

static sy_status verify(const data_file_spec *spec, const char *file, found_in where, char *path,
                        size_t size) {
    char hex[65];
    sy_status st = sha256_file(file, hex);
    if (st) return st;
    if (strcmp(hex, spec->sha256) != 0) {
        struct stat sb;
        long long bytes = stat(file, &sb) == 0 ? (long long)sb.st_size : -1;
        char sizes[96] = "";
        if (spec->size && bytes != spec->size)
            snprintf(sizes, sizeof sizes, " It has %lld bytes where the original has %lld.", bytes,
                     (long long)spec->size);
        if (where == FOUND_IN_CACHE)
            return sy_error(
                SY_ERR_CORRUPT,
                "%s: wrong SHA-256: found %s, expected %s.%s The cached copy of %s/%s is "
                "damaged or incomplete: delete it to download it again.",
                file, hex, spec->sha256, sizes, spec->dataset, spec->file);
        return sy_error(
            SY_ERR_CORRUPT,
            "%s: wrong SHA-256: found %s, expected %s.%s The file in $SYSTOLIC_DATASETS is "
            "damaged or not the original %s/%s (systolic never changes files there): replace it "
            "with the "
            "original%s%s%s, or unset SYSTOLIC_DATASETS to use the cache.",
            file, hex, spec->sha256, sizes, spec->dataset, spec->file,
            spec->urls[0] ? " from " : "", spec->urls[0] ? spec->urls[0] : "",
            spec->urls[0] ? spec->file : "");
    }
    return give_path(file, path, size);
}

static bool exists(const char *file) {
    struct stat sb;
    return stat(file, &sb) == 0;
}

/* ---- downloading -------------------------------------------------------------- */

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;
static void curl_init(void) {
    curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

typedef struct sink {
    int fd;
    sha256_ctx sha;
    int64_t bytes, limit; /* limit 0: none */
    int write_errno;      /* why a write failed; 0 when it was the limit */
    bool too_big;
} sink;

static size_t sink_write(char *data, size_t one, size_t count, void *ctx) {
    sink *s = ctx;
    size_t n = one * count;
    if (s->limit && s->bytes + (int64_t)n > s->limit) {
        s->too_big = true;
        return 0; /* libcurl aborts the transfer with CURLE_WRITE_ERROR */
    }
    sha256_update(&s->sha, data, n);
    for (size_t done = 0; done < n;) {
        ssize_t w = write(s->fd, data + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            s->write_errno = w < 0 ? errno : EIO;
            return 0;
        }
        done += (size_t)w;
    }
    s->bytes += (int64_t)n;
    return n;
}

/* Run the transfer of url into s; false with the reason in why. */
static bool transfer(const char *url, sink *s, report *why) {
    CURL *curl = curl_easy_init();
    if (!curl) {
        report_add(why, "libcurl could not start a transfer");
        return false;
    }
    char errbuf[CURL_ERROR_SIZE] = "";
    char agent[64];
    snprintf(agent, sizeof agent, "systolic/%s", sy_version());
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, sink_write);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, s);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(curl, CURLOPT_FAILONERROR, 1L);
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(curl, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, CONNECT_TIMEOUT_S);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, LOW_SPEED_BYTES);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, LOW_SPEED_TIME_S);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, agent);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL,
                     1L); /* no SIGALRM for DNS timeouts: we may be on any thread */
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https,file");
    curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS,
                     (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS | CURLPROTO_FILE));
    curl_easy_setopt(curl, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    CURLcode rc = curl_easy_perform(curl);
    curl_easy_cleanup(curl);
    if (rc == CURLE_OK) return true;
    if (s->too_big)
        report_add(why, "the server sent more than the file's %lld bytes", (long long)s->limit);
    else if (s->write_errno)
        report_add(why, "cannot write the download: %s", strerror(s->write_errno));
    else
        report_add(why, "%s", errbuf[0] ? errbuf : curl_easy_strerror(rc));
    return false;
}

/* Download url into `target` (in `dir`). SY_OK, or a failure whose reason
 * goes into why: SY_ERR_CORRUPT for a wrong size or checksum, SY_ERR_IO
 * otherwise. Nothing but the finished, verified file is left behind. */
static sy_status download(const data_file_spec *spec, const char *url, const char *dir,
                          const char *target, report *why) {
    char tmp[PATH_MAX];
    int n = snprintf(tmp, sizeof tmp, "%s/.%s.part-XXXXXX", dir, spec->file);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        report_add(why, "the cache path is too long");
        return SY_ERR_IO;
    }
    sink s;
    memset(&s, 0, sizeof s);
    s.limit = spec->size;
    sha256_init(&s.sha);
    if ((s.fd = mkstemp(tmp)) < 0) {
        report_add(why, "cannot create a file in '%s': %s", dir, strerror(errno));
        return SY_ERR_IO;
    }
    sy_log(SY_LOG_INFO, "Downloading data from %s", url);
    sy_status st = SY_ERR_IO;
    uint8_t digest[32];
    char hex[65];
    if (!transfer(url, &s, why)) goto fail;
    sha256_final(&s.sha, digest);
    sha256_hex(digest, hex);
    if ((spec->size && s.bytes != spec->size) || strcmp(hex, spec->sha256) != 0) {
        report_add(why, "got %lld bytes with SHA-256 %s, expected %s%s; discarded",
                   (long long)s.bytes, hex, spec->sha256,
                   spec->size && s.bytes != spec->size ? " and a different size" : "");
        st = SY_ERR_CORRUPT;
        goto fail;
    }
    if (fchmod(s.fd, 0644) != 0 || fsync(s.fd) != 0) {
        report_add(why, "cannot write '%s': %s", tmp, strerror(errno));
        goto fail;
    }
    if (close(s.fd) != 0) {
        s.fd = -1;
        report_add(why, "cannot write '%s': %s", tmp, strerror(errno));
        goto fail;
    }
    s.fd = -1;
    if (rename(tmp, target) != 0) {
        report_add(why, "cannot rename '%s' to '%s': %s", tmp, target, strerror(errno));
        goto fail;
    }
    io_sync_dir(dir);
    return SY_OK;
fail:
    if (s.fd >= 0) close(s.fd);
    unlink(tmp);
    return st;
}

/* ---- the search ---------------------------------------------------------------- */

sy_status data_fetch(const data_file_spec *spec, char *path, size_t size) {
    char file[PATH_MAX];
    report looked = {.len = 0}, tried = {.len = 0};
    sy_status st;

    /* 1. $SYSTOLIC_DATASETS, both spellings of the dataset's directory */
    const char *root = env("SYSTOLIC_DATASETS");
    if (root) {
        char dashed[128];
        snprintf(dashed, sizeof dashed, "%s", spec->dataset);
        for (char *c = dashed; *c; c++)
            if (*c == '_') *c = '-';
        const char *names[2] = {spec->dataset, strcmp(dashed, spec->dataset) ? dashed : NULL};
        for (int i = 0; i < 2 && names[i]; i++) {
            if ((st = path_join(file, sizeof file, root, names[i], spec->file))) return st;
            if (exists(file)) return verify(spec, file, FOUND_IN_DATASETS, path, size);
            report_add(&looked, "%s%s", looked.len ? ", " : "", file);
        }
    } else {
        report_add(&looked, "$SYSTOLIC_DATASETS (not set)");
    }

    /* 2. the cache */
    char cache[PATH_MAX], dir[PATH_MAX], target[PATH_MAX];
    if ((st = data_cache_dir(cache, sizeof cache)))
        return sy_error(
            st, "%s/%s: not found (looked in %s), and there is nowhere to download it to: %s%s%s",
            spec->dataset, spec->file, looked.text, sy_last_error(), spec->note ? "\n  note: " : "",
            spec->note ? spec->note : "");
    if ((st = path_join(dir, sizeof dir, cache, "datasets", spec->dataset))) return st;
    if ((st = path_join(target, sizeof target, dir, spec->file, NULL))) return st;
    if (exists(target)) return verify(spec, target, FOUND_IN_CACHE, path, size);
    report_add(&looked, ", %s", target);

    /* 3. download into the cache */
    pthread_once(&curl_once, curl_init);
    const char *mirror = env("SYSTOLIC_DATASETS_MIRROR");
    sy_status worst = SY_ERR_IO;
    if (!mirror && !spec->urls[0]) {
        report_add(&tried, "\n  no download: the file has no public URL");
    } else if (curl_init_rc != CURLE_OK) {
        report_add(&tried, "\n  no download: libcurl failed to start (%s)",
                   curl_easy_strerror(curl_init_rc));
    } else if ((st = io_make_dirs(dir))) {
        report_add(&tried, "\n  no download: %s", sy_last_error());
    } else {
        for (int i = 0; mirror ? i < 1 : spec->urls[i] != NULL; i++) {
            char url[2048];
            report why = {.len = 0};
            int n = mirror ? snprintf(url, sizeof url, "%s%s%s/%s", mirror,
                                      mirror[strlen(mirror) - 1] == '/' ? "" : "/", spec->dataset,
                                      spec->file)
                           : snprintf(url, sizeof url, "%s%s", spec->urls[i], spec->file);
            if (n < 0 || (size_t)n >= sizeof url) continue;
            st = download(spec, url, dir, target, &why);
            if (st == SY_OK) return give_path(target, path, size);
            if (st == SY_ERR_CORRUPT) worst = st;
            report_add(&tried, "\n  tried %s: %s", url, why.text);
        }
    }
    return sy_error(worst,
                    "%s/%s: not found, and it could not be downloaded.\n"
                    "  looked in %s%s%s%s%s%s\n"
                    "  to fix: set SYSTOLIC_DATASETS to a directory holding %s/%s, or download the "
                    "file yourself "
                    "and place it at %s (its SHA-256 is %s)",
                    spec->dataset, spec->file, looked.text,
                    mirror ? "\n  $SYSTOLIC_DATASETS_MIRROR is " : "", mirror ? mirror : "",
                    tried.text, spec->note ? "\n  note: " : "", spec->note ? spec->note : "",
                    spec->dataset, spec->file, target, spec->sha256);
}
