/*
 * profile_files.c - `systolic profile --trace FILE.json --roofline FILE.svg`:
 * one step of the emulated TPU's cost model (compiler/cost.c's sy_profile)
 * as something to look at (issue 16, point 5).
 *
 * The trace is Chrome's Trace Event Format (the JSON object form:
 * {"traceEvents": [...], "displayTimeUnit": "ns", "otherData": {...}}),
 * which https://ui.perfetto.dev and chrome://tracing open. Processes are
 * the chips of the slice plus the host; a chip's threads are its replicas'
 * cores, its infeed (PCIe) and its interconnect (ICI). Every replica runs
 * the same plan on its own shard at the same time, so each core's track
 * holds one complete event ("ph": "X") per op of the plan, back to back in
 * schedule order, named layer/op, with the op's FLOPs, bytes, cycles and
 * bound in its args (and the bound as its category, to filter by). Then
 * the gradients' all-reduce on every chip's ICI track, then the host round
 * trip on the host's. An infeed stall, when the model finds one, opens the
 * step; the next batch's infeed runs beside the ops. Timestamps are whole
 * nanoseconds written as microseconds with three decimals, each event's
 * start and end rounded from the running sum, so that events on one track
 * never overlap (Perfetto requires events on a track to nest).
 *
 * The roofline is a plain SVG: log-log axes of arithmetic intensity
 * (FLOP/byte) against attainable FLOP/s for one replica, the HBM bandwidth
 * diagonal rising to two roofs -- the MXUs' bfloat16 peak and the vector
 * unit's -- and each op a dot at (its FLOPs / its HBM bytes, its FLOPs /
 * its time), coloured by what bounds it, its area proportional to its
 * share of the step. Ops with no FLOPs or no HBM traffic (kept on chip by
 * fusion) have no place on these axes; the legend counts them.
 *
 * Both files are built in memory (open_memstream) and written with the io
 * module's atomic writer: a failure leaves nothing behind.
 */
#include "cli_internal.h"
#include "io/io_internal.h" /* io_write_file_atomic */

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cli_json_string(FILE *out, const char *s) {
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', out);
        if ((unsigned char)*s < 0x20)
            fprintf(out, "\\u%04x", (unsigned char)*s);
        else
            fputc(*s, out);
    }
    fputc('"', out);
}

/* Text for XML: &, <, > and quotes escaped; control characters XML 1.0 forbids dropped. */
static void xml_text(FILE *out, const char *s) {
    for (; *s; s++) {
        const char *e = *s == '&'   ? "&amp;"
                        : *s == '<' ? "&lt;"
                        : *s == '>' ? "&gt;"
                        : *s == '"' ? "&quot;"
                                    : NULL;
        if (e)
            fputs(e, out);
        else if ((unsigned char)*s >= 0x20 || *s == '\n' || *s == '\t')
            fputc(*s, out);
    }
}

/* Write what `fill` prints to path, whole or not at all. */
static sy_status write_whole(const char *path, void (*fill)(FILE *, const void *),
                             const void *ctx) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return sy_error(SY_ERR_OUT_OF_MEMORY, "cannot write '%s': out of memory", path);
    fill(f, ctx);
    bool failed = ferror(f) != 0;
    if (fclose(f) != 0) failed = true;
    sy_status st =
        failed ? sy_error(SY_ERR_OUT_OF_MEMORY, "cannot write '%s': out of memory", path) : SY_OK;
    if (!st) {
        const void *bufs[1] = {buf};
        size_t sizes[1] = {len};
        st = io_write_file_atomic(path, bufs, sizes, 1);
    }
    free(buf);
    return st;
}

