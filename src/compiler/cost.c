/*
 * cost.c - the emulated TPU's clock: a pass over a compiled plan that puts
 * each step on a chip and adds up the time of one training (or predict)
 * step (issue 16; docs/design/tpu-cost-model.md).
 *
 * Each replica runs its copy of the plan on its share of a chip: a v2 or
 * v3 replica is one TensorCore (1 or 2 MXUs), a v4 replica both cores of a
 * chip (megacore: 8 MXUs); HBM bandwidth and infeed are the chip's divided
 * among the replicas on it. For every step of the schedule the op
 * registry's cost (graph/ops_cost.c) gives the matrix products, the vector
 * FLOPs and the bytes, and the op takes the longest of
 *
 *   MXU     each product on the replica's weight-stationary arrays, with
 *           the weights double-buffered (sy_mxu_ws_cycles), in whichever orientation -- (M, K, N)
 * or its transpose (N, K, M) -- costs fewer cycles, as a compiler picks the operand it keeps
 * stationary; vector  vector_flops at the replica's vector-unit rate; memory  the bytes at the
 * replica's share of HBM bandwidth.
 *
 * Fusion. The plan has already fused what the compiler fuses (a product's
 * bias and activation epilogue, chains of elementwise ops: fusion.c), and
 * a fused step pays HBM once, for its inputs and its output. On top of it
 * the model applies XLA's fusion rules (tpu-cost-model.md section 3):
 * cheap values recomputed in their readers' loops, loops over the same
 * elements run as one pass, and a value read only by the next step, an
 * elementwise one, kept on chip.
 *
 * Precision. Each value is counted in HBM at the bytes the chip stores it
 * in under XLA, which follow the model's dtype policy: the output of a bf16
 * op (a node flagged by Keras's mixed_bfloat16 policy, dtype_policy.c) is
 * bfloat16, 2 bytes an element; what Keras keeps in float32 -- variables,
 * their gradients and optimizer slots, BatchNormalization's statistics, a
 * float32 layer's softmax or loss -- 4. A cast of a variable to bfloat16 is
 * never stored: XLA fuses the convert into every reader, which reads the
 * float32 variable; a cast of a stored value only it reads is fused into
 * that value's producer, which writes bfloat16.
 *
 * Then the step: the ops' seconds, plus what the infeed adds (the inputs
 * the plan reads, which the host sends while the previous step computes,
 * so only max(0, infeed - compute) stalls), plus the gradients' all-reduce
 * among R replicas over the slice's interconnect (sy_allreduce_seconds:
 * rings along each dimension of the slice's 2-D or 3-D torus, issue 20;
 * on one host's -8 slice, or R replicas that make no slice, issue 16's
 * ring of 2 (R-1)/R gradient bytes over one ICI link and 2 link
 * latencies), plus the host round trip divided by steps_per_execution.
 */
#include "compiler_internal.h"
#include "systolic/profile.h"

#include <string.h>

const char *sy_bound_name(sy_bound bound) {
    static const char *const names[] = {"mxu",    "vector",       "memory",
                                        "infeed", "interconnect", "host"};
    return (unsigned)bound < sizeof names / sizeof names[0] ? names[bound] : "?";
}

sy_profile_options sy_profile_options_default(void) {
    return (sy_profile_options){.replicas = 0, .steps_per_execution = 1};
}

void sy_profile_free(sy_profile *p) {
    if (!p) return;
    for (int32_t i = 0; i < p->n_ops; i++) sy_free((void *)p->ops[i].name);
    sy_free(p->ops);
    sy_free(p);
}

/* The node holding the value n stands for: through views (reshape). */
static sy_node source_of(const sy_graph *g, sy_node n) {
    while (sy_op_def_of(g->nodes[n].op)->flags & SY_OPF_ALIAS) n = graph_input(g, n, 0);
    return n;
}

static double node_bytes(const sy_node_rec *r) {
    return (double)sy_shape_count(&r->shape) * (double)sy_dtype_size(r->dtype);
}

static bool elementwise(const sy_node_rec *r) {
    return r->op == SY_OP_FUSED_ELTWISE || (sy_op_def_of(r->op)->flags & SY_OPF_ELTWISE);
}

