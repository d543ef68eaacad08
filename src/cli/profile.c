/*
 * profile.c - `systolic profile MODEL`: what one training step of MODEL
 * costs on an emulated TPU (issue 16), op by op.
 *
 * The chip and the replica count come from --tpu sim:v2-8 (the resolver's
 * sim devices, each pointing at its chip), or from --chip v2|v3|v4 and
 * --replicas N. The model is built and compiled as `train` builds it, but
 * under a one-replica strategy at the per-replica batch (--batch-size /
 * replicas), so that one plan is compiled whatever the replica count; the
 * library's cost pass (compiler/cost.c) then places each step on the chip.
 * The table lists per op its layer, FLOPs, bytes moved, the cycles of the
 * MXU, the vector unit and HBM, the MXU's utilisation, what bounds it and
 * its share of the step; then the infeed, the all-reduce, the host round
 * trip, the step time and samples/s. --json prints the same as one JSON
 * object. --dtype-policy mixed_bfloat16 builds every layer under Keras's
 * mixed-precision policy (as `train` does), and the cost pass then counts
 * the values Keras computes in bfloat16 at 2 bytes. --trace FILE.json writes the step as a Chrome
 * trace-event file and --roofline FILE.svg a roofline plot of its ops (profile_files.c).
 */
#include "cli_internal.h"

#include <string.h>
#include <strings.h>

typedef struct profile_opts {
    const char *tpu, *chip, *dtype_policy;
    const char *trace, *roofline; /* issue 16, trace and roofline */
    int64_t replicas, batch_size, steps_per_execution, seed;
    bool json, predict;
} profile_opts;

enum {
    P_TPU,
    P_CHIP,
    P_REPLICAS,
    P_BATCH,
    P_SPE,
    P_SEED,
    P_PREDICT,
    P_JSON,
    P_POLICY,
    P_TRACE,
    P_ROOFLINE,
    P_N
};

/* issue 20: how the replicas all-reduce, in words: "ring of 8" (rank 0 or 1: a host's ring, or
 * replicas that make no slice), "32x32 chips, 2-D torus", "4x4 chips, 2-D mesh", "16x32 chips,
 * 2-D mesh, wrapped along the 32". */
void cli_topology_words(char *buf, size_t size, const sy_tpu_topology *t, int32_t replicas) {
    if (t->rank <= 1) {
        snprintf(buf, size, "ring of %d", replicas);
        return;
    }
    int n = 0, wrapped = 0;
    for (int d = 0; d < t->rank; d++) {
        n += snprintf(buf + n, size - (size_t)n, "%s%d", d ? "x" : "", t->chips[d]);
        wrapped += t->wrap[d];
    }
    n += snprintf(buf + n, size - (size_t)n, " chips, %d-D %s", t->rank,
                  wrapped == t->rank ? "torus" : "mesh");
    for (int d = 0, k = 0; wrapped < t->rank && d < t->rank; d++)
        if (t->wrap[d])
            n += snprintf(buf + n, size - (size_t)n, "%s%d", k++ ? " and the " : ", wrapped along the ",
                          t->chips[d]);
}

