/*
 * compiler_internal.h - what the compiler's passes share: the variable store
 * layout, the roles nodes play in a plan, and the pass entry points.
 *
 * Pipeline (plan.c): clone the graph -> autodiff (autodiff.c) -> optimizer
 * update ops -> prune to what the roots need -> fusion (fusion.c) ->
 * schedule -> buffer plan (memplan.c) -> bind kernels.
 */
#ifndef SY_COMPILER_INTERNAL_H
#define SY_COMPILER_INTERNAL_H

#include "systolic/compiler.h"
#include "../graph/graph_internal.h"

/* ---- variable store ---------------------------------------------------- */

typedef enum sy_var_kind { SY_VAR_PARAM, SY_VAR_SLOT } sy_var_kind;

typedef struct sy_var {
    char *name;
    sy_var_kind kind;
    sy_dtype dtype;
    sy_shape shape;
    int64_t offset; /* bytes into its block */
    int64_t bytes;
} sy_var;

struct sy_vars {
    sy_var *vars;
    int64_t n_vars, cap_vars;
    char *block[2]; /* [SY_VAR_PARAM], [SY_VAR_SLOT] */
    int64_t block_bytes[2];
    int64_t block_cap[2]; /* bytes allocated: grown geometrically, so adding variables one by one (a model's
                             layers as they are built) copies each value O(1) times, not once per later variable */
    uint64_t generation; /* bumped when a block moves */
    int64_t iterations;
};

/* A variable the store should hold: found (shape and dtype checked) or
 * created and initialised. Creation is batched: vars_request() records,
 * vars_commit() grows the blocks once and initialises the new ones. */
typedef struct sy_var_request {
    const char *name;
    sy_var_kind kind;
    sy_dtype dtype;
    sy_shape shape;
    sy_init init;
    int32_t index; /* out: index in the store */
} sy_var_request;

sy_status vars_resolve(sy_vars *v, sy_var_request *req, int64_t n);

/* ---- passes -------------------------------------------------------------- */

/* Reverse-mode autodiff: adds to g the nodes computing d loss / d p for each
 * trainable parameter that the loss depends on. grads[i] receives the node
 * of params[i]'s gradient, or SY_NONE if the loss does not depend on it.
 * grad_of (issue 21; NULL: not wanted), one per node g had before: the node
 * holding the gradient of that node's value (its consumers' contributions
 * summed), or SY_NONE -- how the fusion pass finds an op's gradient ops. */
sy_status autodiff(sy_graph *g, sy_node loss, const sy_node *params, int n_params, sy_node *grads,
                   sy_node *grad_of);

/* Fusion over the live nodes of g. live[] and key[] (schedule position)
 * cover every node and are extended for nodes fusion adds (arrays of
 * capacity *cap, grown through SY_GROW). protect[] marks nodes whose values
 * must be materialised. remap[] is updated: remap[old] = new for replaced
 * roots. Returns the number of ops folded away. */
typedef struct sy_fusion_state {
    bool *live;
    bool *protect;
    int64_t *key;
    int32_t *remap;
    char **origin; /* issue 21: the graph's ops a fused node stands for ("a + b"), owned; NULL:
                      itself */
    int64_t cap;
    /* issue 21, conv -> pool fusion: the backend whose kernels run the fused ops
     * (sy_backend.fuses), the plan's kind, and autodiff's gradient of each node it saw (n_grad_of
     * of them; NULL: none) */
    const sy_backend *backend;
    bool inference;
    bool tpu_view; /* issue 16: the plan as the TPU runs it: no conv -> pool fusion */
    const sy_node *grad_of;
    int64_t n_grad_of;
} sy_fusion_state;

sy_status fuse(sy_graph *g, sy_fusion_state *s, int32_t *folded);
sy_status fusion_grow(sy_fusion_state *s, int64_t need);

/* Validate an optimizer's hyperparameters; add the update op (and its slot
 * variables) for one parameter. */
sy_status optimizer_check(const sy_optimizer *o);
sy_node optimizer_add_update(sy_graph *g, const sy_optimizer *o, sy_node param, sy_node grad);
/* issue 17, optimizers: what runs once a step before the update ops, on the
 * gradients after the replicas' all-reduce -- gradient clipping, weight decay,
 * Nadam's u_product -- over every (weight, gradient) pair the updates take, in
 * update order. optimizer_has_prologue: whether o needs it at all. */
typedef struct optimizer_var {
    void *w, *g; /* of dtype, n elements each */
    int64_t n;
    sy_dtype dtype;
} optimizer_var;
#define NADAM_U_PRODUCT "Nadam/u_product" /* the store's name of Nadam's u_product */
bool optimizer_has_prologue(const sy_optimizer *o);
void optimizer_before_update(const sy_optimizer *o, float lr, int64_t iterations, const optimizer_var *vars,
                             int32_t n, void *u_product);

/* Offsets for buffers with lifetimes [first, last] (inclusive step indices)
 * so that no two buffers alive at the same step overlap; greedy by size.
 * Returns the total size. */
typedef struct sy_buffer_req {
    int64_t bytes;
    int32_t first, last;
    int64_t offset; /* out */
} sy_buffer_req;

sy_status memplan(sy_buffer_req *bufs, int64_t n, int64_t *total);

/* ---- running parts of a plan (distribute's replicas) --------------------------------
 * plan_prepare once per run (re-binds moved variables, takes the step
 * count, clears the failure flag), then plan_run_steps over ranges of the
 * schedule; the optimizer's steps are [plan_first_update, plan_step_count).
 * Different update steps of one plan may run on different threads at once
 * (each writes only its own parameter) when the plan's kernels run on one
 * thread. */
void plan_prepare(sy_plan *p);
sy_status plan_run_steps(sy_plan *p, int32_t first, int32_t last);
int32_t plan_step_count(const sy_plan *p);
int32_t plan_first_update(const sy_plan *p);
int64_t plan_step_elements(const sy_plan *p, int32_t step); /* of the step's first input */
/* issue 17, optimizers: once a step, after the all-reduce and before the update steps */
void plan_before_update(sy_plan *p);
bool plan_has_before_update(const sy_plan *p);
/* issue 16, cost validation: the bytes of node n's value as a TPU stores it under XLA -- a bf16
 * op's float output (Keras's mixed_bfloat16 policy) 2 an element, any other value its dtype's
 * (cost.c; the HBM check counts activations with it) */
double cost_stored_bytes(const sy_graph *g, sy_node n);
/* issue 16, cost model: the plan's rewritten graph, and the node step `step` computes */
const sy_graph *plan_graph(const sy_plan *p);
sy_node plan_step_node(const sy_plan *p, int32_t step);
/* issue 21: the side output step `step`'s kernel also writes (a pool_argmax), or SY_NONE */
sy_node plan_step_side(const sy_plan *p, int32_t step);
/* issue 16, bfloat16 storage (tests): whether step `step`'s kernel writes its output as bfloat16;
 * bit j of *bf16_in: it reads input j as bfloat16; of *converted: the plan converts input j to
 * float32 for it. */
bool plan_step_bf16(const sy_plan *p, int32_t step, uint32_t *bf16_in, uint32_t *converted);

#endif
