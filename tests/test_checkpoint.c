/*
 * test_checkpoint.c - fit()'s checkpoints: a run stopped part way (by a
 * callback failing, as a crash would stop it) and resumed from its newest
 * checkpoint ends with the same weights, bit for bit, and the same last
 * checkpoint file as a run never stopped -- from arrays (a shuffled sample
 * stream whose passes do not divide into batches, dropout on) and from
 * datasets (a reshuffling pipeline, one pass per epoch or one iteration
 * across epochs), on two replicas. Then what is kept, and what is refused:
 * a directory that holds checkpoints without resume, another model (the
 * layer and both shapes named), another optimizer, another seed, truncated,
 * damaged and foreign files -- each leaving the model as it was -- and a
 * save that fails for want of space leaving the older checkpoints whole.
 * One run per model_dir: a second fit on it while the first runs (here,
 * from the first's callback) is refused naming the pid and touches
 * nothing; the lock goes when fit ends or fails (tests/cli_checkpoint_lock.sh
 * checks another process and SIGKILL). A resume whose newest checkpoints
 * are damaged goes on from the newest valid one, naming what it skipped,
 * and ends as if never stopped; none valid, or another model's, is refused.
 * A learning rate a callback set resumes with the run (issue 17).
 */
#define _GNU_SOURCE
#include "files.h"
#include "io/io_internal.h"
#include "keras/keras_internal.h"
#include "synthetic.h"

#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

static sy_strategy *two_replicas(void) {
    sy_cluster *c;
    sy_strategy *s = NULL;
    CHECK_OK(sy_cluster_resolve("cpu:2", &c));
    CHECK_OK(sy_strategy_new(c, &s));
    sy_cluster_free(c);
    return s;
}

static bool same_weights(sy_model *a, sy_model *b) {
    if (sy_model_weight_count(a) != sy_model_weight_count(b)) return false;
    for (int32_t i = 0; i < sy_model_weight_count(a); i++) {
        sy_shape s = sy_model_weight_shape(a, i);
        if (memcmp(sy_model_weight_data(a, i), sy_model_weight_data(b, i), (size_t)sy_shape_count(&s) * sizeof(float)))
            return false;
    }
    return true;
}

/* A copy of every weight, to see that a refused load changed nothing. */
static float *snapshot(sy_model *m, size_t *n) {
    *n = 0;
    for (int32_t i = 0; i < sy_model_weight_count(m); i++) {
        sy_shape s = sy_model_weight_shape(m, i);
        *n += (size_t)sy_shape_count(&s);
    }
    float *v = malloc(*n * sizeof(float) + 1);
    size_t at = 0;
    for (int32_t i = 0; i < sy_model_weight_count(m); i++) {
        sy_shape s = sy_model_weight_shape(m, i);
        memcpy(v + at, sy_model_weight_data(m, i), (size_t)sy_shape_count(&s) * sizeof(float));
        at += (size_t)sy_shape_count(&s);
    }
    return v;
}

static bool unchanged(sy_model *m, const float *before, size_t n) {
    size_t k;
    float *now = snapshot(m, &k);
    bool same = k == n && memcmp(now, before, n * sizeof(float)) == 0;
    free(now);
    return same;
}

static bool same_file(const char *a, const char *b) {
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    bool same = fa && fb;
    while (same) {
        int x = fgetc(fa), y = fgetc(fb);
        if (x != y) same = false;
        if (x == EOF || y == EOF) break;
    }
    if (fa) fclose(fa);
    if (fb) fclose(fb);
    return same;
}

static int32_t count_checkpoints(const char *dir, int64_t *newest) {
    int64_t *steps;
    int32_t n;
    CHECK_OK(ckpt_list(dir, &steps, &n));
    *newest = n ? steps[n - 1] : -1;
    sy_free(steps);
    return n;
}

/* A callback that fails at a given global step: fit stops there, as a
 * killed process would, with the checkpoints written before it. */
static sy_status crash_at(void *ctx, sy_model *m, int64_t step, const sy_logs *logs) {
    (void)step, (void)logs;
    if (sy_model_iterations(m) >= *(int64_t *)ctx) return sy_error(SY_ERR_INTERNAL, "simulated crash");
    return SY_OK;
}

