/*
 * test_optimizer_h5.c - issue 17, point 3: systolic's side of
 * tests/keras_optimizer_h5.sh, which moves a training run with its optimizer
 * state between tf.keras 2.15 and systolic through .h5 files.
 *
 *   test_optimizer_h5 resume DIR NAME...
 *       load_model DIR/NAME_keras.h5 (Keras trained it, saved with its
 *       optimizer_weights), one step of fit on DIR/data.npz's x, y, and
 *       save_weights DIR/NAME_sys_next.h5: Keras's next-step weights if the
 *       optimizer state came through.
 *   test_optimizer_h5 train DIR NAME...
 *       load_model DIR/NAME_init.h5 (Keras compiled it, never trained), three
 *       steps, save DIR/NAME_sys.h5 (with optimizer_weights), one more step,
 *       save_weights DIR/NAME_sys_next.h5: what Keras must reach from the file.
 *
 * Every step is the whole batch of 8 (fit: batch_size 8, no shuffle).
 * Exits non-zero on any failure, naming it.
 */
#include "check.h"
#include "systolic.h"

#include <string.h>

static sy_status one_fit(sy_model *m, const sy_tensor *x, const sy_tensor *y, int64_t steps) {
    sy_fit_options o = sy_fit_options_default();
    o.batch_size = 8;
    o.steps_per_epoch = steps;
    o.shuffle = false;
    o.verbose = 0;
    return sy_model_fit(m, x, y, &o, NULL);
}

int main(int argc, char **argv) {
    if (argc < 4 || (strcmp(argv[1], "resume") && strcmp(argv[1], "train"))) {
        fprintf(stderr, "usage: test_optimizer_h5 resume|train DIR NAME...\n");
        return 2;
    }
    const char *dir = argv[2];
    bool resume = !strcmp(argv[1], "resume");
    char path[1024];
    snprintf(path, sizeof path, "%s/data.npz", dir);
    sy_npz *z = NULL;
    sy_tensor *x = NULL, *y = NULL;
    CHECK_OK(sy_npz_open(path, &z));
    if (z) CHECK_OK(sy_npz_get(z, "x", &x));
    if (z) CHECK_OK(sy_npz_get(z, "y", &y));
    for (int i = 3; x && y && i < argc; i++) {
        const char *name = argv[i];
        snprintf(path, sizeof path, "%s/%s_%s.h5", dir, name, resume ? "keras" : "init");
        sy_model *m = NULL;
        sy_status st = sy_model_load(path, &m);
        CHECK(st == SY_OK, "%s: %s", name, sy_last_error());
        if (st) continue;
        if (!resume) {
            CHECK(one_fit(m, x, y, 3) == SY_OK, "%s: three steps: %s", name, sy_last_error());
            snprintf(path, sizeof path, "%s/%s_sys.h5", dir, name);
            CHECK(sy_model_save(m, path) == SY_OK, "%s: save: %s", name, sy_last_error());
        }
        CHECK(one_fit(m, x, y, 1) == SY_OK, "%s: one step: %s", name, sy_last_error());
        snprintf(path, sizeof path, "%s/%s_sys_next.h5", dir, name);
        CHECK(sy_model_save_weights(m, path) == SY_OK, "%s: save_weights: %s", name,
              sy_last_error());
        sy_model_free(m);
    }
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_npz_close(z);
    return check_report("test_optimizer_h5");
}