sy_status profile_check_output(const char *path) {
    char target[4096], dir[4096];
    int mode;
    sy_status st = io_write_target(path, target, sizeof target, &mode);
    if (st) return st;
    const char *slash = strrchr(target, '/');
    if (!*(slash ? slash + 1 : target))
        return sy_error(SY_ERR_IO, "cannot write '%s': it names a directory, not a file", path);
    if (!slash)
        snprintf(dir, sizeof dir, ".");
    else
        snprintf(dir, sizeof dir, "%.*s", slash == target ? 1 : (int)(slash - target), target);
    if (access(dir, W_OK | X_OK) != 0)
        return sy_error(SY_ERR_IO, "cannot write '%s': the directory '%s' %s (nothing was written)",
                        path, dir, errno == ENOENT ? "does not exist" : strerror(errno));
    return SY_OK;
}

/* "v2-8": the slice the replicas make, named by its TensorCores. */
static void slice_name(const sy_profile *p, char *buf, size_t size) {
    const sy_tpu_chip *c = p->chip;
    int64_t cores = (int64_t)p->replicas * c->cores / (c->replicas > 0 ? c->replicas : 1);
    snprintf(buf, size, "%s-%lld", c->name, (long long)cores);
}

/* ---- the trace ------------------------------------------------------------- */

typedef struct trace_ctx {
    const char *model, *what; /* "training step" or "predict step" */
    const sy_profile *p;
} trace_ctx;

enum { TID_CORE = 1, TID_INFEED = 1000, TID_ICI = 1001, TID_STEP = 1, TID_HOST = 2 };

static long long to_ns(double seconds) {
    return llround(seconds * 1e9);
}

/* A complete event from ns to end_ns; args (a JSON object's members, or
 * NULL) are printed by the caller after this returns, then close_event. */
static void open_event(FILE *f, bool *first, const char *name, const char *cat, int pid, int tid,
                       long long ns, long long end_ns) {
    fprintf(f, "%s\n{\"ph\": \"X\", \"name\": ", *first ? "" : ",");
    *first = false;
    cli_json_string(f, name);
    fprintf(f,
            ", \"cat\": \"%s\", \"pid\": %d, \"tid\": %d, \"ts\": %lld.%03lld, \"dur\": "
            "%lld.%03lld, \"args\": {",
            cat, pid, tid, ns / 1000, ns % 1000, (end_ns - ns) / 1000, (end_ns - ns) % 1000);
}

static void metadata(FILE *f, bool *first, const char *what, int pid, int tid, const char *name,
                     int sort) {
    fprintf(f,
            "%s\n{\"ph\": \"M\", \"name\": \"%s_name\", \"pid\": %d, \"tid\": %d, \"args\": "
            "{\"name\": ",
            *first ? "" : ",", what, pid, tid);
    *first = false;
    cli_json_string(f, name);
    fprintf(f,
            "}},\n{\"ph\": \"M\", \"name\": \"%s_sort_index\", \"pid\": %d, \"tid\": %d, \"args\": "
            "{\"sort_index\": %d}}",
            what, pid, tid, sort);
}