/* issue 16, cost validation: XLA's loop fusion and the values' precision -------------------- */

/* How a step's value reaches its readers. */
enum {
    HBM = 0,   /* written to HBM, read from it by each reader */
    INTO_NEXT, /* fused into its one reader: the next, elementwise, step or a bfloat16 convert */
    DUPLICATED
}; /* an elementwise value recomputed inside each of its readers' loops */

/* A step XLA can emit as a loop over its output's elements, and duplicate into its readers. */
static bool loop_producer(const sy_node_rec *r) {
    return elementwise(r) || r->op == SY_OP_BROADCAST_TO || r->op == SY_OP_COPY;
}

/* Whether step r can take the computation of its input x (a value of x_elems elements) into its own
 * loop: an elementwise step (or broadcast) over as many elements as x, a sum or mean over x, or a
 * matrix product streaming x into the MXU (XLA on a TPU fuses an operand's elementwise producers --
 * a BatchNormalization's scale and shift, a ReLU -- into the convolution that reads it). */
static bool loop_consumer(const sy_node_rec *r, double x_elems) {
    switch (r->op) {
    case SY_OP_REDUCE_SUM:
    case SY_OP_REDUCE_MEAN:
    case SY_OP_MATMUL:
    case SY_OP_CONV2D:
    case SY_OP_CONV2D_BACKPROP_INPUT:
    case SY_OP_CONV2D_BACKPROP_FILTER:
        return true;
    default:
        return loop_producer(r) && (double)sy_shape_count(&r->shape) == x_elems;
    }
}

/* The ops whose cost reads each input whole and writes the output whole, so that the pass may
 * recount their bytes (slice and gather read parts; updates rewrite in place; leaves run nothing).
 */
static bool streams_whole(const sy_node_rec *r) {
    uint32_t f = sy_op_def_of(r->op)->flags;
    return !(f & (SY_OPF_LEAF | SY_OPF_ALIAS | SY_OPF_UPDATE)) && r->op != SY_OP_SLICE &&
           r->op != SY_OP_GATHER;
}

double cost_stored_bytes(const sy_graph *g, sy_node n) {
    const sy_node_rec *r = &g->nodes[n];
    bool bf16 = r->bf16 && r->dtype == SY_F32 &&
                !(sy_op_def_of(r->op)->flags & (SY_OPF_LEAF | SY_OPF_UPDATE));
    return bf16 ? 2.0 * (double)sy_shape_count(&r->shape) : node_bytes(r);
}

/* Bytes of a value in HBM: as stored (cost_stored_bytes), except a parameter's gradient, which the
 * chip keeps in float32 for the all-reduce and the update (the gradient of Keras's cast of the
 * variable casts it back to float32, and XLA fuses that convert into its producer). */
static double hbm_bytes(const sy_graph *g, const bool *param_grad, sy_node n) {
    return param_grad[n] ? node_bytes(&g->nodes[n]) : cost_stored_bytes(g, n);
}

/* A convert of a float32 value to bfloat16 (mixed_bfloat16's casts, and their gradients'). */
static bool bf16_cast(const sy_graph *g, sy_node n) {
    const sy_node_rec *r = &g->nodes[n];
    if (r->op != SY_OP_COPY || !r->bf16 || r->dtype != SY_F32) return false;
    sy_node x = source_of(g, graph_input(g, n, 0));
    return cost_stored_bytes(g, x) == node_bytes(&g->nodes[x]);
}

/* A cast of a variable to bfloat16 (mixed_bfloat16's autocasting): fused into every reader. */
static bool variable_cast(const sy_graph *g, sy_node n) {
    return bf16_cast(g, n) && g->nodes[source_of(g, graph_input(g, n, 0))].op == SY_OP_PARAM;
}

/* What a loop computing `node` reads from HBM through its inputs: each stored value once, reached
 * through the values recomputed in the loop (whose vector work it adds to *redo_flops). `seen`
 * holds a stamp per value, unique to the call, so that the stack never holds a value twice. */
typedef struct fusion_ctx {
    const sy_graph *g;
    const uint8_t *kind;
    const bool *param_grad;
    int32_t *seen, *seen_indirect;
    sy_node *stack;
    int32_t stamp;
    /* the loop being filled: its id (0: none), first step and iteration space; per value, the loop
     * that computes it and the last loop that read it from HBM; per node, its step (-1: none) */
    int32_t group, group_start;
    double group_space;
    int32_t *group_of, *group_read, *step_of;
} fusion_ctx;

