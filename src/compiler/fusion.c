/*
 * fusion.c - folding elementwise work into the ops around it, so that
 * intermediate tensors are never written to memory.
 *
 * Two rewrites, both on the plan's private copy of the graph, after
 * autodiff (so gradient rules only ever see plain ops):
 *
 * 1. Epilogues. matmul or conv2d -> bias_add -> relu|sigmoid|tanh becomes
 *    one matmul/conv2d with a bias input and an activation attribute: the
 *    kernel applies them to each output tile while it is still in cache.
 *    The pre-activation values are not kept; no gradient needs them (the
 *    activations' gradients read the output).
 *
 * 2. Elementwise chains. A maximal tree of elementwise ops, each feeding only
 *    the next and all of one shape, becomes one fused_eltwise op running a
 *    small register program over tiles of the output. Operands from outside
 *    the chain are loaded full-size, as a row broadcast along the last axis
 *    (a bias), or as a scalar; any other broadcast keeps its op unfused.
 *
 *    A BatchNormalization after a conv is not folded into the conv's kernel
 *    (w * scale): at inference (the only place its statistics do not
 *    depend on the conv) the rounding of w * scale, amplified through a
 *    deep network, moved ResNet50's predictions 8 times further from
 *    Keras's (at 32x32, with direct convs: 4.3e-5 of the largest output
 *    0.17 folded, 5.5e-6 not). It runs as one fused elementwise pass after
 *    the conv, in Keras's order.
 *
 * A node whose value the plan must keep (the loss, a requested output, a
 * parameter's gradient) may end a chain but is never folded into one.
 */
#include "compiler_internal.h"

#include <string.h>

sy_status fusion_grow(sy_fusion_state *s, int64_t need) {
    if (need <= s->cap) return SY_OK;
    int64_t cap = s->cap, c1 = cap, c2 = cap, c3 = cap;
    if (SY_GROW(s->live, c1, need) || SY_GROW(s->protect, c2, need) || SY_GROW(s->key, c3, need) ||
        SY_GROW(s->remap, cap, need))
        return sy_error(SY_ERR_OUT_OF_MEMORY, "fusion: out of memory");
    s->cap = cap;
    return SY_OK;
}

/* Uses of each live node by live nodes, and (if exactly one) the user. */
static sy_status count_uses(const sy_graph *g, const sy_fusion_state *s, int32_t **uses, sy_node **user) {
    int64_t n = g->n_nodes;
    *uses = sy_calloc((size_t)n, sizeof **uses);
    *user = sy_malloc((size_t)n * sizeof **user);
    if (!*uses || !*user) return sy_error(SY_ERR_OUT_OF_MEMORY, "fusion: out of memory");
    for (int64_t i = 0; i < n; i++) (*user)[i] = SY_NONE;
    for (int64_t i = 0; i < n; i++) {
        if (!s->live[i]) continue;
        for (int j = 0; j < g->nodes[i].n_in; j++) {
            sy_node in = graph_input(g, (sy_node)i, j);
            (*uses)[in]++;
            (*user)[in] = (sy_node)i;
        }
    }
    return SY_OK;
}

/* Make `fresh` stand for `old` (the last node of a folded group). */
static void replace(sy_graph *g, sy_fusion_state *s, sy_node old, sy_node fresh) {
    s->live[fresh] = true;
    s->key[fresh] = s->key[old];
    s->protect[fresh] = s->protect[old];
    s->remap[fresh] = fresh;
    s->remap[old] = fresh;
    s->live[old] = false;
    /* issue 16, cost model: the fused node takes the name of the node it stands for, so the plan's dump and its
     * profile say which layer it belongs to */
    char *name = g->nodes[old].name ? sy_strdup(g->nodes[old].name) : NULL;
    if (name) {
        sy_free(g->nodes[fresh].name);
        g->nodes[fresh].name = name;
    }
    for (int64_t i = 0; i < g->n_nodes; i++) {
        if (!s->live[i] || i == fresh) continue;
        for (int j = 0; j < g->nodes[i].n_in; j++)
            if (g->edges[g->nodes[i].in_off + j] == old) g->edges[g->nodes[i].in_off + j] = fresh;
    }
}