typedef struct run_spec {
    bool dataset;
    int64_t steps_per_epoch; /* a dataset: 0 is a pass per epoch */
} run_spec;

/* 600 samples, batches of 40 (a pass is 15 batches; with arrays and 7
 * steps per epoch the passes run across epochs). */
/* issue 17, optimizers: the optimizer run() compiles with instead of make_mlp's Adam (NULL: Adam) */
static const sy_optimizer *run_optimizer;

static sy_status run(sy_strategy *s, const run_spec *r, const char *dir, int32_t epochs, bool resume, int64_t crash,
                     sy_model **out) {
    sy_tensor *x, *y;
    make_data(600, &x, &y, 11);
    sy_model *m = make_mlp(s, 5, 16, true, 2); /* dropout on; 2 steps per execution */
    if (run_optimizer) {
        sy_compile_options c = sy_compile_options_default();
        c.optimizer = *run_optimizer;
        c.loss = "sparse_categorical_crossentropy";
        c.steps_per_execution = 2;
        c.threads = 2;
        CHECK_OK(sy_model_compile(m, &c));
    }
    sy_fit_options o = sy_fit_options_default();
    o.batch_size = 40;
    o.epochs = epochs;
    o.verbose = 0;
    o.model_dir = dir;
    o.save_checkpoints_steps = 3;
    o.keep_checkpoint_max = 100;
    o.resume = resume;
    sy_callback cb = {&crash, NULL, NULL, crash_at, NULL, NULL, NULL};
    if (crash) {
        o.callbacks = &cb;
        o.n_callbacks = 1;
    }
    sy_status st;
    if (!r->dataset) {
        o.steps_per_epoch = 7;
        st = sy_model_fit(m, x, y, &o, NULL);
    } else {
        sy_tensor *t[2] = {x, y};
        sy_dataset *sl = NULL, *sh = NULL, *rep = NULL, *b = NULL;
        CHECK_OK(sy_dataset_from_tensor_slices(t, 2, &sl));
        CHECK_OK(sy_dataset_shuffle(sl, 100, 9, true, &sh));
        if (r->steps_per_epoch) CHECK_OK(sy_dataset_repeat(sh, SY_INFINITE, &rep));
        CHECK_OK(sy_dataset_batch(rep ? rep : sh, 40, true, &b));
        o.steps_per_epoch = r->steps_per_epoch;
        st = sy_model_fit_dataset(m, b, NULL, &o, NULL);
        sy_dataset_free(b);
        sy_dataset_free(rep);
        sy_dataset_free(sh);
        sy_dataset_free(sl);
    }
    sy_tensor_free(x);
    sy_tensor_free(y);
    *out = m;
    return st;
}

static void test_resume(sy_strategy *s, const run_spec *r, const char *name, int64_t crash) {
    char ref[600], cut[600], a[700], b[700];
    snprintf(ref, sizeof ref, "%s/%s-ref", tmp_root, name);
    snprintf(cut, sizeof cut, "%s/%s-cut", tmp_root, name);
    sy_model *whole, *first, *resumed;
    CHECK_OK(run(s, r, ref, 4, false, 0, &whole));
    CHECK_ERR(run(s, r, cut, 4, false, crash, &first), SY_ERR_INTERNAL, "simulated crash");
    int64_t newest_ref, newest_cut;
    count_checkpoints(ref, &newest_ref);
    count_checkpoints(cut, &newest_cut);
    CHECK(newest_cut > 0 && newest_cut < newest_ref, "%s: the stopped run's newest checkpoint is step %lld (of %lld)",
          name, (long long)newest_cut, (long long)newest_ref);
    CHECK(!same_weights(whole, first), "%s: the stopped run should not have the final weights", name);
    CHECK_OK(run(s, r, cut, 4, true, 0, &resumed));
    CHECK(same_weights(whole, resumed), "%s: resumed from step %lld, the weights differ from the uninterrupted run's",
          name, (long long)newest_cut);
    CHECK(sy_model_iterations(resumed) == sy_model_iterations(whole), "%s: %lld steps vs %lld", name,
          (long long)sy_model_iterations(resumed), (long long)sy_model_iterations(whole));
    ckpt_path(a, sizeof a, ref, newest_ref);
    ckpt_path(b, sizeof b, cut, newest_ref);
    CHECK(same_file(a, b), "%s: the last checkpoints %s and %s differ", name, a, b);
    sy_model_free(whole);
    sy_model_free(first);
    sy_model_free(resumed);
}

