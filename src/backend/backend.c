/*
 * backend.c - the backend registry and what every backend shares: op names,
 * and running a kernel's parts on the exec context's thread pool.
 */
#include "backend_internal.h"

#include <string.h>

static const char *const op_names[SY_OP_COUNT] = {
#define SY_OP(id, name, arity) name,
#include "ops.def"
#undef SY_OP
};

static const int op_arity[SY_OP_COUNT] = {
#define SY_OP(id, name, arity) arity,
#include "ops.def"
#undef SY_OP
};

const char *sy_op_name(sy_op op) { return (unsigned)op < SY_OP_COUNT ? op_names[op] : "invalid"; }
int sy_op_arity(sy_op op) { return op_arity[op]; }

static const sy_backend *const backends[] = {&sy_backend_cpu, &sy_backend_ref, &sy_backend_sim,
                                             &sy_backend_sim_ref /* issue 16, MXU numerics */};

int sy_backend_count(void) { return (int)(sizeof backends / sizeof backends[0]); }
const sy_backend *sy_backend_at(int index) { return backends[index]; }

const sy_backend *sy_backend_find(const char *name) {
    char known[256] = "";
    for (int i = 0; i < sy_backend_count(); i++) {
        if (strcmp(backends[i]->name, name) == 0) return backends[i];
        strcat(known, i ? ", " : "");
        strcat(known, backends[i]->name);
    }
    sy_error(SY_ERR_NOT_FOUND, "unknown backend '%s'; this build has: %s", name, known);
    return NULL;
}

void sy_exec_parallel(const sy_exec *ex, int parts, sy_pool_fn fn, void *ctx) {
    if (parts > ex->threads) parts = ex->threads;
    if (parts <= 1 || !ex->pool) {
        fn(ctx, 0, 1);
        return;
    }
    sy_pool_run(ex->pool, fn, ctx, parts);
}

void sy_exec_fail(sy_exec *ex, const char *fmt, ...) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&ex->failed, &expected, 1)) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ex->error, sizeof ex->error, fmt, ap);
    va_end(ap);
}

/* issue 16, bfloat16 storage is the cpu backend's: ref stays the float32 oracle, and sim's MXU
 * kernels read float32 (its plans store float32, as before) */
static const sy_kernel *ref_lookup(sy_op op, sy_dtype dtype) {
    return dtype == SY_BF16 ? NULL : sy_ref_kernel(op, dtype);
}

static const sy_kernel *cpu_lookup(sy_op op, sy_dtype dtype) {
    const sy_kernel *k = sy_cpu_kernel(op, dtype);
    return k ? k : sy_ref_kernel(op, dtype);
}

/* The emulated TPU: the MXU's ops run with its numerics (sim_kernels.c); the
 * rest run as on the chip's vector unit, in float32, which is the cpu
 * backend's arithmetic. */
static const sy_kernel *sim_lookup(sy_op op, sy_dtype dtype) {
    if (dtype == SY_BF16) return NULL;
    const sy_kernel *k = sy_sim_kernel(op, dtype);
    return k ? k : cpu_lookup(op, dtype);
}

/* issue 16, MXU numerics: the oracle of the sim backend's MXU kernels, for the op harness -- the MXU's ops
 * run their scalar reference kernels (sim/mxu_ref.c), every other op its ref kernel. */
static const sy_kernel *sim_ref_lookup(sy_op op, sy_dtype dtype) {
    if (dtype == SY_BF16) return NULL;
    const sy_kernel *k = sy_sim_ref_kernel(op, dtype);
    return k ? k : sy_ref_kernel(op, dtype);
}
/* issue 21, conv -> pool fusion (and a Dense layer's bias gradient beside its kernel's product): the ref
 * kernels compute any fused conv -> pool value by value; the
 * cpu backend's where its fast paths do (conv.c), the sim backend's with the MXU's products
 * (sim/mxu.c); sim-ref takes none (its plans are the unfused graph's reference). */
static bool ref_fuses(sy_op op, const sy_kargs *k) {
    (void)k;
    return op == SY_OP_CONV2D_POOL || op == SY_OP_CONV2D_POOL_BACKPROP_FILTER || op == SY_OP_QCONV2D_POOL ||
           op == SY_OP_MATMUL_BIAS_GRAD;
}

const sy_backend sy_backend_sim_ref = {
    "sim-ref", "the sim backend's MXU numerics as scalar reference loops (tests)", sim_ref_lookup,
    NULL};

const sy_backend sy_backend_ref = {"ref", "scalar reference kernels (float32, float64)", ref_lookup,
                                   ref_fuses};
const sy_backend sy_backend_cpu = {"cpu", "fast float32 CPU kernels (oneDNN GEMM, fused loops)",
                                   cpu_lookup, sy_cpu_fuses};
const sy_backend sy_backend_sim = {
    "sim", "the emulated TPU: the MXU's bfloat16 products on the CPU", sim_lookup, sy_sim_fuses};

const char *sy_backend_name(int index) {
    return index >= 0 && index < sy_backend_count() ? backends[index]->name : NULL;
}
const char *sy_backend_description(int index) {
    return index >= 0 && index < sy_backend_count() ? backends[index]->description : NULL;
}
int sy_op_count(void) { return SY_OP_COUNT; }
const char *sy_op_name_at(int index) { return index >= 0 && index < SY_OP_COUNT ? op_names[index] : NULL; }

/* issue 16, mixed_bfloat16: the plan's rounding of a bf16 op's output, one pass over it while it is still in
 * cache from the kernel that wrote it (a kernel-agnostic pass, so every op on every backend gets it). */
void sy_bf16_round_all(float *x, int64_t n) {
    for (int64_t i = 0; i < n; i++) x[i] = sy_bf16_round(x[i]);
}

uint32_t sy_bf16_uniform(const sy_kargs *k) {
    (void)k;
    return SY_BF16_UNIFORM;
}