static bool reduction(const sy_node_rec *r) {
    return r->op == SY_OP_REDUCE_SUM || r->op == SY_OP_REDUCE_MEAN;
}

/* The elements a loop step iterates over (a reduction: its input's), or -1 for a step that is
 * not a loop. */
static double loop_space(const sy_graph *g, const sy_node_rec *r) {
    if (reduction(r))
        return (double)sy_shape_count(&g->nodes[graph_input(g, (sy_node)(r - g->nodes), 0)].shape);
    return loop_producer(r) ? (double)sy_shape_count(&r->shape) : -1;
}

/* XLA's multi-output fusion: whether `node` can join the loop being filled, computing its value in
 * the same pass over the elements. It cannot if it needs the result of a reduction of that loop, or
 * any value of it through a step that runs on its own after the loop (which needs the loop done).
 */
static bool can_join(fusion_ctx *f, sy_node node) {
    const sy_graph *g = f->g;
    int32_t stamp = ++f->stamp, top = 0;
    /* stack entries: 2 * value + 1 when reached only through values recomputed in the loop */
    for (int j = 0; j < g->nodes[node].n_in; j++)
        f->stack[top++] = 2 * source_of(g, graph_input(g, node, j)) + 1;
    while (top > 0) {
        sy_node e = f->stack[--top], x = e / 2;
        bool direct = e & 1;
        if (f->step_of[x] < f->group_start) continue; /* computed before the loop began */
        if (direct ? f->seen[x] == stamp : f->seen_indirect[x] == stamp) continue;
        (direct ? f->seen : f->seen_indirect)[x] = stamp;
        if (f->group_of[x] == f->group) {
            if (!direct || reduction(&g->nodes[x])) return false;
            continue;
        }
        bool through = direct && f->kind[x] == DUPLICATED;
        for (int j = 0; j < g->nodes[x].n_in; j++) /* the stack holds each edge at most twice */
            f->stack[top++] = 2 * source_of(g, graph_input(g, x, j)) + (through ? 1 : 0);
    }
    return true;
}

static double stored_reads(fusion_ctx *f, sy_node node, double *redo_flops) {
    const sy_graph *g = f->g;
    int32_t stamp = ++f->stamp, top = 0;
    double bytes = 0;
    for (sy_node n = node, first = 1; first || top > 0; first = 0) {
        if (!first) {
            n = f->stack[--top];
            if (f->kind[n] != DUPLICATED) { /* a value fused into its one reader costs it nothing */
                /* in a loop of several steps: a value one of them computes, or one read already */
                bool in_loop =
                    f->group && (f->group_of[n] == f->group || f->group_read[n] == f->group);
                if (f->kind[n] == HBM && !in_loop) bytes += hbm_bytes(g, f->param_grad, n);
                if (f->group) f->group_read[n] = f->group;
                continue;
            }
            if (redo_flops) {
                sy_op_cost c;
                sy_op_cost_of(g, n, &c);
                *redo_flops += c.vector_flops;
            }
        }
        for (int j = 0; j < g->nodes[n].n_in; j++) {
            sy_node x = source_of(g, graph_input(g, n, j));
            if (f->seen[x] != stamp) f->seen[x] = stamp, f->stack[top++] = x;
        }
    }
    return bytes;
}

/* The cycles of one op's products on the replica's arrays. */
static double mxu_cycles(const sy_op_cost *c, const sy_tpu_chip *chip, int64_t arrays) {
    double cycles = 0;
    for (int i = 0; i < c->n_products; i++) {
        const sy_mxu_product *p = &c->product[i];
        int64_t a =
            sy_mxu_ws_cycles(p->m, p->k, p->n, chip->mxu_rows, chip->mxu_cols, arrays, true);
        int64_t b =
            sy_mxu_ws_cycles(p->n, p->k, p->m, chip->mxu_rows, chip->mxu_cols, arrays, true);
        cycles += (double)p->count * (double)(a < b ? a : b);
    }
    return cycles;
}