/* ---- issue 17: the learning rate a callback set resumes with the run
 * ---------------------------------- */

static double halve(void *user, int32_t epoch, double lr) {
    (void)user, (void)epoch;
    return lr * 0.5;
}

/* 4 epochs of 5 steps, a checkpoint at each epoch's end, the rate halved at each epoch's beginning
 * (LearningRateScheduler); a crash at step `crash` (0: none). */
static sy_status lr_run(const char *dir, bool resume, int64_t crash, sy_model **out) {
    sy_tensor *x, *y;
    make_data(600, &x, &y, 11);
    sy_model *m = make_mlp(NULL, 5, 16, false, 1);
    sy_fit_options o = sy_fit_options_default();
    o.batch_size = 40;
    o.epochs = 4;
    o.steps_per_epoch = 5;
    o.verbose = 0;
    o.model_dir = dir;
    o.resume = resume;
    sy_callback cbs[2] = {{0}, {&crash, NULL, NULL, crash_at, NULL, NULL, NULL}};
    CHECK_OK(sy_callback_learning_rate_scheduler(halve, NULL, 0, NULL, &cbs[0]));
    o.callbacks = cbs;
    o.n_callbacks = crash ? 2 : 1;
    sy_status st = sy_model_fit(m, x, y, &o, NULL);
    sy_callback_free(&cbs[0]);
    sy_tensor_free(x);
    sy_tensor_free(y);
    *out = m;
    return st;
}

/* Stopped in epoch 3 and resumed from epoch 2's checkpoint, the run goes on at 0.01 / 8 (epoch 3's
 * halving of the checkpoint's 0.01 / 4), not at the compiled rate's half, and ends as the
 * uninterrupted run, bit for bit. */
static void test_resume_learning_rate(void) {
    char ref[600], cut[600];
    snprintf(ref, sizeof ref, "%s/lr-ref", tmp_root);
    snprintf(cut, sizeof cut, "%s/lr-cut", tmp_root);
    sy_model *whole, *first, *resumed;
    CHECK_OK(lr_run(ref, false, 0, &whole));
    CHECK_ERR(lr_run(cut, false, 13, &first), SY_ERR_INTERNAL, "simulated crash");
    CHECK_OK(lr_run(cut, true, 0, &resumed));
    CHECK((float)sy_model_learning_rate(resumed) == 0.01f / 16 &&
              sy_model_learning_rate(resumed) == sy_model_learning_rate(whole),
          "the resumed run's rate %.9g, the uninterrupted run's %.9g, expected 0.01 / 16",
          sy_model_learning_rate(resumed), sy_model_learning_rate(whole));
    CHECK(same_weights(whole, resumed),
          "resumed with the checkpoint's learning rate, the weights are the "
          "uninterrupted run's");
    sy_model_free(whole);
    sy_model_free(first);
    sy_model_free(resumed);
}

