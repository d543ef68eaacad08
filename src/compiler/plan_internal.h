/*
 * plan_internal.h - a compiled plan's structures, shared by the compiler
 * (plan.c) and its reports (plan_report.c: the schedule's dump, the plan's
 * summary, the $SYSTOLIC_PROFILE report).
 *
 * A plan is a schedule of steps, one kernel each, over values placed in
 * blocks: the arena (activations, inputs, workspaces; offsets from
 * liveness), the variable store's parameters and slots, the gradient block
 * and the constants.
 */
#ifndef SY_PLAN_INTERNAL_H
#define SY_PLAN_INTERNAL_H

#include "compiler_internal.h"

enum { BLK_NONE, BLK_ARENA, BLK_PARAMS, BLK_SLOTS, BLK_GRADS, BLK_CONST };

typedef struct place {
    uint8_t block;
    int64_t offset;
} place;

typedef struct step {
    const sy_kernel *kernel;
    sy_node node;
    int32_t in_first; /* into the plan's per-input arrays */
    place out, ws;
    int64_t ws_bytes;
    sy_kargs args;
    bool round_bf16; /* issue 16, mixed_bfloat16: the output is rounded to bfloat16 after the kernel
                      */
    bool out_bf16; /* issue 16, bfloat16 storage: the kernel writes its output as bfloat16 (rounding
                      it) */
    int64_t cvt_bytes; /* inputs the plan converts from bfloat16 for it (plan.cvt): their share of
                          the workspace */
    int8_t bf16_act; /* a bf16 matmul/conv2d with a fused epilogue: its act (the kernel runs without
                        bias and act, sy_bf16_epilogue after it); -1: none */
    sy_attrs bf16_attr; /* the kernel's attributes then, act cleared */
    sy_node side; /* issue 21: the side output its kernel also writes (args.aux), or SY_NONE */
    sy_node over; /* issue 21, in place: the input whose buffer its output takes (it dies here), or SY_NONE */
} step;

struct sy_plan {
    sy_graph *g; /* the rewritten copy: owns names and fused programs */
    bool tpu_view; /* issue 16: compiled for the cost model only (sy_plan_options.tpu_view): nothing allocated */
    const sy_backend *backend;
    sy_vars *vars;
    bool owns_vars;
    uint64_t bound_generation;
    step *steps;
    int32_t n_steps;
    place *places;      /* per node */
    int32_t *remap;     /* per node: the node now holding its value */
    sy_dtype *store;    /* per node: how its buffer stores it (issue 16: SY_BF16, or its dtype) */
    int32_t *var_index; /* per node: PARAM -> index in vars */
    bool *readable;     /* per node: may be read after a run */
    void **in_ptrs;
    sy_shape *in_shapes;
    sy_dtype *in_dtypes;
    place *in_places;
    bool *cvt; /* per input: stored as bfloat16, read as float32 by its kernel: the plan converts it
                */
    void **cvt_src; /* per input: the bfloat16 buffer the conversion reads */
    char *arena, *grads, *consts;
    sy_node *grad_params, *grad_nodes;
    int32_t n_grads;
    sy_exec ex;
    bool has_updates;
    bool has_optimizer;   /* some update is an optimizer's: a run counts an iteration */
    int32_t first_update; /* steps [first_update, n_steps) are the optimizer's */
    double *profile;      /* seconds per step, summed over runs, when $SYSTOLIC_PROFILE is set */
    int64_t profile_runs;
    sy_plan_info info;
    /* issue 17, optimizers: the prologue of the updates (optimizer_before_update) */
    sy_optimizer optimizer;
    optimizer_var *opt_vars; /* per optimizer update step, rebound with the store */
    int32_t n_opt_vars;
    void *u_product; /* Nadam's, in the slot block */
    char **origin;   /* issue 21, per node (n_origin): the graph's ops a fused node stands for
                        (fusion.c), or NULL */
    int64_t n_origin;
};

/* Where a place's bytes are now (the store's blocks may move). */
void *plan_resolve(const sy_plan *p, place pl);
/* The node whose buffer holds n's value: through remaps and views. */
sy_node plan_storage_of(const sy_plan *p, sy_node n);
/* $SYSTOLIC_PROFILE: at plan_free, the steps that took the most time, then the time summed by op.
 */
void plan_profile_report(const sy_plan *p);

#endif
