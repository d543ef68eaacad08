/*
 * systolic/profile.h - the emulated TPU's clock: what a compiled step costs
 * on a chip, op by op (issue 16; docs/design/tpu-cost-model.md has every
 * formula and its sources).
 *
 * Two layers:
 *
 *   - the matrix unit's formula (backend/sim/mxu_cost.c): the cycles of one
 *     (M, K, N) product on F weight-stationary R x C systolic arrays; with
 *     F = 1 it is SCALE-Sim's weight-stationary compute model exactly;
 *   - the pass over a plan (compiler/cost.c): each step's op cost (the op
 *     registry's cost function) placed on a chip -- matrix-unit, vector-unit
 *     and memory time, the op bound by the largest -- plus the step's
 *     infeed, the gradients' all-reduce among the replicas (a ring on one
 *     host; along the dimensions of a pod slice's 2-D or 3-D torus, issue
 *     20) and the host round trip that steps_per_execution amortises.
 *
 *   const sy_tpu_chip *chip = sy_tpu_chip_find("v2");
 *   sy_profile_options o = sy_profile_options_default();
 *   o.replicas = 8;
 *   sy_profile *prof;
 *   if (sy_plan_profile(train_plan, chip, &o, &prof) == SY_OK) {
 *       printf("%.2f ms/step\n", 1e3 * prof->step_s);
 *       sy_profile_free(prof);
 *   }
 */
#ifndef SYSTOLIC_PROFILE_H
#define SYSTOLIC_PROFILE_H

#include "systolic/compiler.h"
#include "systolic/tpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- the matrix unit ------------------------------------------------------- */

/* Folds of a (M, K, N) product on an R x C array: the K x N operand is cut
 * into ceil(K / R) * ceil(N / C) tiles, each loaded into the array once. */
int64_t sy_mxu_folds(int64_t k, int64_t n, int64_t rows, int64_t cols);

/* Cycles of a (M, K, N) product -- M rows streamed through a K x N
 * weight-stationary operand -- on `arrays` R x C arrays with no memory
 * stalls: each fold takes R cycles to shift its weights in, R + C - 2 to
 * fill and drain the array's skew and M to stream the rows, and the folds
 * are shared out among the arrays (when there are fewer folds than arrays,
 * the rows are split among the arrays holding the same fold):
 *
 *   folds_per_array * (2R + C + M_per_array - 2) - 1
 *
 * The final -1: SCALE-Sim numbers cycles from 0 and reports the last one.
 * With arrays = 1 this is SCALE-Sim's weight-stationary compute cycles
 * (scale-sim-v2 scalesim/compute/systolic_compute_ws.py): 11,199 for its
 * M=256, K=256, N=128 GEMM and 112,283 for AlexNet's conv1 on 32 x 32.
 *
 * double_buffered: the next fold's weights shift in while the rows stream
 * through the current one, and folds follow each other without draining
 * (a TPU's MXU; the cost pass uses this):
 *
 *   R + (folds_per_array - 1) * max(M_per_array, R) + M_per_array + R + C - 3
 *
 * the same as above for a single fold. Arguments < 1 give 0. */
int64_t sy_mxu_ws_cycles(int64_t m, int64_t k, int64_t n, int64_t rows, int64_t cols,
                         int64_t arrays, bool double_buffered);

/* ---- a step on a chip -------------------------------------------------------- */

typedef enum sy_bound {
    SY_BOUND_MXU,          /* the matrix units */
    SY_BOUND_VECTOR,       /* the vector unit */
    SY_BOUND_MEMORY,       /* HBM bandwidth */
    SY_BOUND_INFEED,       /* the host's infeed */
    SY_BOUND_INTERCONNECT, /* the gradients' all-reduce */
    SY_BOUND_HOST          /* the host round trip */
} sy_bound;

/* "mxu", "vector", "memory", "infeed", "interconnect", "host". */
const char *sy_bound_name(sy_bound bound);

typedef struct sy_profile_options {
    int32_t replicas; /* replicas sharing the step (default: the chip's replicas per chip) */
    int32_t steps_per_execution; /* steps per host round trip (default 1) */
} sy_profile_options;

sy_profile_options sy_profile_options_default(void);

