/*
 * systolic/compiler.h - compiling a graph once into a plan, and running it.
 *
 * A plan is the graph's step program for one set of static shapes: for
 * training, forward + loss + backward (reverse-mode autodiff) + optimizer
 * update; for evaluation or prediction, forward only. Compiling fuses
 * elementwise chains into their producers, schedules the ops, plans every
 * buffer ahead by liveness, and binds each op to a kernel of the chosen
 * backend. Memory comes in four blocks: parameters and optimizer slots (in a
 * variable store, sy_vars, that plans share), gradients, and one activation
 * arena. Running a compiled plan allocates nothing.
 *
 *   sy_plan_options o = sy_plan_options_default();
 *   o.loss = loss;                          // a scalar node
 *   o.optimizer = sy_optimizer_adam(1e-3f);
 *   sy_plan *train;
 *   if (sy_plan_compile(g, &o, &train)) fprintf(stderr, "%s\n", sy_last_error());
 *   memcpy(sy_plan_input(train, x), batch, bytes);
 *   sy_plan_run(train);
 *   float loss_value = *(const float *)sy_plan_output(train, loss);
 */
#ifndef SYSTOLIC_COMPILER_H
#define SYSTOLIC_COMPILER_H

#include "systolic/core.h"
#include "systolic/graph.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- optimizers (tf.keras 2.x update rules and defaults) ---------------- */

typedef enum sy_optimizer_kind {
    SY_OPTIMIZER_NONE,
    SY_OPTIMIZER_SGD,
    SY_OPTIMIZER_ADAM,
    SY_OPTIMIZER_RMSPROP,
    /* issue 17, optimizers: the rest of tf.keras 2.15's built-ins */
    SY_OPTIMIZER_ADAMW,
    SY_OPTIMIZER_ADADELTA,
    SY_OPTIMIZER_ADAGRAD,
    SY_OPTIMIZER_ADAMAX,
    SY_OPTIMIZER_ADAFACTOR,
    SY_OPTIMIZER_NADAM,
    SY_OPTIMIZER_FTRL,
    SY_OPTIMIZER_LION,
    SY_OPTIMIZER_KIND_COUNT
} sy_optimizer_kind;

/* issue 17, learning-rate schedules: tf.keras 2.15's
 * keras.optimizers.schedules, evaluated at the optimizer's step count
 * (iterations before the step) in float32 as Keras computes them, the same
 * on every replica and for every step of a multi-step execution
 * (docs/design/lr-schedules.md). NONE: the optimizer's learning_rate. */
typedef enum sy_lr_schedule_kind {
    SY_LR_SCHEDULE_NONE,
    SY_LR_EXPONENTIAL_DECAY,       /* initial * decay_rate ^ (step / decay_steps), floored with staircase */
    SY_LR_PIECEWISE_CONSTANT_DECAY, /* values[i] for boundaries[i-1] < step <= boundaries[i] */
    SY_LR_POLYNOMIAL_DECAY,        /* (initial - end) * (1 - step / decay_steps) ^ power + end */
    SY_LR_INVERSE_TIME_DECAY,      /* initial / (1 + decay_rate * step / decay_steps) */
    SY_LR_COSINE_DECAY,            /* optional linear warmup, then cosine from warmup_target (or initial) to alpha */
    SY_LR_COSINE_DECAY_RESTARTS,   /* SGDR: periods of decay_steps * t_mul^i, peaks initial * m_mul^i */
    SY_LR_SCHEDULE_KIND_COUNT
} sy_lr_schedule_kind;

#define SY_LR_SCHEDULE_MAX_BOUNDARIES 32

/* Keras's arguments by their names; a field a schedule does not have is
 * ignored. Steps are doubles because Keras casts them to float32 with the
 * step; a whole number is written back to a model file as an integer. */