static void fill_trace(FILE *f, const void *arg) {
    const trace_ctx *t = arg;
    const sy_profile *p = t->p;
    const sy_tpu_chip *c = p->chip;
    int per_chip = c->replicas > 0 ? c->replicas : 1;
    int chips = (p->replicas + per_chip - 1) / per_chip;
    int cores_per_replica = c->cores / per_chip > 0 ? c->cores / per_chip : 1;
    int host = chips + 1; /* chip i is process i + 1 */
    char slice[64], name[256];
    slice_name(p, slice, sizeof slice);
    bool first = true;
    fprintf(f, "{\"displayTimeUnit\": \"ns\",\n\"otherData\": {\"generator\": \"systolic "
               "profile\", \"model\": ");
    cli_json_string(f, t->model);
    fprintf(f,
            ", \"step\": \"%s\", \"chip\": \"%s\", \"slice\": \"%s\", \"replicas\": %d, "
            "\"batch_per_replica\": %lld, \"steps_per_execution\": %d, \"step_seconds\": %.9g, "
            "\"samples_per_second\": %.9g, \"bound\": \"%s\"},\n\"traceEvents\": [",
            t->what, c->name, slice, p->replicas, (long long)p->batch, p->steps_per_execution,
            p->step_s, p->samples_per_s, sy_bound_name(p->bound));

    snprintf(name, sizeof name, "host (%s)", t->model);
    metadata(f, &first, "process", host, 0, name, 0);
    metadata(f, &first, "thread", host, TID_STEP, "step", 0);
    metadata(f, &first, "thread", host, TID_HOST, "host round trip", 1);
    for (int chip = 0; chip < chips; chip++) {
        snprintf(name, sizeof name, "TPU %s chip %d (emulated, %s)", c->name, chip, slice);
        metadata(f, &first, "process", chip + 1, 0, name, chip + 1);
        for (int k = 0; k < per_chip && chip * per_chip + k < p->replicas; k++) {
            int r = chip * per_chip + k;
            if (cores_per_replica == 1)
                snprintf(name, sizeof name, "core %d (replica %d)", k, r);
            else
                snprintf(name, sizeof name, "cores %d-%d (replica %d)", k * cores_per_replica,
                         (k + 1) * cores_per_replica - 1, r);
            metadata(f, &first, "thread", chip + 1, TID_CORE + k, name, k);
        }
        metadata(f, &first, "thread", chip + 1, TID_INFEED, "infeed (PCIe)", per_chip);
        metadata(f, &first, "thread", chip + 1, TID_ICI, "interconnect (ICI)", per_chip + 1);
    }

    long long ops_start = to_ns(p->infeed_stall_s),
              ops_end = to_ns(p->infeed_stall_s + p->compute_s);
    long long ar_end = to_ns(p->infeed_stall_s + p->compute_s + p->allreduce_s);
    long long step_end = to_ns(p->infeed_stall_s + p->compute_s + p->allreduce_s + p->host_s);
    open_event(f, &first, t->what, "step", host, TID_STEP, 0, step_end);
    fprintf(f, "\"model\": ");
    cli_json_string(f, t->model);
    fprintf(f,
            ", \"slice\": \"%s\", \"step_seconds\": %.9g, \"samples_per_second\": %.9g, \"bound\": "
            "\"%s\"}}",
            slice, p->step_s, p->samples_per_s, sy_bound_name(p->bound));
    open_event(f, &first, "host round trip", "host", host, TID_HOST, ar_end, step_end);
    fprintf(f, "\"seconds\": %.9g, \"steps_per_execution\": %d}}", p->host_s,
            p->steps_per_execution);

    for (int r = 0; r < p->replicas; r++) {
        int pid = r / per_chip + 1, tid = TID_CORE + r % per_chip;
        double at = p->infeed_stall_s;
        for (int32_t i = 0; i < p->n_ops; i++) {
            const sy_profile_op *o = &p->ops[i];
            long long ns = to_ns(at), end = to_ns(at + o->seconds);
            at += o->seconds;
            if (*o->layer)
                snprintf(name, sizeof name, "%s/%s", o->layer, o->op);
            else
                snprintf(name, sizeof name, "%s", o->op);
            open_event(f, &first, name, sy_bound_name(o->bound), pid, tid, ns, end);
            fprintf(f, "\"node\": ");
            cli_json_string(f, o->name);
            fprintf(f, ", \"layer\": ");
            cli_json_string(f, o->layer);
            fprintf(f,
                    ", \"op\": \"%s\", \"flops\": %.17g, \"mxu_flops\": %.17g, \"bytes\": %.17g, "
                    "\"mxu_cycles\": %.17g, \"vector_cycles\": %.17g, \"memory_cycles\": %.17g, "
                    "\"mxu_utilization\": %.6g, \"bound\": \"%s\", \"share\": %.6g}}",
                    o->op, o->flops, o->mxu_flops, o->bytes, o->mxu_cycles, o->vector_cycles,
                    o->memory_cycles, o->mxu_utilization, sy_bound_name(o->bound), o->share);
        }
    }
    for (int chip = 0; chip < chips; chip++) {
        if (p->infeed_stall_s > 0) {
            open_event(f, &first, "infeed stall", "infeed", chip + 1, TID_INFEED, 0, ops_start);
            fprintf(f, "\"seconds\": %.9g}}", p->infeed_stall_s);
        }
        if (p->infeed_bytes > 0) {
            open_event(f, &first, "infeed (next batch)", "infeed", chip + 1, TID_INFEED, ops_start,
                       ops_start + to_ns(p->infeed_s));
            fprintf(f,
                    "\"bytes_per_replica\": %.17g, \"seconds\": %.9g, \"overlaps_the_ops\": true}}",
                    p->infeed_bytes, p->infeed_s);
        }
        if (p->gradient_bytes > 0) {
            open_event(f, &first, "all-reduce (gradients)", "interconnect", chip + 1, TID_ICI,
                       ops_end, ar_end);
            fprintf(f, "\"bytes_per_replica\": %.17g, \"ring_of\": %d, \"seconds\": %.9g}}",
                    p->gradient_bytes, p->replicas, p->allreduce_s);
        }
    }
    fprintf(f, "\n]}\n");
}