static bool sole_use(const sy_fusion_state *s, const int32_t *uses, sy_node n) { return uses[n] == 1 && !s->protect[n]; }

static sy_status fuse_epilogues(sy_graph *g, sy_fusion_state *s, int32_t *folded) {
    int32_t *uses = NULL;
    sy_node *user = NULL;
    sy_status st = count_uses(g, s, &uses, &user);
    int64_t n0 = g->n_nodes;
    for (int64_t m = 0; st == SY_OK && m < n0; m++) {
        sy_node_rec *r = &g->nodes[m];
        if (!s->live[m] || (r->op != SY_OP_MATMUL && r->op != SY_OP_CONV2D) || r->n_in != 2) continue;
        if ((r->op == SY_OP_MATMUL && r->attr.matmul.act) || (r->op == SY_OP_CONV2D && r->attr.conv.act)) continue;
        sy_node last = (sy_node)m, bias = SY_NONE;
        int act = SY_ACT_NONE, absorbed = 0;
        /* issue 16, mixed_bfloat16: a bf16 product takes a bf16 bias and activation only, which the plan then
         * applies with TensorFlow's roundings between them (sy_bf16_epilogue) */
        bool bf16 = r->bf16;
        if (sole_use(s, uses, last)) {
            sy_node c = user[last];
            if (g->nodes[c].op == SY_OP_BIAS_ADD && g->nodes[c].bf16 == bf16 && graph_input(g, c, 0) == last) {
                bias = graph_input(g, c, 1);
                last = c;
                absorbed++;
            }
        }
        sy_op conv_op = r->op; /* r moves when graph_add grows the node array */
        if (sole_use(s, uses, last)) {
            sy_node c = user[last];
            sy_op op = g->nodes[c].op;
            if ((op == SY_OP_RELU || op == SY_OP_SIGMOID || op == SY_OP_TANH) && g->nodes[c].bf16 == bf16) {
                act = op == SY_OP_RELU ? SY_ACT_RELU : op == SY_OP_SIGMOID ? SY_ACT_SIGMOID : SY_ACT_TANH;
                last = c;
                absorbed++;
            }
        }
        if (!absorbed) continue;
        sy_attrs at = r->attr;
        if (r->op == SY_OP_MATMUL) at.matmul.act = (uint8_t)act;
        else at.conv.act = (uint8_t)act;
        sy_node in[3] = {graph_input(g, (sy_node)m, 0), graph_input(g, (sy_node)m, 1), bias};
        sy_node fresh = graph_add(g, conv_op, in, bias == SY_NONE ? 2 : 3, &at, NULL);
        if (fresh == SY_NONE) {
            st = sy_graph_status(g);
            break;
        }
        g->nodes[fresh].bf16 = g->nodes[last].bf16;
        if ((st = fusion_grow(s, g->n_nodes))) break;
        /* the matmul and bias_add die; the activation's consumers now read fresh */
        s->live[m] = false;
        if (bias != SY_NONE) s->live[user[m]] = false;
        replace(g, s, last, fresh);
        *folded += absorbed;
    }
    sy_free(uses);
    sy_free(user);
    return st;
}

/* How an operand of shape `in` is read by an elementwise op of shape `out`. */
static int load_kind(const sy_shape *in, const sy_shape *out) {
    if (sy_shape_equal(in, out)) return SY_E_LD_FULL;
    if (sy_shape_count(in) == 1) return SY_E_LD_SCALAR;
    if (out->rank >= 1 && in->rank >= 1 && in->dims[in->rank - 1] == out->dims[out->rank - 1] &&
        sy_shape_count(in) == in->dims[in->rank - 1] && in->rank <= out->rank)
        return SY_E_LD_ROW;
    return -1;
}

static bool eligible(const sy_graph *g, const sy_fusion_state *s, sy_node e) {
    const sy_node_rec *r = &g->nodes[e];
    if (!s->live[e] || !(sy_op_def_of(r->op)->flags & SY_OPF_ELTWISE)) return false;
    if (r->dtype != SY_F32 && r->dtype != SY_F64) return false;
    for (int j = 0; j < r->n_in; j++)
        if (load_kind(&graph_in_rec(g, r, j)->shape, &r->shape) < 0) return false;
    return true;
}