static void print_json(FILE *out, const char *model, const sy_profile *p) {
    fprintf(out, "{\"model\": ");
    cli_json_string(out, model);
    fprintf(out,
            ", \"chip\": \"%s\", \"replicas\": %d, \"batch_per_replica\": %lld, "
            "\"steps_per_execution\": %d, \"bf16_ops\": %d,\n",
            p->chip->name, p->replicas, (long long)p->batch, p->steps_per_execution, p->bf16_ops);
    /* issue 20: the slice's topology: chips along each dimension and which wrap ([] for a ring of
     * replicas that is no slice) */
    fprintf(out, " \"topology\": {\"chips\": [");
    for (int d = 0; d < p->topology.rank; d++)
        fprintf(out, "%s%d", d ? ", " : "", p->topology.chips[d]);
    fprintf(out, "], \"wrap\": [");
    for (int d = 0; d < p->topology.rank; d++)
        fprintf(out, "%s%s", d ? ", " : "", p->topology.wrap[d] ? "true" : "false");
    fprintf(out, "]},\n \"ops\": [\n");
    for (int32_t i = 0; i < p->n_ops; i++) {
        const sy_profile_op *o = &p->ops[i];
        fprintf(out, "  {\"op\": \"%s\", \"name\": ", o->op);
        cli_json_string(out, o->name);
        fprintf(out, ", \"layer\": ");
        cli_json_string(out, o->layer);
        fprintf(
            out,
            ", \"flops\": %.17g, \"mxu_flops\": %.17g, \"bytes\": %.17g, \"mxu_cycles\": %.17g, "
            "\"vector_cycles\": %.17g, \"memory_cycles\": %.17g, \"mxu_utilization\": %.6g, "
            "\"bound\": \"%s\", "
            "\"seconds\": %.9g, \"share\": %.6g, \"dtype\": \"%s\"}%s\n",
            o->flops, o->mxu_flops, o->bytes, o->mxu_cycles, o->vector_cycles, o->memory_cycles,
            o->mxu_utilization, sy_bound_name(o->bound), o->seconds, o->share,
            o->bf16 ? "bfloat16" : "float32", i + 1 < p->n_ops ? "," : "");
    }
    fprintf(out,
            " ],\n \"flops\": %.17g, \"bytes\": %.17g, \"compute_seconds\": %.9g, "
            "\"infeed_bytes\": %.17g, "
            "\"infeed_seconds\": %.9g, \"infeed_stall_seconds\": %.9g, \"gradient_bytes\": %.17g, "
            "\"allreduce_seconds\": %.9g, \"host_seconds\": %.9g, \"step_seconds\": %.9g, "
            "\"samples_per_second\": "
            "%.9g, \"bound\": \"%s\"}\n",
            p->flops, p->bytes, p->compute_s, p->infeed_bytes, p->infeed_s, p->infeed_stall_s,
            p->gradient_bytes, p->allreduce_s, p->host_s, p->step_s, p->samples_per_s,
            sy_bound_name(p->bound));
}

static void print_table(FILE *out, const char *model, const sy_profile *p) {
    fprintf(out,
            "%s on TPU %s: %d replica%s, batch %lld per replica (%lld global), steps_per_execution "
            "%d, %d of %d ops write bfloat16\n",
            model, p->chip->name, p->replicas, p->replicas == 1 ? "" : "s", (long long)p->batch,
            (long long)p->batch * p->replicas, p->steps_per_execution, p->bf16_ops, p->n_ops);
    fprintf(out, "%-24s %-22s %-4s %10s %10s %11s %11s %11s %6s %-7s %6s\n", "layer", "op", "out",
            "MFLOP", "MB", "MXU cycles", "vec cycles", "mem cycles", "MXU %", "bound", "share");
    for (int32_t i = 0; i < p->n_ops; i++) {
        const sy_profile_op *o = &p->ops[i];
        fprintf(out,
                "%-24.24s %-22.22s %-4s %10.3f %10.3f %11.0f %11.0f %11.0f %6.1f %-7s %5.1f%%\n",
                *o->layer ? o->layer : "-", o->op, o->bf16 ? "bf16" : "f32", o->flops / 1e6,
                o->bytes / 1e6, o->mxu_cycles, o->vector_cycles, o->memory_cycles,
                100 * o->mxu_utilization, sy_bound_name(o->bound), 100 * o->share);
    }
    double step = p->step_s > 0 ? p->step_s : 1;
    fprintf(out, "ops:             %10.3f us  %5.1f%%  (%.3f GFLOP, %.3f MB per replica)\n",
            1e6 * p->compute_s, 100 * p->compute_s / step, p->flops / 1e9, p->bytes / 1e6);
    fprintf(out,
            "infeed:          %10.3f us  %5.1f%%  (%.3f MB per replica, %.3f us overlapped with "
            "the step)\n",
            1e6 * p->infeed_stall_s, 100 * p->infeed_stall_s / step, p->infeed_bytes / 1e6,
            1e6 * (p->infeed_s - p->infeed_stall_s));
    char topology[128];
    cli_topology_words(topology, sizeof topology, &p->topology, p->replicas);
    fprintf(out, "all-reduce:      %10.3f us  %5.1f%%  (%.3f MB of gradients, %s)\n",
            1e6 * p->allreduce_s, 100 * p->allreduce_s / step, p->gradient_bytes / 1e6, topology);
    fprintf(out, "host round trip: %10.3f us  %5.1f%%  (one per %d step%s)\n", 1e6 * p->host_s,
            100 * p->host_s / step, p->steps_per_execution, p->steps_per_execution == 1 ? "" : "s");
    fprintf(out, "step: %.3f ms, %.0f samples/s, bound by %s\n", 1e3 * p->step_s, p->samples_per_s,
            sy_bound_name(p->bound));
}