typedef struct sy_lr_schedule {
    sy_lr_schedule_kind kind;
    double initial_learning_rate;
    double decay_steps;       /* CosineDecayRestarts: first_decay_steps */
    double decay_rate;        /* Exponential, InverseTime */
    bool staircase;           /* Exponential, InverseTime */
    double end_learning_rate; /* Polynomial (0.0001) */
    double power;             /* Polynomial (1.0) */
    bool cycle;               /* Polynomial */
    double alpha;             /* Cosine, CosineDecayRestarts (0.0) */
    bool has_warmup_target;   /* Cosine: warmup_target given (Keras's None otherwise) */
    double warmup_target, warmup_steps; /* Cosine (warmup_steps 0) */
    double t_mul, m_mul;      /* CosineDecayRestarts (2.0, 1.0) */
    int32_t n_boundaries;     /* PiecewiseConstant: boundaries[n], values[n + 1] */
    double boundaries[SY_LR_SCHEDULE_MAX_BOUNDARIES];
    double values[SY_LR_SCHEDULE_MAX_BOUNDARIES + 1];
} sy_lr_schedule;

/* Each with Keras's defaults for the arguments not passed. */
sy_lr_schedule sy_lr_exponential_decay(double initial_learning_rate, double decay_steps, double decay_rate,
                                       bool staircase);
sy_lr_schedule sy_lr_piecewise_constant_decay(int32_t n_boundaries, const double *boundaries, const double *values);
sy_lr_schedule sy_lr_polynomial_decay(double initial_learning_rate, double decay_steps, double end_learning_rate,
                                      double power, bool cycle);
sy_lr_schedule sy_lr_inverse_time_decay(double initial_learning_rate, double decay_steps, double decay_rate,
                                        bool staircase);
sy_lr_schedule sy_lr_cosine_decay(double initial_learning_rate, double decay_steps, double alpha);
sy_lr_schedule sy_lr_cosine_decay_restarts(double initial_learning_rate, double first_decay_steps, double t_mul,
                                           double m_mul, double alpha);
/* Keras's class name ("ExponentialDecay"), or NULL for NONE and unknown kinds. */
const char *sy_lr_schedule_class_name(sy_lr_schedule_kind kind);
/* SY_ERR_INVALID_ARGUMENT naming the schedule, the argument and its value:
 * PiecewiseConstantDecay with boundaries not one fewer than values (Keras's
 * message) or not strictly increasing; decay steps <= 0 (a division by zero
 * Keras would turn into NaN); warmup_steps < 0; t_mul <= 0; any value not
 * finite. NONE is fine. */
sy_status sy_lr_schedule_check(const sy_lr_schedule *schedule);
/* The learning rate at optimizer step `step` (0 for the first step). */
float sy_lr_schedule_value(const sy_lr_schedule *schedule, int64_t step);

/* The hyperparameters are doubles because Keras computes 1 - beta_1 and
 * 1 - rho from the Python floats (0.9, not 0.9f) before rounding to
 * float32; the update kernels see exactly Keras's float32 constants.
 * A field an optimizer does not have is ignored. docs/design/optimizers.md
 * gives each update rule. */
typedef struct sy_optimizer {
    sy_optimizer_kind kind;
    float learning_rate;
    double momentum; /* SGD, RMSprop */
    bool nesterov;  /* SGD */
    double beta_1, beta_2, epsilon; /* Adam, AdamW, Adamax, Nadam, Lion (betas); epsilon also RMSprop, Adadelta, Adagrad */
    bool amsgrad;   /* Adam, AdamW: use the maximum of past second moments */
    double rho;     /* RMSprop, Adadelta */
    bool centered;  /* RMSprop */
    /* issue 17, optimizers. Every optimizer: 0 means "not set" (Keras's None). weight_decay
     * is decoupled (w -= w * weight_decay * lr before the update, on every trained weight);
     * clipnorm clips each gradient's L2 norm, global_clipnorm the norm of all gradients
     * together (after the replicas' all-reduce), clipvalue each element; clipnorm and
     * global_clipnorm exclude each other, as in Keras. */
    double weight_decay, clipnorm, clipvalue, global_clipnorm;
    double initial_accumulator_value; /* Adagrad, Ftrl (0.1) */
    double beta_2_decay, epsilon_1, epsilon_2, clip_threshold; /* Adafactor */
    bool relative_step;                                        /* Adafactor */
    double learning_rate_power, l1_regularization_strength, l2_regularization_strength; /* Ftrl */
    double l2_shrinkage_regularization_strength, beta;                                  /* Ftrl */
    /* issue 17, learning-rate schedules: kind NONE (the default) uses learning_rate; otherwise
     * learning_rate is ignored and each step's rate is schedule(iterations). */
    sy_lr_schedule schedule;
} sy_optimizer;