sy_status profile_write_trace(const char *path, const char *model, bool training,
                              const sy_profile *p) {
    trace_ctx t = {.model = model, .what = training ? "training step" : "predict step", .p = p};
    return write_whole(path, fill_trace, &t);
}

/* ---- the roofline ------------------------------------------------------------ */

typedef struct roofline_ctx {
    const char *model, *what;
    const sy_profile *p;
} roofline_ctx;

enum { SVG_W = 960, SVG_H = 620, PLOT_L = 90, PLOT_R = 690, PLOT_T = 80, PLOT_B = 540 };

typedef struct axes {
    double xlo, xhi, ylo, yhi; /* decades: log10 of the ends */
} axes;

static double px(const axes *a, double x) {
    return PLOT_L + (log10(x) - a->xlo) / (a->xhi - a->xlo) * (PLOT_R - PLOT_L);
}
static double py(const axes *a, double y) {
    return PLOT_B - (log10(y) - a->ylo) / (a->yhi - a->ylo) * (PLOT_B - PLOT_T);
}

static bool plotted(const sy_profile_op *o) {
    return o->flops > 0 && o->bytes > 0 && o->seconds > 0;
}

/* 3e12 -> "3 T", 1e9 -> "1 G": FLOP/s with an SI prefix. */
static void si(char *buf, size_t size, double v, const char *unit) {
    static const char *const prefix[] = {"", "k", "M", "G", "T", "P", "E"};
    int i = 0;
    while (fabs(v) >= 1000 && i < 6) {
        v /= 1000;
        i++;
    }
    snprintf(buf, size, "%.3g %s%s", v, prefix[i], unit);
}

static const char *bound_colour(sy_bound b) {
    switch (b) {
    case SY_BOUND_MXU:
        return "#1f77b4";
    case SY_BOUND_VECTOR:
        return "#ff7f0e";
    case SY_BOUND_MEMORY:
        return "#2ca02c";
    case SY_BOUND_INFEED:
        return "#9467bd";
    case SY_BOUND_INTERCONNECT:
        return "#d62728";
    default:
        return "#7f7f7f";
    }
}

/* The dot's radius: its area proportional to the op's share of the step. */
static double radius(double share) {
    return 2.5 + 28 * sqrt(share > 0 ? share : 0);
}

static int by_share_desc(const void *a, const void *b) {
    const sy_profile_op *x = *(const sy_profile_op *const *)a,
                        *y = *(const sy_profile_op *const *)b;
    return (x->share < y->share) - (x->share > y->share);
}

