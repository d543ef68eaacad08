/*
 * model_profile.c - a model's step on an emulated TPU (issue 16): the plan
 * fit or predict would run, handed to the compiler's cost pass
 * (compiler/cost.c). Only the first replica's plan is read: every replica
 * runs the same plan on its own shard, and the pass accounts for the
 * replicas (their share of the chip, the all-reduce among them) itself.
 * The same plan, printed as the user's model became it (issue 21:
 * sy_model_plan_summary, `systolic summary MODEL --plan`).
 */
#include "keras_internal.h"
#include "systolic/profile.h"

/* The first replica's plan of m at `batch` rows per replica, compiled if it is not yet -- or, on an
 * emulated chip, for the cost model (!summary), the step as the TPU runs it (replica_set.tpu); `fn`
 * names the caller in errors. */
static sy_status first_plan(sy_model *m, int64_t batch, bool training, bool summary, const char *fn,
                            sy_plan **out) {
    if (batch < 1)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "%s: the batch per replica must be at least 1, got %lld", fn,
                        (long long)batch);
    model_plan *p;
    sy_status st = model_plan_get(m, training ? MODE_TRAIN : MODE_PREDICT, batch, &p);
    if (!st) *out = p->rs->tpu && !summary ? p->rs->tpu : p->rs->plans[0];
    return st;
}

sy_status sy_model_profile(sy_model *m, const sy_tpu_chip *chip, int64_t batch, bool training,
                           const sy_profile_options *options, sy_profile **out) {
    if (out) *out = NULL;
    if (!m || !chip || !out)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "sy_model_profile: model, chip and out are required");
    sy_plan *p = NULL;
    sy_status st = first_plan(m, batch, training, false, "sy_model_profile", &p);
    return st ? st : sy_plan_profile(p, chip, options, out);
}

/* issue 21: the compiled step of m, as `systolic summary MODEL --plan` prints it */
sy_status sy_model_plan_summary(sy_model *m, int64_t batch, bool training, FILE *out) {
    if (!m || !out)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "sy_model_plan_summary: model and out are required");
    sy_plan *p = NULL;
    sy_status st = first_plan(m, batch, training, true, "sy_model_plan_summary", &p);
    if (st) return st;
    int32_t r = model_replicas(m);
    sy_plan_info info;
    sy_plan_get_info(p, &info);
    fprintf(out,
            "Model: \"%s\" -- the compiled %s at %lld samples per replica (%d replica%s, each "
            "running this plan on its own arena), %s backend\n",
            m->name,
            training ? "training step (forward, loss, backward, optimizer update)" : "predict step",
            (long long)batch, r, r == 1 ? "" : "s", info.backend);
    sy_plan_summary(p, out);
    return SY_OK;
}
