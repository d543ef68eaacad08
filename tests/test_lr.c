/*
 * test_lr.c - issue 17, points 4 and 6: learning-rate schedules,
 * ReduceLROnPlateau and LearningRateScheduler against what tf.keras 2.15
 * did (tests/data/lr, written by tools/golden/make_lr_fixtures.py):
 *
 *   - each schedule's config, as Keras serialized it, is read and written
 *     back byte for byte, and its value at 36 steps (0 to 2^24 + 1) is
 *     Keras's fit-time float32 bit for bit -- except CosineDecayRestarts
 *     with t_mul != 1, whose TensorFlow log is Eigen's: within 2 ulp;
 *   - the command line's text form gives the same schedule;
 *   - every ReduceLROnPlateau and LearningRateScheduler case replays on a
 *     real compiled model: after each epoch the optimizer's rate, the "lr"
 *     put into the logs, wait, best and cooldown_counter, the verbose lines
 *     and the warnings must be Keras's;
 *   - a real fit() with both callbacks, with a schedule and without:
 *     the history's lr, the final rate and the messages are Keras's; and a
 *     scheduled run's rate follows the schedule per step;
 *   - the rate a callback set is in a saved model's training_config, as
 *     Keras writes it, and a loaded model has it;
 *   - the refusals.
 */
#include "check.h"
#include "keras/keras_config.h"
#include "keras/keras_internal.h"
#include "systolic.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef SY_LR_FIXTURES
#error "SY_LR_FIXTURES must name tests/data/lr"
#endif

/* ---- the fixtures' lines ------------------------------------------------------------------ */

typedef struct fixture {
    char **line;
    int n, at;
} fixture;

static bool fixture_open(fixture *f, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", SY_LR_FIXTURES, name);
    memset(f, 0, sizeof *f);
    FILE *in = fopen(path, "r");
    CHECK(in != NULL, "the fixture %s (tools/golden/make_lr_fixtures.py) cannot be read", path);
    if (!in) return false;
    char *buf = NULL;
    size_t cap = 0;
    for (ssize_t len; (len = getline(&buf, &cap, in)) > 0;) {
        if (buf[len - 1] == '\n') buf[len - 1] = '\0';
        f->line = realloc(f->line, (size_t)(f->n + 1) * sizeof *f->line);
        f->line[f->n++] = strdup(buf);
    }
    free(buf);
    fclose(in);
    return true;
}

static void fixture_close(fixture *f) {
    for (int i = 0; i < f->n; i++) free(f->line[i]);
    free(f->line);
}

/* The rest of the next line if it starts with `word` (then a space or its end); else NULL. */
static const char *next(fixture *f, const char *word) {
    if (f->at >= f->n) return NULL;
    const char *s = f->line[f->at];
    size_t k = strlen(word);
    if (strncmp(s, word, k) || (s[k] && s[k] != ' ')) return NULL;
    f->at++;
    return s[k] ? s + k + 1 : s + k;
}

/* "key=value ..." -> the value of key (NAN if absent) */
static double field(const char *s, const char *key) {
    size_t k = strlen(key);
    for (const char *p = s; (p = strstr(p, key)); p += k)
        if ((p == s || p[-1] == ' ') && p[k] == '=') return strtod(p + k + 1, NULL);
    return NAN;
}

/* "N name=value ..." into logs, in order; returns N. */
static int32_t parse_epoch(const char *s, sy_logs *logs) {
    char *p;
    int32_t epoch = (int32_t)strtol(s, &p, 10);
    memset(logs, 0, sizeof *logs);
    while (*p == ' ') {
        char *eq = strchr(++p, '=');
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(eq - p), p);
        logs_set(logs, name, strtod(eq + 1, &p));
    }
    return epoch;
}

static bool same(double a, double b) { return a == b || (isnan(a) && isnan(b)); }

/* ---- schedules ---------------------------------------------------------------------------- */

static int32_t ulps(float a, float b) {
    int32_t ia, ib;
    memcpy(&ia, &a, 4);
    memcpy(&ib, &b, 4);
    return abs(ia - ib);
}