/* A roof: y = min(bw x, peak), from the left edge to the right. */
static void roof(FILE *f, const axes *a, double bw, double peak, const char *colour,
                 const char *dash) {
    double x0 = pow(10, a->xlo), x1 = pow(10, a->xhi), ridge = fmax(x0, fmin(peak / bw, x1));
    fprintf(
        f,
        "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\"%s%s%s clip-path=\"url(#plot)\" "
        "points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\"/>\n",
        colour, dash ? " stroke-dasharray=\"" : "", dash ? dash : "", dash ? "\"" : "", px(a, x0),
        py(a, fmin(bw * x0, peak)), px(a, ridge), py(a, fmin(bw * ridge, peak)), px(a, x1),
        py(a, fmin(bw * x1, peak)));
}

static void fill_roofline(FILE *f, const void *arg) {
    const roofline_ctx *r = arg;
    const sy_profile *p = r->p;
    const sy_tpu_chip *c = p->chip;
    int per_chip = c->replicas > 0 ? c->replicas : 1;
    int cores = c->cores / per_chip > 0 ? c->cores / per_chip : 1;
    /* one replica's share of the chip, as the cost pass gives it */
    double mxu_peak = c->peak_bf16_flops / per_chip, vec_peak = c->vector_flops_core * cores;
    double bw = c->hbm_bytes_per_s / per_chip;
    double xmin = vec_peak / bw, xmax = mxu_peak / bw, ymin = vec_peak, ymax = mxu_peak;
    int shown = 0;
    for (int32_t i = 0; i < p->n_ops; i++) {
        const sy_profile_op *o = &p->ops[i];
        if (!plotted(o)) continue;
        double x = o->flops / o->bytes, y = o->flops / o->seconds;
        xmin = fmin(xmin, x), xmax = fmax(xmax, x), ymin = fmin(ymin, y), ymax = fmax(ymax, y);
        shown++;
    }
    axes a = {.xlo = floor(log10(xmin)),
              .xhi = ceil(log10(xmax)) + 1,
              .ylo = floor(log10(ymin)),
              .yhi = floor(log10(ymax)) + 1};
    if (a.xhi - a.xlo > 12) a.xlo = a.xhi - 12; /* an op at 1e-9 FLOP/byte would squash the rest */
    if (a.yhi - a.ylo > 10) a.ylo = a.yhi - 10;
    char slice[64], v1[32], v2[32], v3[32];
    slice_name(p, slice, sizeof slice);

    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d "
            "%d\" "
            "font-family=\"sans-serif\" font-size=\"12\">\n",
            SVG_W, SVG_H, SVG_W, SVG_H);
    fprintf(f, "<title>Roofline: ");
    xml_text(f, r->model);
    fprintf(f, ", %s on TPU %s</title>\n", r->what, slice);
    fprintf(f,
            "<defs><clipPath id=\"plot\"><rect x=\"%d\" y=\"%d\" width=\"%d\" "
            "height=\"%d\"/></clipPath></defs>\n",
            PLOT_L, PLOT_T, PLOT_R - PLOT_L, PLOT_B - PLOT_T);
    fprintf(f, "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n");
    fprintf(f, "<text x=\"%d\" y=\"28\" font-size=\"17\" font-weight=\"bold\">", PLOT_L);
    xml_text(f, r->model);
    fprintf(f, ": %s on TPU %s (emulated), roofline of one replica</text>\n", r->what, slice);
    fprintf(
        f,
        "<text x=\"%d\" y=\"50\" fill=\"#444\">%d replica%s, batch %lld per replica, step %.3f ms "
        "(%.0f samples/s); a replica is %d TensorCore%s</text>\n",
        PLOT_L, p->replicas, p->replicas == 1 ? "" : "s", (long long)p->batch, 1e3 * p->step_s,
        p->samples_per_s, cores, cores == 1 ? "" : "s");

    /* grid, ticks, labels: one per decade */
    fprintf(f, "<g stroke=\"#e4e4e4\">\n");
    for (double d = a.xlo; d <= a.xhi; d++)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\"/>\n", px(&a, pow(10, d)),
                PLOT_T, px(&a, pow(10, d)), PLOT_B);
    for (double d = a.ylo; d <= a.yhi; d++)
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\"/>\n", PLOT_L,
                py(&a, pow(10, d)), PLOT_R, py(&a, pow(10, d)));
    fprintf(f,
            "</g>\n<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
            "stroke=\"#333\"/>\n",
            PLOT_L, PLOT_T, PLOT_R - PLOT_L, PLOT_B - PLOT_T);
    fprintf(f, "<g text-anchor=\"middle\">\n");
    for (double d = a.xlo; d <= a.xhi; d++)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\">%g</text>\n", px(&a, pow(10, d)), PLOT_B + 18,
                pow(10, d));
    fprintf(f,
            "<text x=\"%d\" y=\"%d\" font-size=\"14\">arithmetic intensity (FLOP/byte of HBM "
            "traffic)</text>\n",
            (PLOT_L + PLOT_R) / 2, PLOT_B + 44);
    fprintf(f, "</g>\n<g text-anchor=\"end\">\n");
    for (double d = a.ylo; d <= a.yhi; d++) {
        si(v1, sizeof v1, pow(10, d), "");
        fprintf(f, "<text x=\"%d\" y=\"%.1f\">%s</text>\n", PLOT_L - 8, py(&a, pow(10, d)) + 4, v1);
    }
    fprintf(f,
            "</g>\n<text transform=\"translate(%d,%d) rotate(-90)\" text-anchor=\"middle\" "
            "font-size=\"14\">"
            "attainable FLOP/s (one replica)</text>\n",
            PLOT_L - 62, (PLOT_T + PLOT_B) / 2);

    /* the roofs */
    roof(f, &a, bw, mxu_peak, "#222", NULL);
    roof(f, &a, bw, vec_peak, "#888", "6,4");
    si(v1, sizeof v1, mxu_peak, "FLOP/s");
    si(v2, sizeof v2, vec_peak, "FLOP/s");
    si(v3, sizeof v3, bw, "B/s");
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">MXU bfloat16 peak %s</text>\n",
            PLOT_R - 6, py(&a, mxu_peak) - 6, v1);
    fprintf(f,
            "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\" fill=\"#555\">vector unit %s</text>\n",
            PLOT_R - 6, py(&a, vec_peak) - 6, v2);
    /* the bandwidth's label on the stretch of diagonal between the two ridges, where ops rarely sit
     */
    double lx = sqrt(vec_peak / bw * (mxu_peak / bw)) / 2;
    double angle =
        -atan2((PLOT_B - PLOT_T) / (a.yhi - a.ylo), (PLOT_R - PLOT_L) / (a.xhi - a.xlo)) * 180 /
        M_PI;
    fprintf(f, "<text transform=\"translate(%.1f,%.1f) rotate(%.1f)\">HBM %s</text>\n", px(&a, lx),
            py(&a, bw * lx) - 6, angle, v3);

    /* the ops: the largest first, so that small dots stay on top */
    const sy_profile_op **order = malloc(sizeof *order * (size_t)(p->n_ops > 0 ? p->n_ops : 1));
    int n = 0;
    for (int32_t i = 0; order && i < p->n_ops; i++)
        if (plotted(&p->ops[i])) order[n++] = &p->ops[i];
    if (order) qsort(order, (size_t)n, sizeof *order, by_share_desc);
    fprintf(f, "<g fill-opacity=\"0.65\" stroke=\"#000\" stroke-width=\"0.6\" "
               "clip-path=\"url(#plot)\">\n");
    for (int i = 0; i < n; i++) {
        const sy_profile_op *o = order[i];
        double x = o->flops / o->bytes, y = o->flops / o->seconds;
        fprintf(f, "<circle class=\"op\" cx=\"%.1f\" cy=\"%.1f\" r=\"%.1f\" fill=\"%s\"><title>",
                px(&a, x), py(&a, y), radius(o->share), bound_colour(o->bound));
        if (*o->layer) {
            xml_text(f, o->layer);
            fputc('/', f);
        }
        xml_text(f, o->op);
        si(v1, sizeof v1, o->flops, "FLOP");
        si(v2, sizeof v2, o->bytes, "B");
        si(v3, sizeof v3, y, "FLOP/s");
        fprintf(f, ": %s, %s, %.3g FLOP/B, %s, %s-bound, %.1f%% of the step</title></circle>\n", v1,
                v2, x, v3, sy_bound_name(o->bound), 100 * o->share);
    }
    fprintf(f, "</g>\n");
    free(order);

    /* the legend */
    int lx0 = PLOT_R + 24, ly = PLOT_T + 10;
    fprintf(f, "<text x=\"%d\" y=\"%d\" font-weight=\"bold\">each dot: one op of the step</text>\n",
            lx0, ly);
    ly += 22;
    static const sy_bound shown_bounds[] = {SY_BOUND_MXU, SY_BOUND_VECTOR, SY_BOUND_MEMORY};
    static const char *const meaning[] = {"bound by the MXUs", "bound by the vector unit",
                                          "bound by HBM bandwidth"};
    for (int i = 0; i < 3; i++, ly += 20)
        fprintf(
            f,
            "<circle cx=\"%d\" cy=\"%d\" r=\"6\" fill=\"%s\" fill-opacity=\"0.65\" stroke=\"#000\" "
            "stroke-width=\"0.6\"/><text x=\"%d\" y=\"%d\">%s</text>\n",
            lx0 + 6, ly - 4, bound_colour(shown_bounds[i]), lx0 + 20, ly, meaning[i]);
    ly += 8;
    fprintf(f, "<text x=\"%d\" y=\"%d\">dot area: share of the step</text>\n", lx0, ly);
    ly += 26;
    static const double sample_share[] = {0.01, 0.1};
    for (int i = 0; i < 2; i++, ly += 30)
        fprintf(f,
                "<circle cx=\"%d\" cy=\"%d\" r=\"%.1f\" fill=\"#bbb\" stroke=\"#000\" "
                "stroke-width=\"0.6\"/>"
                "<text x=\"%d\" y=\"%d\">%g%%</text>\n",
                lx0 + 10, ly - 4, radius(sample_share[i]), lx0 + 30, ly, 100 * sample_share[i]);
    fprintf(f,
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#222\" stroke-width=\"2\"/>"
            "<text x=\"%d\" y=\"%d\">MXU roof</text>\n",
            lx0, ly - 4, lx0 + 20, ly - 4, lx0 + 28, ly);
    ly += 20;
    fprintf(f,
            "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"#888\" stroke-width=\"2\" "
            "stroke-dasharray=\"6,4\"/><text x=\"%d\" y=\"%d\">vector-unit roof</text>\n",
            lx0, ly - 4, lx0 + 20, ly - 4, lx0 + 28, ly);
    ly += 28;
    fprintf(f, "<text x=\"%d\" y=\"%d\">%d of %d ops shown; the others</text>\n", lx0, ly, shown,
            p->n_ops);
    fprintf(f, "<text x=\"%d\" y=\"%d\">have no FLOPs or no HBM traffic</text>\n", lx0, ly + 16);
    fprintf(f, "<text x=\"%d\" y=\"%d\">(hover a dot for its figures)</text>\n", lx0, ly + 40);
    fprintf(f, "</svg>\n");
}

sy_status profile_write_roofline(const char *path, const char *model, bool training,
                                 const sy_profile *p) {
    roofline_ctx r = {.model = model, .what = training ? "training step" : "predict step", .p = p};
    return write_whole(path, fill_roofline, &r);
}