static void usage(FILE *out, const flag *f) {
    fprintf(out, "usage: systolic profile MODEL [flags]\n\n"
                 "What one training step of MODEL (built-in, MODEL.json or MODEL.h5) costs on an "
                 "emulated TPU, op by "
                 "op: FLOPs, bytes moved, MXU, vector-unit and memory cycles, MXU utilisation, "
                 "what bounds each op "
                 "and its share of the step; then infeed, the gradients' all-reduce, the host "
                 "round trip, the step "
                 "time and samples/s (docs/design/tpu-cost-model.md). --trace writes the step as a "
                 "timeline for https://ui.perfetto.dev, --roofline a roofline plot of its ops (SVG)."
                 "\n\nflags:\n");
    flags_help(out, f, P_N);
    fprintf(out, "\nbuilt-in models:");
    for (int i = 0; i < builtin_count(); i++) fprintf(out, " %s", builtin_at(i)->name);
    fprintf(out, "\nchips:");
    for (int i = 0; i < sy_tpu_chip_count(); i++) fprintf(out, " %s", sy_tpu_chip_at(i)->name);
    fprintf(out, "\n");
}

/* The chip and the replicas: --tpu's sim devices, else --chip and --replicas. Returns -1 to go on.
 */
static int find_chip(const profile_opts *o, const flag *f, const sy_tpu_chip **chip,
                     int32_t *replicas) {
    if (o->tpu && (o->chip || f[P_REPLICAS].set)) {
        fprintf(stderr, "systolic profile: --tpu names the chip and the replicas; give it, or "
                        "--chip and --replicas\n");
        return 2;
    }
    if (o->tpu) {
        sy_cluster *c;
        if (sy_cluster_resolve(o->tpu, &c)) return flag_refused("profile", "--tpu");
        const sy_device *d = sy_cluster_device(c, 0);
        *chip = d ? d->chip : NULL;
        *replicas = sy_cluster_device_count(c);
        sy_cluster_free(c);
        if (!*chip) {
            fprintf(stderr,
                    "systolic profile: --tpu %s: its devices are not an emulated TPU's cores; give "
                    "a sim "
                    "spec (sim:v2-8) or --chip v2|v3|v4\n",
                    o->tpu);
            return 2;
        }
        return -1;
    }
    const char *name = o->chip ? o->chip : "v2";
    *chip = sy_tpu_chip_find(name);
    if (!*chip) {
        fprintf(stderr, "systolic profile: --chip: unknown chip '%s'; chips:", name);
        for (int i = 0; i < sy_tpu_chip_count(); i++)
            fprintf(stderr, " %s", sy_tpu_chip_at(i)->name);
        fprintf(stderr, "\n");
        return 2;
    }
    *replicas =
        f[P_REPLICAS].set ? (int32_t)o->replicas : (*chip)->replicas * 4; /* a -8 slice: 4 chips */
    return -1;
}

/* issue 16, trace and roofline: --trace FILE.json and --roofline FILE.svg,
 * refused before anything is computed when they cannot be written. Returns
 * -1 to go on. */
static int check_outputs(const profile_opts *o) {
    const char *flags[2] = {"--trace", "--roofline"}, *paths[2] = {o->trace, o->roofline};
    const char *suffix[2] = {".json", ".svg"}, *what[2] = {"a Chrome trace-event file", "an SVG image"};
    for (int i = 0; i < 2; i++) {
        if (!paths[i]) continue;
        size_t n = strlen(paths[i]), k = strlen(suffix[i]);
        if (n <= k || strcmp(paths[i] + n - k, suffix[i])) {
            fprintf(stderr, "systolic profile: %s FILE must end in %s (%s), got '%s'\n", flags[i], suffix[i],
                    what[i], paths[i]);
            return 2;
        }
        if (profile_check_output(paths[i])) {
            fprintf(stderr, "systolic profile: %s: %s\n", flags[i], sy_last_error());
            return 1;
        }
    }
    return -1;
}