static void test_refusals(sy_strategy *s) {
    char dir[600], path[700], bad[800];
    snprintf(dir, sizeof dir, "%s/refusals", tmp_root);
    run_spec arrays = {false, 0};
    sy_model *m;
    CHECK_OK(run(s, &arrays, dir, 2, false, 0, &m)); /* 14 steps, 2 a trip: checkpoints at 4, 6, 7 (the epoch's end), 9, 13, 14 */
    sy_model_free(m);
    int64_t newest;
    CHECK(count_checkpoints(dir, &newest) == 6 && newest == 14, "6 checkpoints, the newest at step 14: %lld",
          (long long)newest);

    /* the directory holds checkpoints: not without resume, and they stay */
    CHECK_ERR(run(s, &arrays, dir, 2, false, 0, &m), SY_ERR_INVALID_ARGUMENT, "already holds checkpoints", "ckpt-14");
    sy_model_free(m);
    CHECK(count_checkpoints(dir, &newest) == 6, "the checkpoints are still there");

    /* keep_checkpoint_max */
    sy_tensor *x, *y;
    make_data(600, &x, &y, 11);
    sy_model *k = make_mlp(s, 5, 16, true, 1);
    sy_fit_options o = sy_fit_options_default();
    o.batch_size = 40;
    o.epochs = 3;
    o.verbose = 0;
    snprintf(path, sizeof path, "%s/keep", tmp_root);
    o.model_dir = path;
    o.save_checkpoints_steps = 4;
    o.keep_checkpoint_max = 2;
    CHECK_OK(sy_model_fit(k, x, y, &o, NULL));
    CHECK(count_checkpoints(path, &newest) == 2 && newest == 45, "2 kept, the newest at 45: %lld", (long long)newest);
    /* a temporary file a killed writer left is not a checkpoint; listing
     * leaves it (it may be another run's, being written), and the next run
     * to take the directory's lock removes it */
    snprintf(bad, sizeof bad, "%s/.ckpt-48.syckpt.tmp-Ab12Cd", path);
    write_bytes(bad, "partial", 7, false);
    CHECK(count_checkpoints(path, &newest) == 2 && newest == 45 && access(bad, F_OK) == 0,
          "the temporary file is ignored, and left, by a listing");
    o.resume = true; /* all 3 epochs done: nothing to train */
    CHECK_OK(sy_model_fit(k, x, y, &o, NULL));
    o.resume = false;
    CHECK(count_checkpoints(path, &newest) == 2 && newest == 45 && access(bad, F_OK) != 0,
          "the temporary file is removed by the next run");
    sy_model_free(k);

    /* loading into another model: named layer, both shapes; nothing changed */
    ckpt_path(path, sizeof path, dir, 14);
    fit_position p;
    sy_model *other = make_mlp(s, 5, 8, true, 1);
    sy_tensor *small_x, *small_y;
    make_data(40, &small_x, &small_y, 3);
    sy_fit_options one = sy_fit_options_default();
    one.batch_size = 40;
    one.verbose = 0;
    CHECK_OK(sy_model_fit(other, small_x, small_y, &one, NULL)); /* its optimizer's slots now exist */
    size_t n;
    float *before = snapshot(other, &n);
    CHECK_ERR(checkpoint_load(other, path, &p), SY_ERR_SHAPE, "another model", "dense", "(4, 8)", "(4, 16)");
    CHECK(unchanged(other, before, n), "a refused checkpoint changed the weights");
    free(before);
    sy_model_free(other);

    /* another optimizer: its slots are not there */
    if (s) sy_strategy_scope_enter(s);
    sy_model *sgd;
    CHECK_OK(sy_model_new("mlp", &sgd));
    if (s) sy_strategy_scope_exit(s);
    sy_model_set_seed(sgd, 5);
    sy_layer l1 = sy_layer_dense(16), l2 = sy_layer_dropout(0.25f), l3 = sy_layer_dense(3);
    l1.input_shape = sy_shape_of(1, (int64_t)4);
    l1.activation = SY_ACTIVATION_RELU;
    l3.activation = SY_ACTIVATION_SOFTMAX;
    CHECK_OK(sy_model_add(sgd, &l1));
    CHECK_OK(sy_model_add(sgd, &l2));
    CHECK_OK(sy_model_add(sgd, &l3));
    sy_compile_options c = sy_compile_options_default();
    c.optimizer = sy_optimizer_sgd(0.1f, 0.9, false);
    c.loss = "sparse_categorical_crossentropy";
    CHECK_OK(sy_model_compile(sgd, &c));
    CHECK_OK(sy_model_fit(sgd, small_x, small_y, &one, NULL));
    before = snapshot(sgd, &n);
    CHECK_ERR(checkpoint_load(sgd, path, &p), SY_ERR_INVALID_ARGUMENT, "optimizer Adam", "SGD");
    CHECK(unchanged(sgd, before, n), "a refused checkpoint changed the weights");
    free(before);
    sy_model_free(sgd);

    /* another seed: the dropout streams would differ */
    sy_model *seeded = make_mlp(s, 6, 16, true, 1);
    CHECK_OK(sy_model_fit(seeded, small_x, small_y, &one, NULL));
    CHECK_ERR(checkpoint_load(seeded, path, &p), SY_ERR_INVALID_ARGUMENT, "seeded 5", "seed is 6");

    /* damaged files: truncated at several points, a flipped byte, not a checkpoint */
    uint8_t *file;
    size_t size;
    CHECK_OK(io_read_file(path, &file, &size));
    before = snapshot(seeded, &n);
    snprintf(bad, sizeof bad, "%s/bad.syckpt", tmp_root);
    size_t cuts[] = {0, 5, 24, 100, size / 2, size - 1};
    for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++) {
        write_bytes(bad, file, cuts[i], false);
        CHECK_ERR(checkpoint_load(seeded, bad, &p), SY_ERR_CORRUPT, "bad.syckpt");
    }
    write_bytes(bad, file, size, false);
    CHECK_ERR(checkpoint_load(seeded, bad, &p), SY_ERR_INVALID_ARGUMENT, "seed"); /* whole: only the seed is wrong */
    file[size / 3] ^= 0x10;
    write_bytes(bad, file, size, false);
    CHECK_ERR(checkpoint_load(seeded, bad, &p), SY_ERR_CORRUPT, "damaged", "CRC-32C");
    write_bytes(bad, "{\"format\": \"not this\"}", 22, false);
    CHECK_ERR(checkpoint_load(seeded, bad, &p), SY_ERR_CORRUPT, "not a systolic checkpoint");
    snprintf(bad, sizeof bad, "%s/no-such.syckpt", tmp_root);
    CHECK_ERR(checkpoint_load(seeded, bad, &p), SY_ERR_IO, "no-such.syckpt");
    CHECK(unchanged(seeded, before, n), "a refused checkpoint changed the weights");
    free(before);
    sy_free(file);
    sy_model_free(seeded);

    /* a save that fails (a file may not grow past 512 bytes, as on a full disk)
     * leaves the checkpoints already written whole */
    snprintf(path, sizeof path, "%s/full", tmp_root);
    sy_model *f = make_mlp(s, 5, 16, true, 1);
    o.model_dir = path;
    o.epochs = 1;
    o.steps_per_epoch = 2;
    o.save_checkpoints_steps = 0;
    CHECK_OK(sy_model_fit(f, x, y, &o, NULL));
    o.resume = true;
    o.epochs = 2;
    struct rlimit old, tiny;
    getrlimit(RLIMIT_FSIZE, &old);
    tiny.rlim_cur = 512;
    tiny.rlim_max = old.rlim_max;
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    if (setrlimit(RLIMIT_FSIZE, &tiny) == 0) {
        CHECK_ERR(sy_model_fit(f, x, y, &o, NULL), SY_ERR_IO, "ckpt-4.syckpt", "File too large", "unchanged");
        setrlimit(RLIMIT_FSIZE, &old);
        char kept[700];
        ckpt_path(kept, sizeof kept, path, 2);
        CHECK(count_checkpoints(path, &newest) == 1 && newest == 2, "only ckpt-2 stays: %lld", (long long)newest);
        fit_position q;
        sy_model *g = make_mlp(s, 5, 16, true, 1);
        CHECK_OK(sy_model_fit(g, small_x, small_y, &one, NULL));
        CHECK_OK(checkpoint_load(g, kept, &q));
        CHECK(q.epoch == 1 && q.step == 0, "ckpt-2 is the end of epoch 1: epoch %d step %lld", q.epoch, (long long)q.step);
        sy_model_free(g);
    }
    signal(SIGXFSZ, old_handler);
    sy_model_free(f);

    /* options that make no sense */
    sy_model *e = make_mlp(s, 5, 16, true, 1);
    sy_fit_options bad_o = sy_fit_options_default();
    bad_o.verbose = 0;
    bad_o.batch_size = 40;
    bad_o.resume = true;
    CHECK_ERR(sy_model_fit(e, x, y, &bad_o, NULL), SY_ERR_INVALID_ARGUMENT, "model_dir");
    bad_o.model_dir = dir;
    bad_o.resume = false;
    bad_o.keep_checkpoint_max = 0;
    CHECK_ERR(sy_model_fit(e, x, y, &bad_o, NULL), SY_ERR_INVALID_ARGUMENT, "keep_checkpoint_max");
    sy_model_free(e);
    sy_tensor_free(x);
    sy_tensor_free(y);
    sy_tensor_free(small_x);
    sy_tensor_free(small_y);
}