static void check_schedules(void) {
    fixture f;
    if (!fixture_open(&f, "schedules.txt")) return;
    int cases = 0, values = 0, worst_ulps = 0;
    for (const char *name; (name = next(&f, "case"));) {
        char case_name[64];
        snprintf(case_name, sizeof case_name, "%s", name);
        const char *config = next(&f, "config");
        json_error_t err;
        json_t *j = config ? json_loads(config, 0, &err) : NULL;
        CHECK(j != NULL, "%s: the config line", case_name);
        sy_lr_schedule s;
        memset(&s, 0, sizeof s);
        CHECK_OK(keras_lr_schedule_read(j, case_name, &s));
        json_decref(j);
        /* written back as Keras wrote it */
        json_t *back = keras_lr_schedule_json(&s);
        jw w;
        memset(&w, 0, sizeof w);
        jw_json(&w, back);
        json_decref(back);
        CHECK(w.buf && !strcmp(w.buf, config), "%s: written back as\n  %s\nKeras wrote\n  %s", case_name, w.buf, config);
        sy_free(w.buf);
        bool geometric = s.kind == SY_LR_COSINE_DECAY_RESTARTS && s.t_mul != 1;
        for (const char *v; (v = next(&f, "value"));) {
            char *end;
            long long step = strtoll(v, &end, 10);
            float want = (float)strtod(end, NULL), got = sy_lr_schedule_value(&s, step);
            int32_t u = ulps(got, want);
            if (u > worst_ulps) worst_ulps = u;
            CHECK(geometric ? u <= 2 : got == want, "%s at step %lld: %.9g, Keras %.9g (%d ulp)", case_name, step,
                  (double)got, (double)want, u);
            values++;
        }
        CHECK(next(&f, "end") != NULL, "%s: the case's end", case_name);
        cases++;
    }
    fprintf(stderr, "  schedules: %d cases, %d values, the largest difference %d ulp\n", cases, values, worst_ulps);
    CHECK(cases == 17, "%d schedule cases read", cases);
    fixture_close(&f);
}

/* The text form and the C constructors give Keras's schedules. */
static void check_text_form(void) {
    sy_lr_schedule a, b = sy_lr_exponential_decay(0.1, 1000, 0.96, false);
    CHECK_OK(sy_lr_schedule_parse("exponential_decay:decay_steps=1000,decay_rate=0.96", 0.1, &a));
    for (int64_t step = 0; step < 3000; step += 7)
        CHECK(sy_lr_schedule_value(&a, step) == sy_lr_schedule_value(&b, step), "text form at step %lld", (long long)step);
    double bounds[] = {100, 1000}, vals[] = {1.0, 0.5, 0.1};
    b = sy_lr_piecewise_constant_decay(2, bounds, vals);
    CHECK_OK(sy_lr_schedule_parse("PiecewiseConstantDecay:boundaries=100/1000,values=1.0/0.5/0.1", NAN, &a));
    CHECK(a.kind == b.kind && a.n_boundaries == 2 && a.boundaries[1] == 1000 && a.values[2] == 0.1, "piecewise text");
    CHECK(sy_lr_schedule_value(&a, 100) == 1.0f && sy_lr_schedule_value(&a, 101) == 0.5f &&
              sy_lr_schedule_value(&a, 1001) == 0.1f,
          "piecewise: values[i] for boundaries[i-1] < step <= boundaries[i]");
    CHECK_OK(sy_lr_schedule_parse("cosine_decay:initial_learning_rate=0,decay_steps=1000,warmup_target=0.1,warmup_steps=100",
                                  0.5, &a));
    CHECK(a.has_warmup_target && a.warmup_target == 0.1 && a.initial_learning_rate == 0 && a.warmup_steps == 100,
          "cosine warmup text");
    /* refusals, with Keras's words where Keras has them */
    CHECK_ERR(sy_lr_schedule_parse("piecewise_constant_decay:boundaries=1/2,values=0.1/0.2", NAN, &a),
              SY_ERR_INVALID_ARGUMENT, "length of boundaries should be 1 less than the length of values",
              "boundaries of length 2", "values of length 2");
    CHECK_ERR(sy_lr_schedule_parse("exponential_decay:decay_steps=0,decay_rate=0.5", 0.1, &a), SY_ERR_INVALID_ARGUMENT,
              "ExponentialDecay", "decay_steps 0");
    CHECK_ERR(sy_lr_schedule_parse("exponential_decay:decay_steps=10", 0.1, &a), SY_ERR_INVALID_ARGUMENT,
              "ExponentialDecay needs decay_rate");
    CHECK_ERR(sy_lr_schedule_parse("exponential_decay:decay_steps=10,decay_rate=0.5,staircse=true", 0.1, &a),
              SY_ERR_INVALID_ARGUMENT, "unexpected argument 'staircse'", "staircase");
    CHECK_ERR(sy_lr_schedule_parse("step_decay:decay_steps=10", 0.1, &a), SY_ERR_UNSUPPORTED, "step_decay",
              "CosineDecayRestarts");
    CHECK_ERR(sy_lr_schedule_parse("polynomial_decay:decay_steps=ten", 0.1, &a), SY_ERR_INVALID_ARGUMENT,
              "decay_steps=ten");
    CHECK_ERR(sy_lr_schedule_parse("inverse_time_decay:decay_steps=10,decay_rate=1", NAN, &a), SY_ERR_INVALID_ARGUMENT,
              "needs initial_learning_rate");
    CHECK_ERR(sy_lr_schedule_parse("piecewise_constant_decay:boundaries=5/5,values=1/2/3", NAN, &a),
              SY_ERR_INVALID_ARGUMENT, "strictly increasing");
    CHECK_ERR(sy_lr_schedule_parse("cosine_decay_restarts:first_decay_steps=10,t_mul=0", 0.1, &a),
              SY_ERR_INVALID_ARGUMENT, "t_mul 0");
}

