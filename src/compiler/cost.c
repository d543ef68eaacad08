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
 * the model applies XLA's producer-consumer fusion rule: a value read by
 * exactly one step, the very next one, which is elementwise, never goes to
 * HBM -- its producer does not write it and the consumer does not read it.
 *
 * Then the step: the ops' seconds, plus what the infeed adds (the inputs
 * the plan reads, which the host sends while the previous step computes,
 * so only max(0, infeed - compute) stalls), plus the gradients' ring
 * all-reduce among R replicas, 2 (R-1)/R gradient bytes over one ICI link
 * and 2 link latencies, plus the host round trip divided by
 * steps_per_execution.
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
    sy_profile *p = sy_calloc(1, sizeof *p);
    int32_t *uses = sy_calloc((size_t)g->n_nodes, sizeof *uses),
            *reader = sy_calloc((size_t)g->n_nodes, sizeof *reader);
    bool *fed = sy_calloc((size_t)g->n_nodes, sizeof *fed);
    if (!p || !uses || !reader || !fed ||
        !(p->ops = sy_calloc((size_t)(n_steps ? n_steps : 1), sizeof *p->ops))) {
        sy_free(uses), sy_free(reader), sy_free(fed), sy_profile_free(p);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "profile: out of memory");
    }
    p->chip = chip;
    p->replicas = o.replicas;
    p->steps_per_execution = o.steps_per_execution;

    /* Who reads each value, and which inputs the plan feeds. */
    for (int32_t s = 0; s < n_steps; s++) {
        const sy_node_rec *r = &g->nodes[plan_step_node(plan, s)];
        for (int j = 0; j < r->n_in; j++) {
            sy_node src = source_of(g, graph_input(g, plan_step_node(plan, s), j));
            uses[src]++;
            reader[src] = s;
            if (g->nodes[src].op == SY_OP_INPUT && !fed[src]) {
                fed[src] = true;
                p->infeed_bytes += node_bytes(&g->nodes[src]);
                if (!p->batch && g->nodes[src].shape.rank > 0)
                    p->batch = g->nodes[src].shape.dims[0];
            }
        }
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
        double bytes = c.bytes_read + c.bytes_written;
        /* The fusion rule: a value only the next step reads, an elementwise one, stays on chip. */
        if (uses[node] == 1 && reader[node] == s + 1 &&
            elementwise(&g->nodes[plan_step_node(plan, s + 1)]))
            bytes -= node_bytes(r);
        for (int j = 0; j < r->n_in; j++) {
            sy_node src = source_of(g, graph_input(g, node, j));
            if (uses[src] == 1 && reader[src] == s && s > 0 && plan_step_node(plan, s - 1) == src &&
                elementwise(r))
                bytes -= node_bytes(&g->nodes[src]);
        }
        if (bytes < 0) bytes = 0;
        op->flops = c.flops;
        op->mxu_flops = c.flops - c.vector_flops;
        op->bytes = bytes;
        op->mxu_cycles = mxu_cycles(&c, chip, arrays);
        op->vector_cycles = c.vector_flops / vector_rate * clock;
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
    sy_free(uses), sy_free(reader), sy_free(fed);
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
    if (o.replicas > 1 && p->gradient_bytes > 0 && chip->ici_link_bytes_per_s > 0)
        p->allreduce_s = 2.0 * (rr - 1) / rr * p->gradient_bytes / chip->ici_link_bytes_per_s +
                         2.0 * (rr - 1) * chip->ici_latency_s;
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