/* Keras defaults: SGD(lr 0.01, momentum 0, nesterov False); Adam(lr 0.001,
 * beta_1 0.9, beta_2 0.999, epsilon 1e-7, amsgrad False); RMSprop(lr 0.001, rho 0.9,
 * momentum 0, epsilon 1e-7, centered False). Pass the learning rate; edit
 * the other fields of the result to change them. */
sy_optimizer sy_optimizer_sgd(float learning_rate, double momentum, bool nesterov);
sy_optimizer sy_optimizer_adam(float learning_rate);
sy_optimizer sy_optimizer_rmsprop(float learning_rate);
/* issue 17, optimizers: any kind with every hyperparameter at tf.keras 2.15's default,
 * learning rate included (Lion 1e-4, SGD 0.01, the others 1e-3; AdamW weight_decay 0.004). */
sy_optimizer sy_optimizer_keras(sy_optimizer_kind kind);
/* Keras's class name of a kind ("AdamW"), or NULL for NONE and unknown kinds. */
const char *sy_optimizer_class_name(sy_optimizer_kind kind);

/* ---- variable stores ------------------------------------------------------ */

/* Parameters (one block) and optimizer slots (one block), by name. Plans
 * compiled with the same store share them: a train plan's updates are seen
 * by an evaluate plan at once. A parameter is created (and initialised) when
 * the first plan that uses it is compiled. */
typedef struct sy_vars sy_vars;

sy_status sy_vars_new(sy_vars **out);
/* Free the store. Plans compiled against it must be freed first. */
void sy_vars_free(sy_vars *vars);
int32_t sy_vars_count(const sy_vars *vars);
/* Index of the variable named `name`, or -1. */
int32_t sy_vars_find(const sy_vars *vars, const char *name);
const char *sy_vars_name(const sy_vars *vars, int32_t index);
sy_shape sy_vars_shape(const sy_vars *vars, int32_t index);
sy_dtype sy_vars_dtype(const sy_vars *vars, int32_t index);
/* The variable's values, in place (row-major, of its dtype). Valid until a
 * plan adds variables to the store. */
void *sy_vars_data(sy_vars *vars, int32_t index);
/* Find the parameter `name` -- which must then have this dtype and shape
 * (SY_ERR_SHAPE names both otherwise) -- or create it, filled as `init`
 * says. Its index goes to *index. Creating one may move the block
 * (sy_vars_data pointers taken before are stale). */
sy_status sy_vars_add(sy_vars *vars, const char *name, sy_dtype dtype, sy_shape shape, sy_init init, int32_t *index);
/* Fill variable `index` again as `init` says (a float parameter or slot). */
sy_status sy_vars_reset(sy_vars *vars, int32_t index, sy_init init);
/* Optimizer steps applied so far (Keras's optimizer.iterations). */
int64_t sy_vars_iterations(const sy_vars *vars);

/* ---- plans ------------------------------------------------------------------ */

typedef struct sy_plan sy_plan;

typedef struct sy_plan_options {
    const char *backend;     /* "cpu" (default) or "ref" */
    sy_node loss;            /* scalar; SY_NONE: no backward pass */
    const sy_node *outputs;  /* extra nodes to read after a run */
    int n_outputs;
    sy_optimizer optimizer;  /* kind NONE with a loss: gradients only */
    sy_vars *vars;           /* shared store; NULL: the plan makes its own */
    sy_pool *pool;           /* threads for kernels; NULL: one thread */
    int threads;             /* how many of the pool's threads (0: all) */
    bool fuse;               /* fuse elementwise chains (default true) */
    uint64_t seed;           /* this plan's random stream (dropout) */
    /* issue 16, sim devices: the memory of the device the plan stands for
     * (a TPU core's share of its chip's HBM), bytes; 0: none. A plan whose
     * weights, optimizer slots, gradients and activations need more is
     * refused before anything is allocated (SY_ERR_OUT_OF_MEMORY, each
     * size named, and device_memory_name: "a TPU v2 core's HBM"). */
    int64_t device_memory;
    const char *device_memory_name;
    /* issue 16, cost model: the plan as the emulated TPU runs the step, for
     * the cost model (sy_plan_profile) and the device_memory check alone:
     * without the host kernels' conv -> pool fusion, which the cost model
     * does not assume of XLA (docs/design/tpu-cost-model.md, section 3),
     * and with nothing allocated; running it is refused. */
    bool tpu_view;
} sy_plan_options;