/* ---- the callbacks, scripted ------------------------------------------------------------- */

static char warnings[8192];

static void capture_warning(void *ctx, sy_log_level level, const char *message) {
    (void)ctx;
    size_t n = strlen(warnings);
    if (level == SY_LOG_WARNING) snprintf(warnings + n, sizeof warnings - n, "%s\n", message);
}

/* Dense(2) on 3 inputs, SGD(lr): the model the script compiled (its rate is what matters). */
static sy_model *sgd_model(const sy_lr_schedule *schedule) {
    sy_model *m = NULL;
    CHECK_OK(sy_model_new("lr", &m));
    sy_layer d = sy_layer_dense(2);
    d.input_shape = sy_shape_of(1, (int64_t)3);
    CHECK_OK(sy_model_add(m, &d));
    sy_compile_options c = sy_compile_options_default();
    c.optimizer = sy_optimizer_sgd(0.1f, 0, false);
    if (schedule) c.optimizer.schedule = *schedule;
    c.loss = "mse";
    CHECK_OK(sy_model_compile(m, &c));
    return m;
}

static double times_0_7(void *user, int32_t epoch, double lr) {
    (void)user, (void)epoch;
    return lr * 0.7;
}

static double exp_after_2(void *user, int32_t epoch, double lr) {
    (void)user;
    return epoch < 2 ? lr : lr * exp(-0.1);
}

static double step_halving(void *user, int32_t epoch, double lr) {
    (void)user, (void)lr;
    return 0.1 * pow(0.5, epoch / 2);
}

static sy_lr_schedule_fn function_named(const char *name) {
    if (!strcmp(name, "times_0_7")) return times_0_7;
    if (!strcmp(name, "exp_after_2")) return exp_after_2;
    if (!strcmp(name, "step_halving")) return step_halving;
    CHECK(false, "a schedule function the script names but the test lacks: %s", name);
    return times_0_7;
}

