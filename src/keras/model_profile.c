/*
 * model_profile.c - a model's step on an emulated TPU (issue 16): the plan
 * fit or predict would run, handed to the compiler's cost pass
 * (compiler/cost.c). Only the first replica's plan is read: every replica
 * runs the same plan on its own shard, and the pass accounts for the
 * replicas (their share of the chip, the all-reduce among them) itself.
 */
#include "keras_internal.h"
#include "systolic/profile.h"

sy_status sy_model_profile(sy_model *m, const sy_tpu_chip *chip, int64_t batch, bool training,
                           const sy_profile_options *options, sy_profile **out) {
    if (out) *out = NULL;
    if (!m || !chip || !out)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "sy_model_profile: model, chip and out are required");
    if (batch < 1)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "sy_model_profile: the batch per replica must be at least 1, got %lld",
                        (long long)batch);
    model_plan *p;
    sy_status st = model_plan_get(m, training ? MODE_TRAIN : MODE_PREDICT, batch, &p);
    if (st) return st;
    return sy_plan_profile(p->rs->plans[0], chip, options, out);
}