/* ---- one run per model_dir, and resuming past damaged checkpoints ------------------- */

/* on_epoch_end of the run holding the directory: another model's fit on
 * it, in this process, must be refused at once and touch nothing -- not
 * even a temporary file that may be the holder's checkpoint being written. */
typedef struct second_run {
    const char *dir;
    bool ran;
    sy_status st;
    char msg[2048];
    bool tmp_kept;
} second_run;

static sy_status fit_same_dir(void *ctx, sy_model *m, int32_t epoch, const sy_logs *logs) {
    (void)m, (void)logs;
    second_run *r = ctx;
    if (epoch != 0) return SY_OK;
    char tmp[700];
    snprintf(tmp, sizeof tmp, "%s/.ckpt-99.syckpt.tmp-Zz9Yy8", r->dir);
    write_bytes(tmp, "being written", 13, false);
    run_spec arrays = {false, 0};
    sy_model *b;
    r->st = run(NULL, &arrays, r->dir, 4, true, 0, &b);
    snprintf(r->msg, sizeof r->msg, "%s", r->st ? sy_last_error() : "");
    sy_model_free(b);
    r->tmp_kept = access(tmp, F_OK) == 0;
    r->ran = true;
    return SY_OK;
}

static void test_lock(void) {
    char dir[600], lock[700], tmp[700], pid[32];
    snprintf(dir, sizeof dir, "%s/locked", tmp_root);
    snprintf(lock, sizeof lock, "%s/" CKPT_LOCK, dir);
    snprintf(tmp, sizeof tmp, "%s/.ckpt-99.syckpt.tmp-Zz9Yy8", dir);
    snprintf(pid, sizeof pid, "pid %ld, this process", (long)getpid());
    sy_tensor *x, *y;
    make_data(600, &x, &y, 11);
    sy_model *a = make_mlp(NULL, 5, 16, true, 2);
    second_run r = {dir, false, SY_OK, "", false};
    sy_callback cb = {&r, NULL, NULL, NULL, fit_same_dir, NULL, NULL};
    sy_fit_options o = sy_fit_options_default();
    o.batch_size = 40;
    o.epochs = 2;
    o.steps_per_epoch = 7;
    o.verbose = 0;
    o.model_dir = dir;
    o.save_checkpoints_steps = 3;
    o.callbacks = &cb;
    o.n_callbacks = 1;
    CHECK_OK(sy_model_fit(a, x, y, &o, NULL));
    CHECK(r.ran && r.st == SY_ERR_STATE && strstr(r.msg, "is in use by another run") && strstr(r.msg, pid) &&
              strstr(r.msg, dir),
          "a second fit on a model_dir in use (in this process) should be refused naming the "
          "holder: %s (%s)",
          sy_status_name(r.st), r.msg);
    CHECK(r.tmp_kept, "the refused run removed a temporary file of the directory's holder");
    FILE *f = fopen(lock, "r");
    long held = -1;
    CHECK(f && fscanf(f, "%ld", &held) == 1 && held == (long)getpid(), "the lock file '%s' holds the pid: %ld", lock,
          held);
    if (f) fclose(f);

    /* released at the end: the next run takes the directory (and clears
     * the temporary file left there) */
    sy_model *b;
    run_spec arrays = {false, 0};
    CHECK_OK(run(NULL, &arrays, dir, 3, true, 0, &b));
    CHECK(access(tmp, F_OK) != 0, "the run holding the directory removes the temporary files left there");
    sy_model_free(b);
    /* released when fit fails, too */
    CHECK_ERR(run(NULL, &arrays, dir, 5, true, 25, &b), SY_ERR_INTERNAL, "simulated crash");
    sy_model_free(b);
    CHECK_OK(run(NULL, &arrays, dir, 5, true, 0, &b));
    sy_model_free(b);
    sy_model_free(a);
    sy_tensor_free(x);
    sy_tensor_free(y);
}