/* The non-empty lines of what was printed must be the case's "print" lines, in order. */
static void check_printed(fixture *f, const char *case_name, FILE *progress) {
    fflush(progress);
    rewind(progress);
    char line[512];
    int k = 0;
    while (fgets(line, sizeof line, progress)) {
        line[strcspn(line, "\n")] = '\0';
        if (!*line) continue;
        const char *want = next(f, "print");
        CHECK(want && !strcmp(line, want), "%s: printed '%s', Keras '%s'", case_name, line, want ? want : "(nothing)");
        k++;
    }
    CHECK(next(f, "print") == NULL, "%s: Keras printed more than %d lines", case_name, k);
}

static void check_warnings(fixture *f, const char *case_name) {
    char *save = NULL;
    for (char *w = strtok_r(warnings, "\n", &save); w; w = strtok_r(NULL, "\n", &save)) {
        const char *want = next(f, "warning");
        CHECK(want && !strcmp(w, want), "%s: warned '%s', Keras '%s'", case_name, w, want ? want : "(nothing)");
    }
    CHECK(next(f, "warning") == NULL, "%s: Keras warned more", case_name);
    warnings[0] = '\0';
}

static void replay(const char *file, bool reduce) {
    fixture f;
    if (!fixture_open(&f, file)) return;
    int cases = 0;
    for (const char *name; (name = next(&f, "case"));) {
        char case_name[64], monitor[64] = "val_loss", mode[64] = "auto", fn[64] = "";
        snprintf(case_name, sizeof case_name, "%s", name);
        sy_reduce_lr_options o = sy_reduce_lr_options_default();
        int32_t verbose = 0;
        for (const char *opt; (opt = next(&f, "option"));) {
            char key[32], value[64];
            CHECK(sscanf(opt, "%31s %63s", key, value) == 2, "%s: option '%s'", case_name, opt);
            if (!strcmp(key, "monitor")) snprintf(monitor, sizeof monitor, "%s", value);
            else if (!strcmp(key, "mode")) snprintf(mode, sizeof mode, "%s", value);
            else if (!strcmp(key, "schedule")) snprintf(fn, sizeof fn, "%s", value);
            else if (!strcmp(key, "factor")) o.factor = strtod(value, NULL);
            else if (!strcmp(key, "patience")) o.patience = atoi(value);
            else if (!strcmp(key, "verbose")) verbose = o.verbose = atoi(value);
            else if (!strcmp(key, "min_delta")) o.min_delta = strtod(value, NULL);
            else if (!strcmp(key, "cooldown")) o.cooldown = atoi(value);
            else if (!strcmp(key, "min_lr")) o.min_lr = strtod(value, NULL);
            else CHECK(false, "%s: an option the test does not know: %s", case_name, key);
        }
        FILE *progress = tmpfile();
        o.monitor = monitor, o.mode = mode, o.progress = progress;
        sy_set_log(capture_warning, NULL);
        sy_callback cb;
        memset(&cb, 0, sizeof cb);
        if (reduce) CHECK_OK(sy_callback_reduce_lr_on_plateau(&o, &cb));
        else CHECK_OK(sy_callback_learning_rate_scheduler(function_named(fn), NULL, verbose, progress, &cb));
        sy_model *m = sgd_model(NULL);
        while (m && cb.ctx && next(&f, "train")) {
            if (cb.on_train_begin) CHECK_OK(cb.on_train_begin(cb.ctx, m));
            for (const char *e; (e = next(&f, "epoch"));) {
                sy_logs logs;
                int32_t epoch = parse_epoch(e, &logs);
                if (cb.on_epoch_begin) CHECK_OK(cb.on_epoch_begin(cb.ctx, m, epoch));
                CHECK_OK(cb.on_epoch_end(cb.ctx, m, epoch, &logs));
                const char *after = next(&f, "after");
                CHECK(after != NULL, "%s: epoch %d's result", case_name, epoch);
                if (!after) break;
                CHECK((float)sy_model_learning_rate(m) == (float)field(after, "lr"), "%s, epoch %d: lr %.9g, Keras %s",
                      case_name, epoch, sy_model_learning_rate(m), after);
                CHECK((float)sy_logs_get(&logs, "lr") == (float)field(after, "logs_lr") &&
                          sy_logs_get(&logs, "lr") == keras_float_as_decimal((float)field(after, "logs_lr")),
                      "%s, epoch %d: logs lr %.17g, Keras %s", case_name, epoch, sy_logs_get(&logs, "lr"), after);
                sy_reduce_lr_state s;
                if (reduce && sy_callback_reduce_lr_state(&cb, &s) == SY_OK)
                    CHECK(s.wait == (int32_t)field(after, "wait") && same(s.best, field(after, "best")) &&
                              s.cooldown_counter == (int32_t)field(after, "cooldown"),
                          "%s, epoch %d: wait %d best %.17g cooldown %d; Keras %s", case_name, epoch, s.wait, s.best,
                          s.cooldown_counter, after);
            }
        }
        sy_set_log(NULL, NULL);
        check_printed(&f, case_name, progress);
        check_warnings(&f, case_name);
        CHECK(next(&f, "end") != NULL, "%s: the case's end (line %d)", case_name, f.at + 1);
        sy_callback_free(&cb);
        sy_model_free(m);
        fclose(progress);
        cases++;
    }
    fprintf(stderr, "  %s: %d cases\n", file, cases);
    CHECK(cases > 5, "%s: %d cases read", file, cases);
    fixture_close(&f);
}

