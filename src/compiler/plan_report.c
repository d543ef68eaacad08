/*
 * plan_report.c - what a compiled plan says about itself: the schedule's
 * dump (sy_plan_dump, for debugging), the summary of the step as the
 * user's model became it (sy_plan_summary: `systolic summary MODEL
 * --plan`), and the $SYSTOLIC_PROFILE report of where a run's time went.
 */
#include "plan_internal.h"

#include <stdio.h>

void plan_profile_report(const sy_plan *p) {
    double total = 0;
    for (int32_t s = 0; s < p->n_steps; s++) total += p->profile[s];
    if (total <= 0) return;
    fprintf(stderr, "systolic profile: %d steps, %lld runs, %.1f ms per run\n", p->n_steps,
            (long long)p->profile_runs,
            1e3 * total / (double)(p->profile_runs ? p->profile_runs : 1));
    bool *shown = sy_calloc((size_t)p->n_steps, sizeof *shown);
    for (int k = 0; shown && k < 25 && k < p->n_steps; k++) {
        int32_t best = -1;
        for (int32_t s = 0; s < p->n_steps; s++)
            if (!shown[s] && (best < 0 || p->profile[s] > p->profile[best])) best = s;
        shown[best] = true;
        const sy_node_rec *r = &p->g->nodes[p->steps[best].node];
        char sh[SY_SHAPE_STR_MAX];
        fprintf(stderr, "  %5.1f%% %8.3f ms  %-24s %-36s %s\n", 100 * p->profile[best] / total,
                1e3 * p->profile[best] / (double)(p->profile_runs ? p->profile_runs : 1),
                sy_op_name(r->op), r->name, sy_shape_format(&r->shape, sh, sizeof sh));
    }
    sy_free(shown);
    /* and summed by op, the most first: where a model's time goes */
    double by_op[SY_OP_COUNT] = {0};
    int32_t count[SY_OP_COUNT] = {0};
    for (int32_t s = 0; s < p->n_steps; s++) {
        sy_op op = p->g->nodes[p->steps[s].node].op;
        by_op[op] += p->profile[s];
        count[op]++;
    }
    fprintf(stderr, "  by op:\n");
    for (;;) {
        int best = -1;
        for (int op = 0; op < SY_OP_COUNT; op++)
            if (by_op[op] > 0 && (best < 0 || by_op[op] > by_op[best])) best = op;
        if (best < 0 || by_op[best] < 0.005 * total) break;
        fprintf(stderr, "  %5.1f%% %8.3f ms  %-24s %d steps\n", 100 * by_op[best] / total,
                1e3 * by_op[best] / (double)(p->profile_runs ? p->profile_runs : 1),
                sy_op_name((sy_op)best), count[best]);
        by_op[best] = 0;
    }
}

void sy_plan_dump(const sy_plan *p, FILE *out) {
    static const char *const blocks[] = {"-", "arena", "params", "slots", "grads", "const"};
    for (int32_t s = 0; s < p->n_steps; s++) {
        const step *st = &p->steps[s];
        const sy_node_rec *r = &p->g->nodes[st->node];
        char sh[SY_SHAPE_STR_MAX];
        fprintf(out, "%4d %-28s %-32s %-18s %s+%lld", s, sy_op_name(r->op), r->name,
                sy_shape_format(&r->shape, sh, sizeof sh), blocks[p->places[st->node].block],
                (long long)p->places[st->node].offset);
        if (st->ws_bytes) fprintf(out, " ws=%lld", (long long)st->ws_bytes);
        /* issue 16, bfloat16 storage: what the kernel reads and writes as bfloat16, what the plan
         * converts */
        if (st->out_bf16) fprintf(out, " out:bfloat16");
        for (int j = 0; j < r->n_in; j++)
            if (st->args.in_dtype[j] == SY_BF16) fprintf(out, " in%d:bfloat16", j);
        for (int j = 0; j < r->n_in; j++)
            if (p->cvt[st->in_first + j]) fprintf(out, " in%d:converted", j);
        fprintf(out, "\n");
    }
}