static char warnings[8192];

static void capture_warning(void *ctx, sy_log_level level, const char *msg) {
    (void)ctx;
    size_t at = strlen(warnings);
    if (level >= SY_LOG_WARNING && at < sizeof warnings) snprintf(warnings + at, sizeof warnings - at, "%s\n", msg);
}

/* Cut a file to n bytes, or flip the byte at -n - 1 when n < 0. */
static void damage(const char *path, long n) {
    uint8_t *file;
    size_t size;
    CHECK_OK(io_read_file(path, &file, &size));
    if (n < 0) file[(size_t)(-n - 1) % size] ^= 0x40;
    write_bytes(path, file, n < 0 ? size : (size_t)n, false);
    sy_free(file);
}

static void test_resume_past_damage(sy_strategy *s) {
    char ref[600], cut[600], a[700], b[700], c[700], moved[800];
    snprintf(ref, sizeof ref, "%s/damaged-ref", tmp_root);
    snprintf(cut, sizeof cut, "%s/damaged-cut", tmp_root);
    run_spec arrays = {false, 0};
    sy_model *whole, *first, *resumed;
    CHECK_OK(run(s, &arrays, ref, 4, false, 0, &whole));
    CHECK_ERR(run(s, &arrays, cut, 4, false, 20, &first), SY_ERR_INTERNAL, "simulated crash");
    int64_t *steps, newest_ref;
    int32_t n;
    count_checkpoints(ref, &newest_ref);
    CHECK_OK(ckpt_list(cut, &steps, &n));
    CHECK(n >= 4, "the stopped run left %d checkpoints", n);
    if (n < 4) return;
    /* the newest truncated, the one before it with a flipped byte: resume
     * goes on from the third newest, and ends as if never stopped */
    ckpt_path(a, sizeof a, cut, steps[n - 1]);
    ckpt_path(b, sizeof b, cut, steps[n - 2]);
    ckpt_path(c, sizeof c, cut, steps[n - 3]);
    damage(a, 700);
    damage(b, -301);
    warnings[0] = '\0';
    sy_set_log(capture_warning, NULL);
    sy_status st = run(s, &arrays, cut, 4, true, 0, &resumed);
    sy_set_log(NULL, NULL);
    CHECK(st == SY_OK, "resume past two damaged checkpoints: %s", sy_last_error());
    CHECK(strstr(warnings, a) && strstr(warnings, "truncated") && strstr(warnings, b) && strstr(warnings, "CRC-32C") &&
              strstr(warnings, c) && strstr(warnings, "newest valid"),
          "the warnings should name the two skipped checkpoints, why, and the one resumed from: %s", warnings);
    CHECK(same_weights(whole, resumed), "resumed from '%s' past two damaged checkpoints, the weights differ", c);
    ckpt_path(a, sizeof a, ref, newest_ref);
    ckpt_path(b, sizeof b, cut, newest_ref);
    CHECK(same_file(a, b), "resumed past damage, the last checkpoints %s and %s differ", a, b);
    snprintf(moved, sizeof moved, "%s/ckpt-%lld" CKPT_SUFFIX ".damaged", cut, (long long)steps[n - 1]);
    CHECK(access(moved, F_OK) == 0, "the damaged checkpoint is kept aside as '%s'", moved);
    sy_free(steps);
    sy_model_free(whole);
    sy_model_free(first);
    sy_model_free(resumed);

    /* every checkpoint damaged: refused, naming each, and all left in place */
    snprintf(cut, sizeof cut, "%s/damaged-all", tmp_root);
    CHECK_ERR(run(s, &arrays, cut, 4, false, 7, &first), SY_ERR_INTERNAL, "simulated crash");
    sy_model_free(first);
    CHECK_OK(ckpt_list(cut, &steps, &n));
    CHECK(n == 2, "2 checkpoints (steps 4 and 6) before the crash: %d", n);
    ckpt_path(a, sizeof a, cut, steps[0]);
    ckpt_path(b, sizeof b, cut, steps[n - 1]);
    damage(a, 30);
    damage(b, -40);
    sy_set_log(capture_warning, NULL);
    CHECK_ERR(run(s, &arrays, cut, 4, true, 0, &resumed), SY_ERR_CORRUPT, "all 2 checkpoints are damaged", a, b,
              "CRC-32C", "truncated");
    sy_set_log(NULL, NULL);
    sy_model_free(resumed);
    CHECK(access(a, F_OK) == 0 && access(b, F_OK) == 0, "with none valid, the damaged checkpoints stay in place");
    sy_free(steps);

    /* a checkpoint of another model is no damage: refused, not skipped */
    snprintf(cut, sizeof cut, "%s/damaged-other", tmp_root);
    CHECK_ERR(run(s, &arrays, cut, 4, false, 5, &first), SY_ERR_INTERNAL, "simulated crash");
    sy_model_free(first);
    snprintf(c, sizeof c, "%s/other-model", tmp_root);
    sy_model *other = make_mlp(s, 5, 8, true, 1);
    sy_tensor *x, *y;
    make_data(40, &x, &y, 3);
    sy_fit_options o = sy_fit_options_default();
    o.batch_size = 40;
    o.verbose = 0;
    o.model_dir = c;
    CHECK_OK(sy_model_fit(other, x, y, &o, NULL));
    ckpt_path(a, sizeof a, c, 1);
    ckpt_path(b, sizeof b, cut, 1000);
    uint8_t *file;
    size_t size;
    CHECK_OK(io_read_file(a, &file, &size));
    write_bytes(b, file, size, false);
    sy_free(file);
    CHECK_ERR(run(s, &arrays, cut, 4, true, 0, &resumed), SY_ERR_SHAPE, "another model", "ckpt-1000");
    CHECK(access(b, F_OK) == 0, "a checkpoint of another model is left in place");
    sy_model_free(resumed);
    sy_model_free(other);
    sy_tensor_free(x);
    sy_tensor_free(y);
}