/* Write what --trace and --roofline ask for; the notes go where the table
 * goes, or to stderr beside --json's output. */
static int write_outputs(const profile_opts *o, const char *model, const sy_profile *p) {
    FILE *note = o->json ? stderr : stdout;
    if (o->trace) {
        if (profile_write_trace(o->trace, model, !o->predict, p)) {
            fprintf(stderr, "systolic profile: --trace: %s\n", sy_last_error());
            return 1;
        }
        fprintf(note, "trace: %s (open it in https://ui.perfetto.dev)\n", o->trace);
    }
    if (o->roofline) {
        if (profile_write_roofline(o->roofline, model, !o->predict, p)) {
            fprintf(stderr, "systolic profile: --roofline: %s\n", sy_last_error());
            return 1;
        }
        fprintf(note, "roofline: %s\n", o->roofline);
    }
    return 0;
}

/* Build MODEL under a one-replica strategy, under --dtype-policy if given, and compile it as
 * `train` does. */
static int build(const char *name, const builtin_model *b, file_model *fm, uint64_t seed,
                 const char *policy, sy_strategy **s, sy_model **m) {
    sy_cluster *c;
    sy_status st = sy_cluster_resolve("cpu:1", &c);
    if (!st) {
        st = sy_strategy_new(c, s);
        sy_cluster_free(c);
    }
    if (!st) {
        sy_strategy_scope_enter(*s);
        st = fm ? file_model_load(fm, seed, m) : b->build(seed, m);
        if (!st && policy) st = sy_model_set_dtype_policy(*m, policy);
        sy_strategy_scope_exit(*s);
    }
    sy_compile_options co = sy_compile_options_default();
    /* the plans an emulated chip's replicas run (distribute/replicas.c), whose step as the TPU runs it
     * (without the host kernels' conv -> pool fusion) `train --tpu sim:...` times */
    co.backend = "sim";
    if (!st) st = sy_optimizer_from_name(b->optimizer, &co.optimizer);
    if (!st) {
        co.optimizer.learning_rate = b->learning_rate;
        co.loss = b->loss;
        co.from_logits = b->from_logits;
        co.metrics = b->metrics;
        co.n_metrics = b->n_metrics;
        st = sy_model_compile(*m, &co);
    }
    if (st) {
        fprintf(stderr, "systolic profile: %s: %s\n", name, sy_last_error());
        return 1;
    }
    return -1;
}