/* ---- fit() with both callbacks --------------------------------------------------------------- */

static void check_fit(void) {
    fixture f;
    if (!fixture_open(&f, "fit.txt")) return;
    float xs[24], ys[16] = {0};
    for (int i = 0; i < 24; i++) xs[i] = -1.0f + 2.0f * (float)i / 23.0f; /* np.linspace(-1, 1, 24) */
    sy_tensor *x = NULL, *y = NULL;
    CHECK_OK(sy_tensor_new(SY_F32, sy_shape_of(2, 8L, 3L), &x));
    CHECK_OK(sy_tensor_new(SY_F32, sy_shape_of(2, 8L, 2L), &y));
    memcpy(sy_tensor_data(x), xs, sizeof xs);
    memcpy(sy_tensor_data(y), ys, sizeof ys);
    for (const char *name; (name = next(&f, "case"));) {
        char case_name[32];
        snprintf(case_name, sizeof case_name, "%s", name);
        sy_lr_schedule sched = sy_lr_exponential_decay(0.1, 2, 0.5, false);
        sy_model *m = sgd_model(strcmp(case_name, "schedule") ? NULL : &sched);
        FILE *progress = tmpfile();
        sy_reduce_lr_options o = sy_reduce_lr_options_default();
        o.monitor = "loss", o.patience = 0, o.factor = 0.5, o.min_delta = 10, o.verbose = 1, o.progress = progress;
        sy_callback cbs[2];
        CHECK_OK(sy_callback_reduce_lr_on_plateau(&o, &cbs[0]));
        CHECK_OK(sy_callback_learning_rate_scheduler(times_0_7, NULL, 1, progress, &cbs[1]));
        sy_fit_options fo = sy_fit_options_default();
        fo.batch_size = 4, fo.epochs = 3, fo.shuffle = false, fo.verbose = 0;
        fo.callbacks = cbs, fo.n_callbacks = 2;
        sy_history *h = NULL;
        CHECK_OK(sy_model_fit(m, x, y, &fo, &h));
        for (int32_t e = 0; h && e < sy_history_epochs(h); e++) {
            const char *want = next(&f, "history_lr");
            double got = sy_logs_get(sy_history_logs(h, e), "lr");
            CHECK(want && (float)got == (float)strtod(want, NULL), "%s: history lr of epoch %d %.9g, Keras %s", case_name,
                  e, got, want ? want : "(none)");
        }
        const char *final_lr = next(&f, "final_lr");
        CHECK(final_lr && (float)sy_model_learning_rate(m) == (float)strtod(final_lr, NULL), "%s: final lr %.9g, Keras %s",
              case_name, sy_model_learning_rate(m), final_lr ? final_lr : "(none)");
        CHECK(sy_model_iterations(m) == 6, "%s: 6 steps ran", case_name);
        check_printed(&f, case_name, progress);
        CHECK(next(&f, "end") != NULL, "%s: the case's end", case_name);
        sy_history_free(h);
        sy_callback_free(&cbs[0]);
        sy_callback_free(&cbs[1]);
        sy_model_free(m);
        fclose(progress);
    }
    sy_tensor_free(x);
    sy_tensor_free(y);
    fixture_close(&f);
}