/* test_checkpoint --write-fuzz-seeds DIR: the fuzz target's seeds, a
 * checkpoint of its model whole ('\0' first) and as framed by it ('\1',
 * the manifest's length, manifest and data). */
static int write_fuzz_seeds(const char *dir) {
    char path[4096];
    snprintf(path, sizeof path, "%s/model", dir);
    run_spec arrays = {false, 0};
    sy_model *model;
    CHECK_OK(run(NULL, &arrays, path, 1, false, 0, &model));
    sy_model_free(model);
    char file_path[4200];
    ckpt_path(file_path, sizeof file_path, path, 7);
    uint8_t *file;
    size_t size, data_size;
    char *man;
    const uint8_t *data;
    CHECK_OK(io_read_file(file_path, &file, &size));
    CHECK_OK(ckpt_parse(file, size, file_path, &man, &data, &data_size));
    size_t m = strlen(man);
    uint8_t *seed = malloc(size + 1);
    seed[0] = 0;
    memcpy(seed + 1, file, size);
    snprintf(path, sizeof path, "%s/whole", dir);
    write_bytes(path, seed, size + 1, false);
    seed[0] = 1;
    seed[1] = (uint8_t)(m >> 8);
    seed[2] = (uint8_t)m;
    memcpy(seed + 3, man, m);
    memcpy(seed + 3 + m, data, data_size);
    snprintf(path, sizeof path, "%s/framed", dir);
    write_bytes(path, seed, 3 + m + data_size, false);
    free(seed);
    sy_free(man);
    sy_free(file);
    return check_report("test_checkpoint --write-fuzz-seeds");
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "--write-fuzz-seeds") == 0) return write_fuzz_seeds(argv[2]);
    if (!files_setup("checkpoint", __FILE__)) return 1;
    sy_strategy *s = two_replicas();
    run_spec arrays = {false, 0}, per_pass = {true, 0}, across = {true, 6};
    test_resume(s, &arrays, "arrays", 12);  /* stopped mid-epoch (epoch 2, after step 12) */
    test_resume(s, &arrays, "arrays-epoch", 14);
    test_resume(s, &per_pass, "dataset-pass", 20);
    test_resume(s, &across, "dataset-across", 16);
    /* issue 17: Nadam's one u_product slot, global clipping and weight decay resume bit for bit too */
    sy_optimizer nadam = sy_optimizer_keras(SY_OPTIMIZER_NADAM);
    nadam.learning_rate = 0.01f, nadam.global_clipnorm = 0.5, nadam.weight_decay = 0.01;
    run_optimizer = &nadam;
    test_resume(s, &arrays, "nadam", 12);
    run_optimizer = NULL;
    test_resume_learning_rate();
    test_refusals(s);
    test_lock();
    test_resume_past_damage(s);
    sy_strategy_free(s);
    files_cleanup();
    return check_report("test_checkpoint");
}