int cmd_profile(int argc, char **argv) {
    /* issue 18: the TPU v1 runs programs, not training steps (tpu1.c) */
    for (int i = 0; i < argc; i++)
        if ((!strcmp(argv[i], "--tpu") && i + 1 < argc && !strcasecmp(argv[i + 1], "sim:v1")) ||
            !strcasecmp(argv[i], "--tpu=sim:v1"))
            return cmd_profile_tpu1(argc, argv);
    profile_opts o = {.steps_per_execution = 1};
    flag f[P_N];
    f[P_TPU] = (flag){
        "--tpu",     FLAG_STRING, &o.tpu, "SPEC",
        "the emulated TPU: sim:v2-8, sim:v3-8, ...; sim:v1 runs an int8 model on the TPU v1 (--tpu sim:v1 --help)",
        .set = false};
    f[P_CHIP] = (flag){"--chip",
                       FLAG_STRING,
                       &o.chip,
                       "NAME",
                       "without --tpu: the chip, v2, v3 or v4 (default v2)",
                       .set = false};
    f[P_REPLICAS] =
        (flag){"--replicas",
               FLAG_INT,
               &o.replicas,
               "N",
               "without --tpu: the replicas (default a -8 slice's: 8 on v2 and v3, 4 on v4)",
               .set = false,
               .min = 1,
               .max = 65536};
    f[P_BATCH] = (flag){"--batch-size",
                        FLAG_INT,
                        &o.batch_size,
                        "N",
                        "global batch size, split among the replicas (default the model's)",
                        .set = false,
                        .min = 1,
                        .max = INT32_MAX};
    f[P_SPE] = (flag){"--steps-per-execution",
                      FLAG_INT,
                      &o.steps_per_execution,
                      "N",
                      "steps per host round trip (default 1)",
                      .set = false,
                      .min = 1,
                      .max = INT32_MAX};
    f[P_SEED] = (flag){
        "--seed",     FLAG_INT, &o.seed,         "N", "seed of the initial weights (default 0)",
        .set = false, .min = 0, .max = INT64_MAX};
    f[P_PREDICT] =
        (flag){"--predict", FLAG_BOOL, &o.predict, "", "a predict step instead of a training step",
               .set = false};
    f[P_JSON] = (flag){"--json", FLAG_BOOL, &o.json, "", "print the profile as JSON", .set = false};
    /* issue 16, trace and roofline */
    f[P_TRACE] = (flag){"--trace", FLAG_STRING, &o.trace, "FILE.json",
                        "also write the step as a Chrome trace-event file (ops per core on a timeline, then the "
                        "all-reduce and the host round trip; open it in https://ui.perfetto.dev)",
                        .set = false};
    f[P_ROOFLINE] = (flag){"--roofline", FLAG_STRING, &o.roofline, "FILE.svg",
                           "also write a roofline plot of the step's ops on the chip (SVG)", .set = false};
    /* issue 16, cost validation: the model's precision, hence each value's bytes in HBM */
    f[P_POLICY] =
        (flag){"--dtype-policy",
               FLAG_STRING,
               &o.dtype_policy,
               "NAME",
               "Keras's dtype policy for every layer, as train's: float32 or mixed_bfloat16 "
               "(bfloat16 activations where Keras computes in bfloat16; default the model's)",
               .set = false};
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout, f);
            return 0;
        }
    const char *pos[1];
    int n_pos;
    int rc = flags_parse(argc, argv, f, P_N, pos, 1, &n_pos, "profile");
    if (rc) return rc;
    if (n_pos == 0) {
        fprintf(stderr, "systolic profile: which model? (see systolic profile --help)\n");
        return 2;
    }
    sy_dtype_policy policy;
    if (o.dtype_policy && sy_dtype_policy_from_name(o.dtype_policy, NULL, &policy))
        return flag_refused("profile", "--dtype-policy");
    const sy_tpu_chip *chip = NULL;
    int32_t replicas = 1;
    if ((rc = find_chip(&o, f, &chip, &replicas)) >= 0) return rc;
    if ((rc = check_outputs(&o)) >= 0) return rc;

    file_model fm;
    const builtin_model *b = builtin_find(pos[0]);
    if (!b && model_file_kind_of(pos[0]) != MODEL_FILE_NONE) {
        if ((rc = file_model_init(&fm, "profile", pos[0], NULL, NULL, NULL)) >= 0) return rc;
        b = &fm.b;
    }
    if (!b) {
        fprintf(stderr, "systolic profile: unknown model '%s' (see systolic profile --help)\n",
                pos[0]);
        return 2;
    }
    int64_t global = f[P_BATCH].set ? o.batch_size : b->batch_size;
    if (global % replicas) {
        fprintf(stderr,
                "systolic profile: --batch-size %lld does not split evenly among %d replicas\n",
                (long long)global, replicas);
        return 2;
    }
    sy_strategy *s = NULL;
    sy_model *m = NULL;
    sy_profile *p = NULL;
    rc = build(pos[0], b, b == &fm.b ? &fm : NULL, (uint64_t)o.seed, o.dtype_policy, &s, &m);
    if (rc < 0) {
        sy_profile_options po = sy_profile_options_default();
        po.replicas = replicas;
        po.steps_per_execution = (int32_t)o.steps_per_execution;
        if (sy_model_profile(m, chip, global / replicas, !o.predict, &po, &p)) {
            fprintf(stderr, "systolic profile: %s: %s\n", pos[0], sy_last_error());
            rc = 1;
        } else {
            if (o.json)
                print_json(stdout, pos[0], p);
            else
                print_table(stdout, pos[0], p);
            rc = write_outputs(&o, pos[0], p);
        }
    }
    sy_profile_free(p);
    sy_model_free(m);
    sy_strategy_free(s);
    return rc;
}