typedef struct sy_profile_op {
    const char *op;    /* the op's name ("matmul", "conv2d", ...) */
    const char *name;  /* the node's scoped name */
    const char *layer; /* its layer: the name up to its last '/' ("" if none) */
    double flops, mxu_flops, bytes;
    double mxu_cycles, vector_cycles, memory_cycles; /* at the chip's clock */
    double mxu_utilization; /* mxu_flops / (what the replica's arrays could do in mxu_cycles); 0
                               without products */
    sy_bound bound;         /* the largest of the three */
    double seconds;         /* the largest of the three, in seconds */
    double share;           /* seconds / the step's seconds */
    bool bf16;              /* its output is bfloat16 in HBM: a bf16 op of the model's dtype policy
                               (mixed_bfloat16) */
} sy_profile_op;

typedef struct sy_profile {
    const sy_tpu_chip *chip;
    int32_t replicas, steps_per_execution;
    int64_t batch; /* per replica: the leading dimension of the plan's first input */
    int32_t n_ops;
    sy_profile_op *ops;    /* one per step of the plan, in schedule order */
    double flops, bytes;   /* summed over the ops, one replica */
    double compute_s;      /* the ops' seconds, summed */
    double infeed_bytes;   /* the inputs the plan reads, one replica */
    double infeed_s;       /* at the replica's share of the chip's infeed bandwidth */
    double infeed_stall_s; /* what infeed adds: it overlaps the previous step's compute, so max(0,
                              infeed - compute) */
    double gradient_bytes; /* one replica's gradients */
    double allreduce_s;    /* sy_allreduce_seconds over the slice's topology */
    sy_tpu_topology topology; /* issue 20: the slice the replicas make (sy_tpu_slice_topology);
                                 rank 0 when the replica count is no slice of the chip's (a ring) */
    double host_s;         /* host round trip / steps_per_execution */
    double step_s;         /* compute + infeed stall + all-reduce + host */
    double samples_per_s;  /* batch * replicas / step_s */
    sy_bound bound;        /* what the step spends most on */
    int32_t bf16_ops;      /* the ops whose output is bfloat16 (0 under the float32 policy) */
} sy_profile;

/* issue 20, pods on paper: the seconds of the gradients' all-reduce, `bytes` on each of
 * `replicas` replicas, over the ICI of a slice of topology t (docs/design/tpu-cost-model.md
 * section 6). Dimension by dimension, rings reduce-scatter the data, then all-gather it back in
 * the reverse order: the first dimension's rings hold every replica of its chips (a chip's
 * replicas neighbours on the ring), each later dimension's rings the replicas holding the same
 * piece, a chip's replicas sharing its links. A ring of m over B bytes takes
 *
 *   2 ((m-1)/m x B x sharing / (links x link bandwidth) + (m-1) x hop latency)
 *
 * (reduce-scatter and all-gather), B divided by m for the next dimension; links = 2 on a wrapped
 * dimension (a torus ring runs both ways round), 1 on a line. The dimensions go in the order that
 * takes least time. A one-dimensional, unwrapped topology of R replicas -- one host's ring (-8
 * slices), or t NULL or rank 0 or not R replicas: any replica count -- is issue 16's ring,
 * 2 (R-1)/R B / link bandwidth + 2 latency. 0 for fewer than 2 replicas or no bytes. */
double sy_allreduce_seconds(const sy_tpu_chip *chip, const sy_tpu_topology *t, int32_t replicas,
                            double bytes);

/* The cost of one step of `plan` (a training step or predict) on `chip`,
 * each replica running the plan as compiled (its inputs' leading dimension
 * is the per-replica batch). Each value's bytes in HBM follow the plan's
 * dtype policy, as XLA stores them: a bf16 op's output (Keras's
 * mixed_bfloat16) in bfloat16, every other value -- variables, gradients,
 * optimizer slots, what Keras computes in float32 -- at its dtype.
 * SY_ERR_INVALID_ARGUMENT for a NULL plan or chip, a replica count < 1 or
 * steps_per_execution < 1. *out is freed with sy_profile_free; its strings
 * live as long as it. */
sy_status sy_plan_profile(const sy_plan *plan, const sy_tpu_chip *chip,
                          const sy_profile_options *options, sy_profile **out);
void sy_profile_free(sy_profile *profile);

#ifdef __cplusplus
}
#endif

#endif