/* ---- the rate a callback set, in a saved model ------------------------------------------------
 */

/* Keras's optimizer get_config reads its learning_rate variable, so model.save writes the rate a
 * callback set into training_config (tf.keras 2.15 wrote "learning_rate": 9.999999747378752e-05
 * after a LearningRateScheduler returned 0.0001); optimizer_weights do not hold it. A loaded model
 * trains on at that rate. */
static void check_saved_rate(void) {
    sy_model *m = sgd_model(NULL), *back = NULL;
    CHECK_OK(sy_model_set_learning_rate(m, 0.0001));
    char path[] = "/tmp/sy_test_lr_XXXXXX";
    int fd = mkstemp(path);
    CHECK(fd >= 0, "a temporary file");
    if (fd >= 0) close(fd);
    CHECK_OK(sy_model_save(m, path));
    FILE *f = fopen(path, "rb");
    static char bytes[1 << 16];
    size_t n = f ? fread(bytes, 1, sizeof bytes - 1, f) : 0;
    if (f) fclose(f);
    bool found = false;
    const char *want = "\"learning_rate\": 9.999999747378752e-05,";
    for (size_t i = 0; i + strlen(want) <= n && !found; i++)
        found = !memcmp(bytes + i, want, strlen(want));
    CHECK(found, "the saved training_config holds %s, as Keras's", want);
    CHECK_OK(sy_model_load(path, &back));
    CHECK(back && (float)sy_model_learning_rate(back) == 0.0001f, "the loaded model's rate %.9g",
          back ? sy_model_learning_rate(back) : -1.0);
    unlink(path);
    sy_model_free(back);
    sy_model_free(m);
}

/* ---- refusals ----------------------------------------------------------------------------- */

static void check_refusals(void) {
    sy_reduce_lr_options o = sy_reduce_lr_options_default();
    sy_callback cb;
    o.factor = 1.0;
    CHECK_ERR(sy_callback_reduce_lr_on_plateau(&o, &cb), SY_ERR_INVALID_ARGUMENT,
              "ReduceLROnPlateau does not support a factor >= 1.0. Got 1");
    o = sy_reduce_lr_options_default();
    o.patience = -1;
    CHECK_ERR(sy_callback_reduce_lr_on_plateau(&o, &cb), SY_ERR_INVALID_ARGUMENT, "patience -1");
    CHECK_ERR(sy_callback_learning_rate_scheduler(NULL, NULL, 0, NULL, &cb), SY_ERR_INVALID_ARGUMENT, "schedule function");
    sy_model *m = sgd_model(NULL);
    CHECK_ERR(sy_model_set_learning_rate(m, -0.5), SY_ERR_INVALID_ARGUMENT, "-0.5");
    CHECK_OK(sy_model_set_learning_rate(m, 0.25));
    CHECK(sy_model_learning_rate(m) == 0.25, "the rate set");
    sy_model_free(m);
    /* a schedule with a bad argument is refused at compile, naming it */
    CHECK_OK(sy_model_new("bad", &m));
    sy_layer d = sy_layer_dense(2);
    d.input_shape = sy_shape_of(1, (int64_t)3);
    CHECK_OK(sy_model_add(m, &d));
    sy_compile_options c = sy_compile_options_default();
    c.optimizer = sy_optimizer_adam(0.001f);
    c.optimizer.schedule = sy_lr_cosine_decay(0.1, -5, 0);
    c.loss = "mse";
    CHECK_ERR(sy_model_compile(m, &c), SY_ERR_INVALID_ARGUMENT, "CosineDecay", "decay_steps -5");
    sy_model_free(m);
}

int main(void) {
    check_schedules();
    check_text_form();
    replay("reduce_lr.txt", true);
    replay("lr_scheduler.txt", false);
    check_fit();
    check_saved_rate();
    check_refusals();
    return check_report("test_lr");
}