/* "21.6 MB": bytes in decimal units, as docs/benchmarks.md gives sizes */
static const char *mb(int64_t bytes, char *buf, size_t size) {
    if (bytes >= 1000000)
        snprintf(buf, size, "%.1f MB", (double)bytes / 1e6);
    else if (bytes >= 1000)
        snprintf(buf, size, "%.1f kB", (double)bytes / 1e3);
    else
        snprintf(buf, size, "%lld B", (long long)bytes);
    return buf;
}

/* One buffer's line: its shape, how it is stored, its bytes, its block and what it stands for (the
 * ops fused into its kernel, or its name). */
static void buffer_line(const sy_plan *p, FILE *out, const char *lead, sy_node n) {
    static const char *const blocks[] = {"-", "arena", "params", "slots", "grads", "const"};
    const sy_node_rec *r = &p->g->nodes[n];
    sy_node own = plan_storage_of(p, n);
    char sh[SY_SHAPE_STR_MAX], b[32];
    sy_dtype dt = p->store[own];
    const char *origin = p->origin && n < p->n_origin ? p->origin[n] : NULL;
    fprintf(out, "%-40s %-20s %-8s %9s  %-6s %s\n", lead, sy_shape_format(&r->shape, sh, sizeof sh),
            sy_dtype_name(dt),
            mb(sy_shape_count(&r->shape) * (int64_t)sy_dtype_size(dt), b, sizeof b),
            blocks[p->places[own].block], origin ? origin : r->name);
}

void sy_plan_summary(const sy_plan *p, FILE *out) {
    fprintf(out, "%-40s %-20s %-8s %9s  %-6s %s\n", "step  kernel", "output", "stored", "bytes",
            "block", "fused ops");
    for (int32_t s = 0; s < p->n_steps; s++) {
        const step *st = &p->steps[s];
        const sy_node_rec *r = &p->g->nodes[st->node];
        char lead[64], b[32];
        snprintf(lead, sizeof lead, "%4d  %s", s, sy_op_name(r->op));
        if (sy_op_def_of(r->op)->flags &
            SY_OPF_UPDATE) { /* writes its parameter and slots in place */
            fprintf(out, "%-40s %-20s %-8s %9s  %-6s %s\n", lead, "(in place)", "", "", "",
                    p->g->nodes[graph_input(p->g, st->node, 0)].name);
            continue;
        }
        buffer_line(p, out, lead, st->node);
        if (st->over != SY_NONE) { /* issue 21, in place: the buffer it writes over */
            int32_t t = 0;
            while (t < s && p->steps[t].node != st->over) t++;
            char what[64];
            snprintf(what, sizeof what, "in step %d's buffer, whose value dies here", t);
            fprintf(out, "%-40s %-20s %-8s %9s  %-6s %s\n", "        (in place)", "", "", "", "", what);
        }
        if (st->side != SY_NONE) {
            snprintf(lead, sizeof lead, "        + %s", sy_op_name(p->g->nodes[st->side].op));
            buffer_line(p, out, lead, st->side);
        }
        if (st->ws_bytes + st->cvt_bytes)
            fprintf(out, "%-40s %-20s %-8s %9s  arena\n", "        + workspace", "", "",
                    mb(st->ws_bytes + st->cvt_bytes, b, sizeof b));
    }
    char a[32], u[32], gr[32], pa[32], sl[32];
    fprintf(out, "%d kernels run the step's %d ops (fusion folded %d)\n", p->n_steps,
            p->n_steps + p->info.fused, p->info.fused);
    fprintf(out,
            "arena %s: activations, inputs and workspaces, reused by liveness (%s without reuse)\n",
            mb(p->info.arena_bytes, a, sizeof a), mb(p->info.unplanned_bytes, u, sizeof u));
    fprintf(out, "gradients %s, parameters %s, optimizer slots %s\n",
            mb(p->info.grad_bytes, gr, sizeof gr), mb(p->info.param_bytes, pa, sizeof pa),
            mb(p->info.slot_bytes, sl, sizeof sl));
}
