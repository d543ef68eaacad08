/*
 * test_h5_damaged.c - damaged .h5 files cannot take the process down
 * (src/io/h5_reader.c). The fixtures of tests/data/h5
 * (tools/make_h5_crash_fixtures.py) are a small full model file written
 * by systolic with a few metadata bytes changed: crash_1 made libhdf5
 * 1.10.8 crash in H5O__msg_iterate_real under H5Aexists, crash_2 and
 * crash_3 in H5HG_read under H5Aread, and hang_1 spin in H5HG_read, in
 * the process that loaded them. Each now loads, through sy_model_load and
 * sy_model_load_weights, as SY_ERR_CORRUPT naming the file, the step and
 * what happened, with the weights untouched; the undamaged file still
 * loads after them, and loading leaves no process or descriptor behind.
 */
#define _GNU_SOURCE
#include "files.h"

#include "check.h"
#include "systolic.h"

#include <dirent.h>
#include <sys/wait.h>
#include <unistd.h>

static char *read_text(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *s = calloc(1, 1 << 16);
    if (s) fread(s, 1, (1 << 16) - 1, f);
    fclose(f);
    return s;
}

static sy_model *tiny_model(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/h5/tiny_cnn.json", fixture_dir);
    char *json = read_text(path);
    sy_model *m = NULL;
    CHECK(json != NULL, "cannot read %s", path);
    if (json) CHECK_OK(sy_model_from_json(json, &m));
    free(json);
    return m;
}

static int open_fds(void) {
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    while (readdir(d)) n++;
    closedir(d);
    return n;
}

/* Every weight of m, concatenated: to check a failed load changed none. */
static float *weights_copy(sy_model *m, size_t *n) {
    *n = 0;
    for (int32_t i = 0; i < sy_model_weight_count(m); i++) {
        sy_shape s = sy_model_weight_shape(m, i);
        *n += (size_t)sy_shape_count(&s);
    }
    float *w = malloc(*n * sizeof *w + 1), *p = w;
    for (int32_t i = 0; w && i < sy_model_weight_count(m); i++) {
        sy_shape s = sy_model_weight_shape(m, i);
        memcpy(p, sy_model_weight_data(m, i), (size_t)sy_shape_count(&s) * sizeof *p);
        p += sy_shape_count(&s);
    }
    return w;
}

static void test_damaged(void) {
    static const struct {
        const char *file, *what; /* what sy_model_load says happened */
    } cases[] = {
        /* crash_1's crash is a memcpy of a damaged length from what lies
         * beyond: it depends on the heap, and in this process libhdf5 may
         * survive it and find the model_weights group gone instead
         * (cli_h5_damaged sees the crash) */
        {"crash_1.h5", NULL},
        {"crash_2.h5",
         "libhdf5 crashed with SIGSEGV reading attribute 'layer_names' of '/model_weights'"},
        {"crash_3.h5", "libhdf5 crashed with SIGSEGV reading attribute 'training_config' of '/'"},
        {"hang_1.h5",
         "libhdf5 timed out reading attribute 'model_config' of '/': no progress in 1 s"},
    };
    sy_model *m = tiny_model();
    if (!m) return;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/h5/%s", fixture_dir, cases[i].file);
        sy_model *loaded = NULL;
        if (cases[i].what)
            CHECK_ERR(sy_model_load(path, &loaded), SY_ERR_CORRUPT, path, ": damaged HDF5 file (",
                      cases[i].what);
        else
            CHECK(sy_model_load(path, &loaded) != SY_OK && strstr(sy_last_error(), path), "%s: %s",
                  path, sy_last_error());
        CHECK(loaded == NULL, "%s: a model came back from a failed load", path);
        /* the weights alone: crash_2 crashes there too; the others are
         * damaged where load_weights does not read, or refused plainly */
        size_t n, n2;
        float *before = weights_copy(m, &n);
        sy_status st = sy_model_load_weights(m, path);
        if (i == 1)
            CHECK_ERR(st, SY_ERR_CORRUPT, path, ": damaged HDF5 file (", cases[i].what);
        else
            CHECK(st == SY_OK || strstr(sy_last_error(), path), "%s: %s", path, sy_last_error());
        if (st) {
            float *after = weights_copy(m, &n2);
            CHECK(after && before && n == n2 && !memcmp(before, after, n * sizeof *after),
                  "%s: a failed load changed the weights", path);
            free(after);
        }
        free(before);
    }
    /* the library is unharmed: the undamaged file loads */
    char path[1024];
    snprintf(path, sizeof path, "%s/h5/tiny_cnn.h5", fixture_dir);
    sy_model *good = NULL;
    CHECK_OK(sy_model_load(path, &good));
    CHECK_OK(sy_model_load_weights(m, path));
    sy_model_free(good);
    sy_model_free(m);
}

/* Each load forks a reader: none may be left running or unreaped, and no
 * descriptor may leak. */
static void test_no_leftovers(void) {
    char path[1024];
    snprintf(path, sizeof path, "%s/h5/tiny_cnn.h5", fixture_dir);
    int fds = open_fds();
    for (int i = 0; i < 20; i++) {
        sy_model *m = NULL;
        CHECK_OK(sy_model_load(path, &m));
        sy_model_free(m);
        snprintf(path, sizeof path, "%s/h5/crash_2.h5", fixture_dir);
        CHECK_ERR(sy_model_load(path, &m), SY_ERR_CORRUPT, "crashed");
        snprintf(path, sizeof path, "%s/h5/tiny_cnn.h5", fixture_dir);
    }
    CHECK(open_fds() == fds, "descriptors: %d before 40 loads, %d after", fds, open_fds());
    errno = 0;
    CHECK(waitpid(-1, NULL, WNOHANG) < 0 && errno == ECHILD, "a reader process is left over");
    /* missing, not HDF5: plain messages, as before */
    sy_model *m = NULL;
    CHECK_ERR(sy_model_load("/nonexistent/m.h5", &m), SY_ERR_IO, "cannot read '/nonexistent/m.h5'");
    snprintf(path, sizeof path, "%s/h5/tiny_cnn.json", fixture_dir);
    CHECK_ERR(sy_model_load(path, &m), SY_ERR_CORRUPT, "is not an HDF5 file");
}

int main(void) {
    if (!files_setup("test-h5-damaged", __FILE__)) return 1;
    setenv("SYSTOLIC_H5_TIMEOUT", "1", 1); /* hang_1: a second, not 30 */
    test_damaged();
    test_no_leftovers();
    files_cleanup();
    return check_report("test_h5_damaged");
}