/* ---- issue 20, pods on paper: the all-reduce over a slice's torus --------------------------- */

double sy_allreduce_seconds(const sy_tpu_chip *chip, const sy_tpu_topology *t, int32_t replicas,
                            double bytes) {
    if (!chip || replicas < 2 || !(bytes > 0) || !(chip->ici_link_bytes_per_s > 0)) return 0;
    double bw = chip->ici_link_bytes_per_s, hop = chip->ici_latency_s;
    int64_t per_chip = chip->replicas > 0 ? chip->replicas : 1, product = per_chip;
    bool grid = t && t->rank >= 1 && t->rank <= 3;
    for (int d = 0; grid && d < t->rank; d++) {
        grid = t->chips[d] >= 1 && product <= INT32_MAX;
        product *= grid ? t->chips[d] : 1;
    }
    if (!grid || product != replicas) { /* issue 16's ring of the replicas */
        double r = replicas;
        return 2.0 * (r - 1) / r * bytes / bw + 2.0 * (r - 1) * hop;
    }
    static const int orders[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                     {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    double best = -1;
    for (int k = 0; k < 6; k++) {
        bool valid = true; /* the order's first `rank` entries are the dimensions there are */
        for (int i = 0; i < t->rank; i++) valid = valid && orders[k][i] < t->rank;
        if (!valid) continue;
        double share = bytes, seconds = 0; /* share: what each ring member holds entering a ring */
        for (int i = 0; i < t->rank; i++) {
            int d = orders[k][i];
            /* the first rings take in the chip's replicas; later ones run one per replica of a
             * chip, over the chip's links */
            double m = (double)t->chips[d] * (i == 0 ? (double)per_chip : 1),
                   sharing = i == 0 ? 1 : (double)per_chip, links = t->wrap[d] ? 2 : 1;
            if (m > 1)
                seconds += 2.0 * ((m - 1) / m * share * sharing / (links * bw) + (m - 1) * hop);
            share /= m;
        }
        if (best < 0 || seconds < best) best = seconds;
    }
    return best;
}

static sy_status fill_op(sy_profile_op *o, const sy_node_rec *r) {
    const char *name = r->name ? r->name : "";
    size_t len = strlen(name);
    const char *slash = strrchr(name, '/');
    size_t layer_len = slash ? (size_t)(slash - name) : 0;
    char *buf = sy_malloc(len + layer_len + 2);
    if (!buf) return sy_error(SY_ERR_OUT_OF_MEMORY, "profile: out of memory");
    memcpy(buf, name, len + 1);
    memcpy(buf + len + 1, name, layer_len);
    buf[len + 1 + layer_len] = '\0';
    o->op = sy_op_name(r->op);
    o->name = buf;
    o->layer = buf + len + 1;
    return SY_OK;
}

sy_status sy_plan_profile(const sy_plan *plan, const sy_tpu_chip *chip,
                          const sy_profile_options *options, sy_profile **out) {
    if (out) *out = NULL;
    if (!plan || !chip || !out)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "sy_plan_profile: plan, chip and out are required");
    sy_profile_options o = options ? *options : sy_profile_options_default();
    if (o.replicas == 0) o.replicas = chip->replicas;
    if (o.replicas < 1)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "sy_plan_profile: replicas must be at least 1, got %d", o.replicas);
    if (o.steps_per_execution < 1)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "sy_plan_profile: steps_per_execution must be at least 1, got %d",
                        o.steps_per_execution);
    if (chip->replicas < 1 || chip->cores < chip->replicas || chip->clock_hz <= 0 ||
        chip->mxu_rows < 1 || chip->mxu_cols < 1 || chip->hbm_bytes_per_s <= 0 ||
        chip->vector_flops_core <= 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "sy_plan_profile: chip '%s' has figures the cost model cannot use",
                        chip->name ? chip->name : "?");

    /* One replica's share of the chip. */
    int64_t cores = chip->cores / chip->replicas, arrays = (int64_t)chip->mxus_per_core * cores;
    double clock = chip->clock_hz, vector_rate = chip->vector_flops_core * (double)cores;
    double hbm = chip->hbm_bytes_per_s / chip->replicas,
           infeed = chip->infeed_bytes_per_s / chip->replicas;

    const sy_graph *g = plan_graph(plan);
    int32_t n_steps = plan_step_count(plan);
    size_t nn = (size_t)g->n_nodes;
    sy_profile *p = sy_calloc(1, sizeof *p);
    int32_t *uses = sy_calloc(nn, sizeof *uses), *reader = sy_calloc(nn, sizeof *reader),
            *seen = sy_calloc(nn, sizeof *seen), *readers = sy_calloc(nn, sizeof *readers);
    bool *fed = sy_calloc(nn, sizeof *fed), *all_loop = sy_calloc(nn, sizeof *all_loop),
         *param_grad = sy_calloc(nn, sizeof *param_grad);
    uint8_t *kind = sy_calloc(nn, sizeof *kind);
    size_t edges = 0;
    for (size_t i = 0; i < nn; i++) edges += (size_t)g->nodes[i].n_in;
    sy_node *stack = sy_calloc(2 * (edges + nn) + 16, sizeof *stack);
    int32_t *seen_indirect = sy_calloc(nn, sizeof *seen_indirect),
            *group_of = sy_calloc(nn, sizeof *group_of),
            *group_read = sy_calloc(nn, sizeof *group_read),
            *step_of = sy_malloc(nn * sizeof *step_of + 1);
    bool oom = !p || !uses || !reader || !seen || !readers || !fed || !all_loop || !param_grad ||
               !kind || !stack || !seen_indirect || !group_of || !group_read || !step_of ||
               !(p->ops = sy_calloc((size_t)(n_steps ? n_steps : 1), sizeof *p->ops));
    if (!oom) {
        p->chip = chip;
        p->replicas = o.replicas;
        p->steps_per_execution = o.steps_per_execution;
    }

    /* Who reads each value, whether every reader could take it into its loop, which values are
     * parameters' gradients, and which inputs the plan feeds. */
    for (size_t i = 0; i < nn && !oom; i++) all_loop[i] = true, step_of[i] = -1;
    for (int32_t s = 0; s < n_steps && !oom; s++) step_of[plan_step_node(plan, s)] = s;
    for (int32_t s = 0; s < n_steps && !oom; s++) {
        const sy_node_rec *r = &g->nodes[plan_step_node(plan, s)];
        bool update = sy_op_def_of(r->op)->flags & SY_OPF_UPDATE;
        for (int j = 0; j < r->n_in; j++) {
            sy_node src = source_of(g, graph_input(g, plan_step_node(plan, s), j));
            if (!uses[src]++ || reader[src] != s) readers[src]++;
            reader[src] = s;
            if (!loop_consumer(r, (double)sy_shape_count(&g->nodes[src].shape)))
                all_loop[src] = false;
            if (update && j == 1) param_grad[src] = true;
            if (g->nodes[src].op == SY_OP_INPUT && !fed[src]) {
                fed[src] = true;
                p->infeed_bytes += node_bytes(&g->nodes[src]);
                if (!p->batch && g->nodes[src].shape.rank > 0)
                    p->batch = g->nodes[src].shape.dims[0];
            }
        }
    }
    if (oom) {
        sy_free(uses), sy_free(reader), sy_free(seen), sy_free(readers), sy_free(fed),
            sy_free(all_loop);
        sy_free(param_grad), sy_free(kind), sy_free(stack), sy_profile_free(p);
        sy_free(seen_indirect), sy_free(group_of), sy_free(group_read), sy_free(step_of);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "profile: out of memory");
    }
    /* The fusion rules (docs/design/tpu-cost-model.md section 3), in schedule order. An
     * elementwise value every reader of which loops over as many elements (or sums them) is
     * recomputed in each reader's loop and never stored, where that moves no more bytes than
     * storing it: R readers re-reading its stored inputs, against writing it once and reading it R
     * times. Then a value only the next step reads, an elementwise step that runs, stays on chip.
     * A value no step reads is an output of the plan and is stored. */
    fusion_ctx f = {.g = g,
                    .kind = kind,
                    .param_grad = param_grad,
                    .seen = seen,
                    .seen_indirect = seen_indirect,
                    .stack = stack,
                    .group_of = group_of,
                    .group_read = group_read,
                    .step_of = step_of};
    enum { OPEN_LOOPS = 8 };
    struct open_loop {
        int32_t group, start;
        double space;
    } open[OPEN_LOOPS];
    memset(open, 0, sizeof open);
    int32_t groups = 0;
    for (int32_t s = 0; s < n_steps; s++) {
        sy_node node = plan_step_node(plan, s);
        const sy_node_rec *r = &g->nodes[node];
        if (readers[node] >= 1 && variable_cast(g, node)) {
            kind[node] = DUPLICATED;
            continue;
        }
        /* A convert to bfloat16 of a stored value only it reads is done by that value's producer
         * (XLA fuses the convert into the fusion computing its operand): the float32 value is never
         * stored, where reading it in the convert's readers would store it and read it at 4 bytes.
         * (A value recomputed in its readers is recomputed in the convert's, by the rule below.) */
        if (bf16_cast(g, node)) {
            sy_node x = source_of(g, graph_input(g, node, 0));
            if (step_of[x] >= 0 && uses[x] == 1 && kind[x] == HBM) {
                kind[x] = INTO_NEXT;
                continue;
            }
        }
        if (readers[node] < 1 || !all_loop[node] || !loop_producer(r)) continue;
        double size = hbm_bytes(g, param_grad, node);
        if (readers[node] * stored_reads(&f, node, NULL) <= (1 + readers[node]) * size)
            kind[node] = DUPLICATED;
    }
    for (int32_t s = 0; s + 1 < n_steps; s++) {
        sy_node node = plan_step_node(plan, s), next = plan_step_node(plan, s + 1);
        if (kind[node] == HBM && uses[node] == 1 && reader[node] == s + 1 &&
            kind[next] != DUPLICATED && elementwise(&g->nodes[next]))
            kind[node] = INTO_NEXT;
    }

    sy_status st = SY_OK;
    double by_bound[3] = {0, 0, 0};
    for (int32_t s = 0; s < n_steps && !st; s++) {
        sy_node node = plan_step_node(plan, s);
        const sy_node_rec *r = &g->nodes[node];
        sy_profile_op *op = &p->ops[p->n_ops++];
        if ((st = fill_op(op, r))) break;
        sy_op_cost c;
        sy_op_cost_of(g, node, &c);
        double vector_flops = c.vector_flops, bytes;
        if (kind[node] == DUPLICATED) {
            bytes = vector_flops = 0; /* it runs inside its readers' loops */
        } else if (streams_whole(r)) {
            /* A loop step joins the loop being filled (multi-output fusion) where it loops over as
             * many elements and needs none of its results, else begins one; any other step reads
             * on its own. */
            double space = loop_space(g, r);
            f.group = 0;
            if (space >= 0) {
                /* the loop last begun over as many elements (a few sizes at a time are open) */
                int k = 0;
                while (k < OPEN_LOOPS - 1 && open[k].group && open[k].space != space) k++;
                if (open[k].space != space) k = (int)(groups % OPEN_LOOPS);
                f.group = open[k].group, f.group_start = open[k].start, f.group_space = space;
                if (!(f.group && open[k].space == space && can_join(&f, node))) {
                    open[k] = (struct open_loop){.group = ++groups, .start = s, .space = space};
                    f.group = open[k].group, f.group_start = s;
                }
                group_of[node] = f.group;
            }
            /* the stored values its loop reads, through those it recomputes, less those the loop
             * computes or has read; its output unless fused away */
            bytes = stored_reads(&f, node, &vector_flops) +
                    (kind[node] == HBM ? hbm_bytes(g, param_grad, node) : 0);
        } else if (r->op == SY_OP_SLICE || r->op == SY_OP_GATHER) {
            /* it reads as many elements of input 0 as it writes (a gather also its indices), at
             * input 0's precision: through a variable's cast, the float32 variable */
            sy_node x = source_of(g, graph_input(g, node, 0));
            while (kind[x] == DUPLICATED && g->nodes[x].op == SY_OP_COPY)
                x = source_of(g, graph_input(g, x, 0));
            double x_bytes = node_bytes(&g->nodes[x]);
            double precision = x_bytes > 0 ? hbm_bytes(g, param_grad, x) / x_bytes : 1;
            bytes = c.bytes_read + node_bytes(r) * (precision - 1) +
                    (kind[node] == HBM ? hbm_bytes(g, param_grad, node) : 0);
        } else {
            /* updates rewrite their float32 variables and slots in place; leaves and views run
             * nothing */
            bytes = c.bytes_read + (kind[node] == HBM ? c.bytes_written : 0);
        }
        op->bf16 = hbm_bytes(g, param_grad, node) < node_bytes(r);
        p->bf16_ops += op->bf16;
        op->flops = c.flops;
        op->mxu_flops = c.flops - c.vector_flops;
        op->bytes = bytes;
        op->mxu_cycles = mxu_cycles(&c, chip, arrays);
        op->vector_cycles = vector_flops / vector_rate * clock;
        op->memory_cycles = bytes / hbm * clock;
        if (op->mxu_cycles > 0)
            op->mxu_utilization = op->mxu_flops / (2.0 * op->mxu_cycles * (double)arrays *
                                                   chip->mxu_rows * chip->mxu_cols);
        double longest = op->mxu_cycles;
        op->bound = SY_BOUND_MXU;
        if (op->vector_cycles > longest) longest = op->vector_cycles, op->bound = SY_BOUND_VECTOR;
        if (op->memory_cycles > longest) longest = op->memory_cycles, op->bound = SY_BOUND_MEMORY;
        op->seconds = longest / clock;
        by_bound[op->bound] += op->seconds;
        p->flops += op->flops;
        p->bytes += op->bytes;
        p->compute_s += op->seconds;
    }
    sy_free(uses), sy_free(reader), sy_free(seen), sy_free(readers), sy_free(fed),
        sy_free(all_loop);
    sy_free(param_grad), sy_free(kind), sy_free(stack);
    sy_free(seen_indirect), sy_free(group_of), sy_free(group_read), sy_free(step_of);
    if (st) {
        sy_profile_free(p);
        return st;
    }

    /* The values the replicas reduce: each update's gradient (or state value), input 1; a plan that
     * stops at the gradients reduces its whole gradient block. */
    for (int32_t s = 0; s < n_steps; s++) {
        const sy_node_rec *r = &g->nodes[plan_step_node(plan, s)];
        if (sy_op_def_of(r->op)->flags & SY_OPF_UPDATE)
            p->gradient_bytes += node_bytes(graph_in_rec(g, r, 1));
    }
    if (p->gradient_bytes == 0) {
        sy_plan_info info;
        sy_plan_get_info(plan, &info);
        p->gradient_bytes = (double)info.grad_bytes;
    }
    double rr = (double)o.replicas;
    p->infeed_s = chip->infeed_bytes_per_s > 0 ? p->infeed_bytes / infeed : 0;
    p->infeed_stall_s = p->infeed_s > p->compute_s ? p->infeed_s - p->compute_s : 0;
    /* issue 20: the slice the replicas make, when their count is one (replicas per chip x chips) */
    int64_t slice_cores = (int64_t)o.replicas * chip->cores / chip->replicas;
    if (slice_cores > INT32_MAX || (int64_t)o.replicas * chip->cores % chip->replicas ||
        !sy_tpu_slice_topology(chip, (int32_t)slice_cores, &p->topology))
        p->topology = (sy_tpu_topology){.rank = 0, .chips = {1, 1, 1}};
    p->allreduce_s = sy_allreduce_seconds(chip, &p->topology, o.replicas, p->gradient_bytes);
    p->host_s = chip->host_round_trip_s / o.steps_per_execution;
    p->step_s = p->compute_s + p->infeed_stall_s + p->allreduce_s + p->host_s;
    p->samples_per_s = p->step_s > 0 ? (double)p->batch * rr / p->step_s : 0;
    for (int32_t i = 0; i < p->n_ops; i++)
        p->ops[i].share = p->step_s > 0 ? p->ops[i].seconds / p->step_s : 0;

    const double parts[] = {by_bound[0],       by_bound[1],    by_bound[2],
                            p->infeed_stall_s, p->allreduce_s, p->host_s};
    p->bound = SY_BOUND_MXU;
    for (int i = 1; i < 6; i++)
        if (parts[i] > parts[p->bound]) p->bound = (sy_bound)i;
    *out = p;
    return SY_OK;
}