typedef struct group {
    sy_node members[SY_FUSED_MAX_INSNS];
    int n;
    sy_node ext[SY_KMAX_IN];
    int n_ext;
} group;

/* Register program for a group (members in topological order). False if it
 * does not fit the limits; the group is then left unfused. */
static bool build_program(const sy_graph *g, group *gr, sy_eprog *p) {
    int reg_of[SY_FUSED_MAX_INSNS], uses_left[SY_FUSED_MAX_INSNS];
    bool busy[SY_FUSED_MAX_REGS] = {false};
    memset(p, 0, sizeof *p);
    gr->n_ext = 0;
    for (int i = 0; i < gr->n; i++) {
        uses_left[i] = 0;
        for (int k = i + 1; k < gr->n; k++)
            for (int j = 0; j < g->nodes[gr->members[k]].n_in; j++)
                if (graph_input(g, gr->members[k], j) == gr->members[i]) uses_left[i]++;
    }
#define ALLOC_REG(r)                                                                               \
    do {                                                                                           \
        r = -1;                                                                                    \
        for (int q = 0; q < SY_FUSED_MAX_REGS; q++)                                                \
            if (!busy[q]) {                                                                        \
                r = q;                                                                             \
                break;                                                                             \
            }                                                                                      \
        if (r < 0) return false;                                                                   \
        busy[r] = true;                                                                            \
    } while (0)
#define EMIT(o, d, x, y)                                                                           \
    do {                                                                                           \
        if (p->n >= SY_FUSED_MAX_INSNS) return false;                                              \
        p->insn[p->n++] = (sy_einsn){(uint8_t)(o), (uint8_t)(d), (uint8_t)(x), (uint8_t)(y)};      \
    } while (0)
    for (int i = 0; i < gr->n; i++) {
        sy_node m = gr->members[i];
        const sy_node_rec *r = &g->nodes[m];
        int opr[2] = {0, 0};
        bool temp[2] = {false, false};
        for (int j = 0; j < r->n_in; j++) {
            sy_node in = graph_input(g, m, j);
            int k = -1;
            for (int q = 0; q < i; q++)
                if (gr->members[q] == in) k = q;
            if (k >= 0) {
                opr[j] = reg_of[k];
                if (--uses_left[k] == 0) temp[j] = true; /* last use: free after */
                continue;
            }
            int e = -1;
            for (int q = 0; q < gr->n_ext; q++)
                if (gr->ext[q] == in) e = q;
            if (e < 0) {
                if (gr->n_ext >= SY_KMAX_IN) return false;
                e = gr->n_ext++;
                gr->ext[e] = in;
            }
            int reg;
            ALLOC_REG(reg);
            EMIT(load_kind(&g->nodes[in].shape, &r->shape), reg, e, 0);
            opr[j] = reg;
            temp[j] = true;
        }
        for (int j = 0; j < r->n_in; j++)
            if (temp[j]) busy[opr[j]] = false;
        int dst;
        ALLOC_REG(dst);
        EMIT(sy_op_def_of(r->op)->eop, dst, opr[0], r->n_in > 1 ? opr[1] : 0);
        if (r->op == SY_OP_ACT || r->op == SY_OP_ACT_GRAD) p->act[p->n - 1] = r->attr.act; /* its function */
        reg_of[i] = dst;
    }
#undef ALLOC_REG
#undef EMIT
    p->out = reg_of[gr->n - 1];
    return true;
}

