/*
 * test_distribute.c - the cluster resolver and the replica strategy: specs
 * and their errors; bitwise determinism whatever the threads; 1 and 8
 * replicas on one global batch giving one trajectory; steps_per_execution
 * changing nothing but how often the host looks; the batch checks and the
 * small-batch warning; evaluate and predict covering every sample; the
 * emulated TPU slices (sim:v3-8, ...) and their refusals (issue 16).
 */
#include "check.h"
#include "synthetic.h"
#include "keras/keras_internal.h"
#include "systolic.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static bool contains(const char *s, const char *sub) { return strstr(s, sub) != NULL; }

static void test_resolver(void) {
    sy_cluster *c;
    CHECK_OK(sy_cluster_resolve("cpu:8", &c));
    if (c) {
        CHECK(sy_cluster_device_count(c) == 8, "cpu:8 has 8 devices");
        CHECK(!strcmp(sy_cluster_spec(c), "cpu:8"), "spec %s", sy_cluster_spec(c));
        const sy_device *d = sy_cluster_device(c, 7);
        CHECK(d && d->replica == 7 && !strcmp(d->name, "/job:localhost/replica:0/task:0/device:CPU:7"), "device 7");
        CHECK(sy_cluster_host_cores(c) == sy_cpu_count() && sy_cluster_host_memory(c) > 0, "host facts");
        sy_cluster_free(c);
    }
    CHECK_OK(sy_cluster_resolve("local", &c));
    if (c) CHECK(sy_cluster_device_count(c) == sy_cpu_count(), "local: one replica per core");
    sy_cluster_free(c);
    CHECK_OK(sy_cluster_resolve("CPU", &c));
    if (c) CHECK(sy_cluster_device_count(c) == sy_cpu_count(), "cpu: one replica per core");
    sy_cluster_free(c);
    /* $SYSTOLIC_TPU, then local */
    setenv("SYSTOLIC_TPU", "cpu:3", 1);
    CHECK_OK(sy_cluster_resolve(NULL, &c));
    if (c) CHECK(sy_cluster_device_count(c) == 3, "from $SYSTOLIC_TPU");
    sy_cluster_free(c);
    setenv("SYSTOLIC_TPU", "bogus", 1);
    c = NULL;
    CHECK(sy_cluster_resolve("", &c) == SY_ERR_INVALID_ARGUMENT && !c, "a bad $SYSTOLIC_TPU is refused");
    CHECK(contains(sy_last_error(), "$SYSTOLIC_TPU"), "names the variable: %s", sy_last_error());
    unsetenv("SYSTOLIC_TPU");
    CHECK_OK(sy_cluster_resolve(NULL, &c));
    if (c) CHECK(sy_cluster_device_count(c) == sy_cpu_count(), "default: local");
    sy_cluster_free(c);
    const struct {
        const char *spec;
        sy_status st;
        const char *says;
    } bad[] = {
        {"cpu:0", SY_ERR_INVALID_ARGUMENT, "1 to 1024"},  {"cpu:-2", SY_ERR_INVALID_ARGUMENT, "1 to 1024"},
        {"cpu:x", SY_ERR_INVALID_ARGUMENT, "cpu:N"},      {"cpu:4096", SY_ERR_INVALID_ARGUMENT, "1 to 1024"},
        {"cpu:8x", SY_ERR_INVALID_ARGUMENT, "cpu:N"},     {"gpu:0", SY_ERR_UNSUPPORTED, "no GPU backend"},
        {"tpu", SY_ERR_UNSUPPORTED, "no TPU device"},     {"grpc://10.0.0.2:8470", SY_ERR_UNSUPPORTED, "cpu:8"},
        {"frobnicate", SY_ERR_INVALID_ARGUMENT, "known specs: local, cpu, cpu:N"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        c = NULL;
        sy_status st = sy_cluster_resolve(bad[i].spec, &c);
        CHECK(st == bad[i].st && !c, "%s: %s", bad[i].spec, sy_status_name(st));
        CHECK(contains(sy_last_error(), bad[i].spec) && contains(sy_last_error(), bad[i].says), "%s: '%s'",
              bad[i].spec, sy_last_error());
    }
}

/* ---- a model under a strategy ---------------------------------------------------------- */

typedef struct run_result {
    float w[4 * 32 + 32 + 32 * 3 + 3];
    double loss[6], acc[6];
    int epochs;
    int64_t batch_calls, last_step;
} run_result;

static sy_status count_batch(void *ctx, sy_model *m, int64_t step, const sy_logs *logs) {
    (void)m, (void)logs;
    run_result *r = ctx;
    r->batch_calls++;
    r->last_step = step;
    return SY_OK;
}

/* Train on a strategy of `replicas` replicas on `cores` cores. */
static run_result train(int32_t replicas, int32_t cores, bool dropout, int spe, int64_t batch) {
    run_result out;
    memset(&out, 0, sizeof out);
    sy_strategy *s;
    CHECK_OK(strategy_new(replicas, cores, &s));
    sy_model *m = make_mlp(s, 11, 32, dropout, spe);
    CHECK(model_replicas(m) == replicas, "the model runs %d replicas", model_replicas(m));
    sy_tensor *x, *y;
    make_data(960, &x, &y, 3);
    sy_callback cb = {&out, NULL, NULL, count_batch, NULL, NULL, NULL};
    sy_fit_options f = sy_fit_options_default();
    f.batch_size = batch;
    f.epochs = 5;
    f.steps_per_epoch = 7;
    f.verbose = 0;
    f.callbacks = &cb;
    f.n_callbacks = 1;
    sy_history *h = NULL;
    CHECK_OK(sy_model_fit(m, x, y, &f, &h));
    if (h) {
        out.epochs = sy_history_epochs(h);
        for (int e = 0; e < out.epochs && e < 6; e++) {
            out.loss[e] = sy_logs_get(sy_history_logs(h, e), "loss");
            out.acc[e] = sy_logs_get(sy_history_logs(h, e), "accuracy");
        }
        sy_history_free(h);
    }
    int32_t n = 0;
    for (int32_t i = 0; i < sy_model_weight_count(m); i++) {
        sy_shape s2 = sy_model_weight_shape(m, i);
        memcpy(out.w + n, sy_model_weight_data(m, i), (size_t)sy_shape_count(&s2) * sizeof(float));
        n += (int32_t)sy_shape_count(&s2);
    }
    sy_model_free(m);
    sy_strategy_free(s);
    sy_tensor_free(x);
    sy_tensor_free(y);
    return out;
}

static bool same_bits(const run_result *a, const run_result *b) {
    return memcmp(a->w, b->w, sizeof a->w) == 0 && memcmp(a->loss, b->loss, sizeof a->loss) == 0 &&
           memcmp(a->acc, b->acc, sizeof a->acc) == 0;
}

static void test_determinism(void) {
    /* the same seed and replica count: the same bits, run after run and on
     * any number of threads (replicas taking turns on 1 thread, one each on
     * 4, or 2 replicas with 3-thread kernel pools on 8 cores) */
    run_result a = train(4, 2, true, 1, 96), b = train(4, 2, true, 1, 96);
    CHECK(same_bits(&a, &b), "4 replicas, twice: bitwise identical");
    run_result c1 = train(4, 1, true, 1, 96), c4 = train(4, 4, true, 1, 96);
    CHECK(same_bits(&a, &c1) && same_bits(&a, &c4), "4 replicas on 1, 2 or 4 threads: bitwise identical");
    run_result d2 = train(2, 2, true, 1, 96), d8 = train(2, 8, true, 1, 96);
    CHECK(same_bits(&d2, &d8), "2 replicas, kernels on 1 or 4 threads each: bitwise identical");
    CHECK(a.loss[4] < a.loss[0], "it learns: %g -> %g", a.loss[0], a.loss[4]);
}

/* One global batch on 1 or 8 replicas: one trajectory, to float tolerance. */
static void test_replica_count_invariance(void) {
    run_result one = train(1, 2, false, 1, 96), eight = train(8, 2, false, 1, 96);
    for (int e = 0; e < 5; e++) {
        CHECK_CLOSE(eight.loss[e], one.loss[e], 1e-5, 1e-7, "epoch %d loss, 8 replicas vs 1", e);
        CHECK_CLOSE(eight.acc[e], one.acc[e], 0, 1e-9, "epoch %d accuracy, 8 replicas vs 1", e);
    }
    double worst = 0;
    for (size_t i = 0; i < sizeof one.w / sizeof one.w[0]; i++) worst = fmax(worst, fabs(one.w[i] - eight.w[i]));
    CHECK(worst < 1e-4, "weights after 35 steps: 8 replicas vs 1 differ by %g", worst);
}

/* steps_per_execution: the same bits; the host sees every n-th step. */
static void test_steps_per_execution(void) {
    run_result s1 = train(2, 2, true, 1, 96), s3 = train(2, 2, true, 3, 96), s10 = train(2, 2, true, 10, 96);
    CHECK(same_bits(&s1, &s3) && same_bits(&s1, &s10), "steps_per_execution 1, 3 and 10: bitwise identical");
    CHECK(s1.batch_calls == 5 * 7, "spe 1: a callback per step (%lld)", (long long)s1.batch_calls);
    CHECK(s3.batch_calls == 5 * 3 && s3.last_step == 6, "spe 3: callbacks after steps 2, 5, 6 (%lld, last %lld)",
          (long long)s3.batch_calls, (long long)s3.last_step);
    CHECK(s10.batch_calls == 5 && s10.last_step == 6, "spe 10: one callback per epoch (%lld)", (long long)s10.batch_calls);
}

static char warnings[4096];
static int n_warnings;
static void capture(void *ctx, sy_log_level level, const char *message) {
    (void)ctx;
    if (level < SY_LOG_WARNING) return;
    n_warnings++;
    strncat(warnings, message, sizeof warnings - strlen(warnings) - 1);
}

static void test_batches(void) {
    sy_strategy *s;
    CHECK_OK(strategy_new(3, 2, &s));
    sy_model *m = make_mlp(s, 11, 32, false, 1);
    sy_tensor *x, *y;
    make_data(203, &x, &y, 5);
    sy_fit_options f = sy_fit_options_default();
    f.verbose = 0;
    f.batch_size = 32;
    sy_status st = sy_model_fit(m, x, y, &f, NULL);
    CHECK(st == SY_ERR_INVALID_ARGUMENT && contains(sy_last_error(), "32") && contains(sy_last_error(), "3 replicas") &&
              contains(sy_last_error(), "30 or 33"),
          "an indivisible global batch is refused: %s", sy_last_error());
    /* fewer than 8 per replica: one warning, however many fits */
    sy_set_log(capture, NULL);
    f.batch_size = 12;
    f.steps_per_epoch = 2;
    CHECK_OK(sy_model_fit(m, x, y, &f, NULL));
    CHECK_OK(sy_model_fit(m, x, y, &f, NULL));
    sy_set_log(NULL, NULL);
    CHECK(n_warnings == 1 && contains(warnings, "4 samples per replica") && contains(warnings, "at least 24"),
          "one small-batch warning: %d, '%s'", n_warnings, warnings);
    /* evaluate and predict: any batch, every sample exactly once (203 = 7 * 29, batches of 10 are padded) */
    sy_evaluate_options eo = sy_evaluate_options_default();
    eo.verbose = 0;
    sy_logs a, b;
    eo.batch_size = 10; /* 4 per replica, 12 a step: 17 steps, the last has 11 real rows */
    CHECK_OK(sy_model_evaluate(m, x, y, &eo, &a));
    eo.batch_size = 203;
    CHECK_OK(sy_model_evaluate(m, x, y, &eo, &b));
    CHECK_CLOSE(sy_logs_get(&a, "loss"), sy_logs_get(&b, "loss"), 1e-5, 0, "evaluate loss, batch 10 vs 203");
    CHECK(sy_logs_get(&a, "accuracy") == sy_logs_get(&b, "accuracy"), "evaluate accuracy, batch 10 vs 203");
    sy_tensor *p = NULL;
    eo.batch_size = 10;
    CHECK_OK(sy_model_predict(m, x, &eo, &p));
    if (p) {
        const float *v = sy_tensor_data(p);
        const int32_t *labels = sy_tensor_data(y);
        double hits = 0;
        for (int i = 0; i < 203; i++) {
            int best = 0;
            for (int j = 1; j < 3; j++)
                if (v[i * 3 + j] > v[i * 3 + best]) best = j;
            hits += best == labels[i];
        }
        CHECK(fabs(hits / 203 - sy_logs_get(&b, "accuracy")) < 1e-12, "predict agrees with evaluate on every row");
        sy_tensor_free(p);
    }
    sy_model_free(m);
    sy_strategy_free(s);
    sy_tensor_free(x);
    sy_tensor_free(y);
}

/* ---- BatchNormalization under replicas ------------------------------------------------- */

/* Each replica normalises by its own shard's statistics, and the moving
 * statistics move towards the replicas' mean of them (Keras's ON_READ
 * variables with MEAN aggregation, as under TPUStrategy): one step of a
 * global batch of 8 on 2 replicas, BatchNormalization first so the shards'
 * statistics come straight from x. */
static void test_batch_normalization_replicas(void) {
    sy_strategy *s;
    CHECK_OK(strategy_new(2, 2, &s));
    sy_strategy_scope_enter(s);
    sy_model *m;
    CHECK_OK(sy_model_new(NULL, &m));
    sy_strategy_scope_exit(s);
    sy_layer bn = sy_layer_batch_normalization(), dense = sy_layer_dense(1);
    bn.input_shape = sy_shape_of(1, (int64_t)3);
    CHECK_OK(sy_model_add(m, &bn));
    CHECK_OK(sy_model_add(m, &dense));
    sy_compile_options c = sy_compile_options_default();
    c.optimizer = sy_optimizer_sgd(0.1f, 0, false);
    c.loss = "mse";
    CHECK_OK(sy_model_compile(m, &c));
    float *mm = sy_model_weight_data(m, sy_model_find_weight(m, "batch_normalization/moving_mean"));
    float *mv = sy_model_weight_data(m, sy_model_find_weight(m, "batch_normalization/moving_variance"));
    float mm0[3] = {0.1f, -0.2f, 0.3f}, mv0[3] = {1.2f, 0.8f, 1.0f};
    memcpy(mm, mm0, sizeof mm0);
    memcpy(mv, mv0, sizeof mv0);
    sy_tensor *x, *y;
    CHECK_OK(sy_tensor_new(SY_F32, sy_shape_of(2, (int64_t)8, (int64_t)3), &x));
    CHECK_OK(sy_tensor_new(SY_F32, sy_shape_of(2, (int64_t)8, (int64_t)1), &y));
    float *xd = sy_tensor_data(x), *yd = sy_tensor_data(y);
    for (int i = 0; i < 24; i++) xd[i] = (float)(sin(1.7 * i) * (1 + i / 12)); /* the second shard spreads twice as wide */
    for (int i = 0; i < 8; i++) yd[i] = (float)cos(i);
    sy_fit_options f = sy_fit_options_default();
    f.batch_size = 8;
    f.steps_per_epoch = 1;
    f.shuffle = false;
    f.verbose = 0;
    CHECK_OK(sy_model_fit(m, x, y, &f, NULL));
    for (int j = 0; j < 3; j++) {
        double mean_r[2] = {0, 0}, var_r[2] = {0, 0};
        for (int r = 0; r < 2; r++) {
            for (int i = 0; i < 4; i++) mean_r[r] += xd[(4 * r + i) * 3 + j] / 4.0;
            for (int i = 0; i < 4; i++) var_r[r] += pow(xd[(4 * r + i) * 3 + j] - mean_r[r], 2) / 4.0;
        }
        double decay = 1.0 - 0.99f;
        double want_mean = mm0[j] - (mm0[j] - (mean_r[0] + mean_r[1]) / 2) * decay;
        double want_var = mv0[j] - (mv0[j] - (var_r[0] + var_r[1]) / 2) * decay;
        CHECK_CLOSE(mm[j], want_mean, 1e-6, 1e-7, "moving_mean[%d] after a step on 2 replicas", j);
        CHECK_CLOSE(mv[j], want_var, 1e-6, 1e-7, "moving_variance[%d]: the replicas' mean of their shards' variances", j);
    }
    sy_model_free(m);
    sy_strategy_free(s);
    sy_tensor_free(x);
    sy_tensor_free(y);
}

/* ---- issue 16, sim devices: emulated TPU slices ------------------------------------------ */

static void test_sim_devices(void) {
    static const struct {
        const char *spec, *as;
        int32_t replicas;
        const char *chip, *last_name;
    } good[] = {
        {"sim:v2-8", "sim:v2-8", 8, "v2", "/job:worker/replica:0/task:0/device:TPU:7"},
        {"SIM:V3-8", "sim:v3-8", 8, "v3", "/job:worker/replica:0/task:0/device:TPU:7"},
        {"sim:v3-32", "sim:v3-32", 32, "v3", "/job:worker/replica:0/task:3/device:TPU:7"},
        {"sim:v2-512", "sim:v2-512", 512, "v2", "/job:worker/replica:0/task:63/device:TPU:7"},
        {"sim:v3-2048", "sim:v3-2048", 2048, "v3", "/job:worker/replica:0/task:255/device:TPU:7"},
        /* v4's two cores are one device (megacore): a replica per chip, four chips a host */
        {"sim:v4-8", "sim:v4-8", 4, "v4", "/job:worker/replica:0/task:0/device:TPU:3"},
        {"sim:v4-32", "sim:v4-32", 16, "v4", "/job:worker/replica:0/task:3/device:TPU:3"},
        {"sim:v4-96", "sim:v4-96", 48, "v4", "/job:worker/replica:0/task:11/device:TPU:3"},     /* 3x4x4 */
        {"sim:v4-8192", "sim:v4-8192", 4096, "v4", "/job:worker/replica:0/task:1023/device:TPU:3"}, /* the pod */
    };
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        sy_cluster *c = NULL;
        CHECK_OK(sy_cluster_resolve(good[i].spec, &c));
        if (!c) continue;
        int32_t n = sy_cluster_device_count(c);
        const sy_device *first = sy_cluster_device(c, 0), *last = sy_cluster_device(c, n - 1);
        CHECK(n == good[i].replicas && !strcmp(sy_cluster_spec(c), good[i].as), "%s: %d replicas as '%s'", good[i].spec,
              n, sy_cluster_spec(c));
        CHECK(first->kind == SY_DEVICE_SIM && last->kind == SY_DEVICE_SIM && first->chip && first->chip == last->chip &&
                  !strcmp(first->chip->name, good[i].chip) && last->replica == n - 1,
              "%s: sim devices of chip %s", good[i].spec, good[i].chip);
        CHECK(!strcmp(first->name, "/job:worker/replica:0/task:0/device:TPU:0") && !strcmp(last->name, good[i].last_name),
              "%s: named '%s' .. '%s'", good[i].spec, first->name, last->name);
        sy_cluster_free(c);
    }
    static const struct {
        const char *spec, *says;
    } bad[] = {
        {"sim:v3-7", "a TPU v3 slice has no '7' TensorCores; the v3 slices have (cores): 8, 32, 64, 128, 256, 512, 1024, 2048"},
        {"sim:v2-64", "the v2 slices have (cores): 8, 32, 128, 256, 512"},
        {"sim:v3-4096", "a TPU v3 slice has no '4096'"},
        {"sim:v4-6", "a TPU v4 slice has no '6'"},  /* 3 chips: less than a host's 2x2x1 */
        {"sim:v4-10", "a TPU v4 slice has no '10'"}, /* 5 chips: no side of 5 */
        {"sim:v4-9", "a TPU v4 slice has no '9'"},   /* half a chip */
        {"sim:v4-16384", "2x2x1"},
        {"sim:v3-0", "no '0'"},
        {"sim:v3-8x", "no '8x'"},
        {"sim:v3-", "no ''"},
        {"sim:v3-99999999999", "no '99999999999'"},
        {"sim:v5-8", "unknown TPU chip 'v5'; the emulated chips are: v2, v3, v4"},
        {"sim:v3", "e.g. sim:v2-8 or sim:v3-32; chips: v2, v3, v4"},
        {"sim:-8", "sim:CHIP-CORES"},
        {"sim:", "sim:CHIP-CORES"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        sy_cluster *c = NULL;
        sy_status st = sy_cluster_resolve(bad[i].spec, &c);
        CHECK(st == SY_ERR_INVALID_ARGUMENT && !c, "%s: %s", bad[i].spec, sy_status_name(st));
        CHECK(contains(sy_last_error(), bad[i].spec) && contains(sy_last_error(), bad[i].says), "%s: '%s'", bad[i].spec,
              sy_last_error());
        sy_cluster_free(c);
    }

    /* a strategy over a slice: its chip, and plans for the sim backend */
    sy_cluster *c = NULL;
    sy_strategy *s = NULL;
    CHECK_OK(sy_cluster_resolve("sim:v2-8", &c));
    if (c) CHECK_OK(sy_strategy_new(c, &s));
    sy_cluster_free(c);
    if (!s) return;
    CHECK(sy_strategy_num_replicas_in_sync(s) == 8 && sy_strategy_chip(s) && !strcmp(sy_strategy_chip(s)->name, "v2"),
          "sim:v2-8: 8 replicas of a TPU v2 core");
    /* (B, 256) @ (256, 256): per replica, B = 4096 fits a core's 8 GiB; B = 2^23 needs 8 GiB for x alone */
    for (int big = 0; big < 2; big++) {
        int64_t b = big ? (int64_t)1 << 23 : 4096;
        sy_graph *g = NULL;
        CHECK_OK(sy_graph_new(&g));
        if (!g) break;
        sy_node x = sy_graph_input(g, "x", SY_F32, sy_shape_of(2, b, (int64_t)256));
        sy_node w = sy_graph_param(g, "w", SY_F32, sy_shape_of(2, (int64_t)256, (int64_t)256), sy_init_glorot_uniform(1));
        sy_node loss = sy_graph_reduce_mean(g, sy_graph_matmul(g, x, w, false, false), NULL, 0, false);
        CHECK_OK(sy_graph_status(g));
        sy_plan_options o = sy_plan_options_default();
        o.loss = loss;
        o.optimizer = sy_optimizer_adam(1e-3f);
        replica_set *r = NULL;
        sy_status st = replicas_compile(s, g, &o, &r);
        if (!big) {
            CHECK(st == SY_OK && r, "a plan that fits a TPU v2 core: %s", st ? sy_last_error() : "");
            if (r) {
                sy_plan_info info;
                sy_plan_get_info(r->plans[7], &info);
                CHECK(!strcmp(info.backend, "sim"), "the replicas of a sim device run the sim backend, not '%s'", info.backend);
            }
        } else {
            CHECK(st == SY_ERR_OUT_OF_MEMORY && !r && contains(sy_last_error(), "at batch size 8388608 (per replica)") &&
                      contains(sy_last_error(), "does not fit in a TPU v2 core's HBM (8.0 GiB)") &&
                      contains(sy_last_error(), "weights 256.0 KiB, optimizer slots 512.0 KiB, gradients 256.0 KiB, activations "),
                  "a plan past a TPU v2 core's HBM is refused, naming the sizes: %s: %s", sy_status_name(st), sy_last_error());
        }
        replicas_free(r);
        sy_graph_free(g);
    }
    sy_strategy_free(s);
    /* on the CPU: no chip, the cpu backend, no HBM limit */
    CHECK_OK(sy_cluster_resolve("cpu:2", &c));
    if (c) {
        CHECK_OK(sy_strategy_new(c, &s));
        CHECK(s && !sy_strategy_chip(s) && sy_cluster_device(c, 0)->kind == SY_DEVICE_CPU && !sy_cluster_device(c, 0)->chip,
              "cpu:2 has no chip");
        sy_strategy_free(s);
        sy_cluster_free(c);
    }
}

int main(void) {
    test_resolver();
    test_determinism();
    test_replica_count_invariance();
    test_steps_per_execution();
    test_batches();
    test_batch_normalization_replicas();
    test_sim_devices(); /* issue 16 */
    return check_report("test_distribute");
}