sy_plan_options sy_plan_options_default(void);

/* Compile g (which must have built without error; it is not modified). On
 * failure *out is NULL and sy_last_error() says why. */
sy_status sy_plan_compile(const sy_graph *g, const sy_plan_options *options, sy_plan **out);
void sy_plan_free(sy_plan *plan);

/* Where to write an input's value before a run (row-major, of the input's
 * dtype and shape). The value stays until you change it. NULL (with an
 * error) if `input` is not an input the plan reads; such an input need not
 * be fed. */
void *sy_plan_input(sy_plan *plan, sy_node input);

/* Run one step. Fails (without crashing) if a kernel met bad data, such as a
 * label or an index out of range; the message names the op. */
sy_status sy_plan_run(sy_plan *plan);

/* A run in two halves, for data-parallel training: first the forward and
 * backward passes (the gradients land in the gradient block), then -- after
 * the caller has, say, averaged the gradient blocks of several replicas --
 * the optimizer's update from that block (counted as one iteration).
 * sy_plan_run is the two in a row. */
sy_status sy_plan_run_gradients(sy_plan *plan);
sy_status sy_plan_run_update(sy_plan *plan);
/* The gradient block: every parameter's float gradient, *bytes bytes in
 * all; plans compiled from the same graph and options lay it out alike. */
void *sy_plan_gradients(sy_plan *plan, size_t *bytes);

/* The value of the loss or of an output node after the last run; NULL if
 * the node was not requested. Valid until the next run. */
const void *sy_plan_output(const sy_plan *plan, sy_node node);

/* The gradient of the loss w.r.t. a parameter (float, the param's shape)
 * after the last run; NULL if the plan has none for it. */
const void *sy_plan_gradient(const sy_plan *plan, sy_node param);

sy_vars *sy_plan_vars(sy_plan *plan);
/* With a schedule (sy_optimizer.schedule) the next run sets the rate again. */
void sy_plan_set_learning_rate(sy_plan *plan, float learning_rate);
float sy_plan_learning_rate(const sy_plan *plan);

typedef struct sy_plan_info {
    int32_t steps;         /* kernels per run */
    int32_t fused;         /* ops that fusion folded away */
    int64_t arena_bytes;   /* activations and workspaces, after liveness planning */
    int64_t unplanned_bytes; /* what the arena would need with no reuse */
    int64_t param_bytes, grad_bytes, slot_bytes;
    const char *backend;   /* issue 16, sim devices: the backend it runs ("sim" on an emulated TPU) */
    /* issue 16, mixed_bfloat16: kernels that read or write 2-byte bfloat16 activations, and inputs
     * the plan converts from bfloat16 to float32 for a kernel that reads float32 only
     * ($SYSTOLIC_BF16_STORAGE=0: none) */
    int32_t bf16_steps, bf16_converts;
} sy_plan_info;

void sy_plan_get_info(const sy_plan *plan, sy_plan_info *info);

/* The schedule, one kernel per line, with buffer offsets (for debugging). */
void sy_plan_dump(const sy_plan *plan, FILE *out);

/* issue 21: the plan as a person reads it (`systolic summary MODEL --plan`): one line per kernel
 * with its output's shape, how it is stored (float32, or bfloat16 under mixed_bfloat16), its bytes,
 * the block it lives in (arena, grads, ...) and the graph's ops fusion folded into it; a line for
 * each side output and workspace; then the kernel and op counts and the blocks' sizes, the arena's
 * after liveness planning and without it. */
void sy_plan_summary(const sy_plan *plan, FILE *out);

#ifdef __cplusplus
}
#endif
#endif