static sy_status fuse_chains(sy_graph *g, sy_fusion_state *s, int32_t *folded) {
    int32_t *uses = NULL;
    sy_node *user = NULL;
    sy_status st = count_uses(g, s, &uses, &user);
    int64_t n0 = g->n_nodes;
    sy_node *parent = sy_malloc((size_t)n0 * sizeof *parent);
    if (!st && !parent) st = sy_error(SY_ERR_OUT_OF_MEMORY, "fusion: out of memory");
    for (int64_t e = 0; st == SY_OK && e < n0; e++) {
        parent[e] = SY_NONE;
        if (!eligible(g, s, (sy_node)e) || !sole_use(s, uses, (sy_node)e)) continue;
        sy_node c = user[e];
        /* issue 16, mixed_bfloat16: a fused chain rounds only its result, so a bf16 op folds only into a bf16
         * relu, which commutes with the rounding */
        bool exact = !g->nodes[e].bf16 || (g->nodes[c].op == SY_OP_RELU && g->nodes[c].bf16);
        if (exact && eligible(g, s, c) && sy_shape_equal(&g->nodes[e].shape, &g->nodes[c].shape)) parent[e] = c;
    }
    /* Each chain is a tree whose root folds into nobody. A consumer comes
     * after its producers, so one backward sweep finds every node's root, and
     * a forward sweep lists each root's members in topological order. */
    sy_node *top = st ? NULL : sy_malloc((size_t)n0 * sizeof *top);
    sy_node *next = st ? NULL : sy_malloc((size_t)n0 * sizeof *next);
    sy_node *head = st ? NULL : sy_malloc((size_t)n0 * 2 * sizeof *head), *tail = head ? head + n0 : NULL;
    if (!st && (!top || !next || !head)) st = sy_error(SY_ERR_OUT_OF_MEMORY, "fusion: out of memory");
    for (int64_t e = n0 - 1; st == SY_OK && e >= 0; e--) top[e] = parent[e] == SY_NONE ? (sy_node)e : top[parent[e]];
    for (int64_t e = 0; st == SY_OK && e < n0; e++) head[e] = tail[e] = next[e] = SY_NONE;
    for (int64_t e = 0; st == SY_OK && e < n0; e++) {
        if (!eligible(g, s, (sy_node)e)) continue;
        sy_node t = top[e];
        if (head[t] == SY_NONE) head[t] = (sy_node)e;
        else next[tail[t]] = (sy_node)e;
        tail[t] = (sy_node)e;
    }
    for (int64_t root = 0; st == SY_OK && root < n0; root++) {
        if (head[root] == SY_NONE || top[root] != (sy_node)root || !eligible(g, s, (sy_node)root)) continue;
        group gr = {.n = 0};
        bool overflow = false;
        for (sy_node e = head[root]; e != SY_NONE; e = next[e]) {
            if (gr.n >= SY_FUSED_MAX_INSNS) {
                overflow = true;
                break;
            }
            gr.members[gr.n++] = e;
        }
        if (overflow || gr.n < 2) continue;
        sy_eprog *prog = sy_malloc(sizeof *prog);
        if (!prog) {
            st = sy_error(SY_ERR_OUT_OF_MEMORY, "fusion: out of memory");
            break;
        }
        if (!build_program(g, &gr, prog)) {
            sy_free(prog);
            continue;
        }
        if ((st = graph_own_prog(g, prog))) break;
        sy_attrs at;
        memset(&at, 0, sizeof at);
        at.fused = prog;
        sy_shape shape = g->nodes[root].shape;
        sy_node fresh = graph_add(g, SY_OP_FUSED_ELTWISE, gr.ext, gr.n_ext, &at, &shape);
        if (fresh == SY_NONE) {
            st = sy_graph_status(g);
            break;
        }
        g->nodes[fresh].bf16 = g->nodes[root].bf16;
        if ((st = fusion_grow(s, g->n_nodes))) break;
        for (int i = 0; i < gr.n - 1; i++) s->live[gr.members[i]] = false;
        replace(g, s, (sy_node)root, fresh);
        *folded += gr.n - 1;
    }
    sy_free(parent);
    sy_free(top);
    sy_free(next);
    sy_free(head);
    sy_free(uses);
    sy_free(user);
    return st;
}

sy_status fuse(sy_graph *g, sy_fusion_state *s, int32_t *folded) {
    *folded = 0;
    sy_status st = fuse_epilogues(g, s, folded);
    return st ? st : fuse_chains(g, s, folded);
}
