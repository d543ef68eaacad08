/*
 * lr_schedule_config.c - learning-rate schedules as tf.keras 2.15 writes
 * them in an optimizer's config, the command line's text form of them, and
 * the model's learning rate when a schedule or a callback sets it
 * (docs/design/lr-schedules.md).
 *
 * In a training_config, an optimizer with a schedule has, instead of a
 * number, learning_rate = {"module": "keras.optimizers.schedules",
 * "class_name": "ExponentialDecay", "config": {...}, "registered_name":
 * null} (serialization_lib.serialize_keras_object), the config's keys in
 * the order get_config() gives them and the values as the Python numbers
 * the user passed: a step count (decay_steps, boundaries, warmup_steps)
 * passed as an int is an int. This writes whole step counts as integers
 * and every rate as a float, as a schedule built the usual way has them,
 * and `name` as null (this library keeps no schedule names). Reading takes
 * the same form and the legacy one without "module" (Keras before 2.13);
 * an argument the class does not take is refused, as Keras's cls(**config)
 * refuses it.
 *
 * The text form (the CLI's --lr-schedule) is NAME:key=value,key=value...,
 * NAME Keras's class name or its snake_case ("exponential_decay"), values
 * numbers, true/false, or for PiecewiseConstantDecay lists split by '/'
 * (boundaries=100/1000,values=0.1/0.01/0.001). It is turned into the JSON
 * config and read by the same code, so both refuse alike.
 */
#include "keras_config.h"
#include "keras_internal.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The arguments of each class, in get_config()'s order. */
typedef struct schedule_form {
    sy_lr_schedule_kind kind;
    const char *snake;
    const char *keys[7];
} schedule_form;

static const schedule_form forms[] = {
    {SY_LR_EXPONENTIAL_DECAY, "exponential_decay", {"initial_learning_rate", "decay_steps", "decay_rate", "staircase", "name"}},
    {SY_LR_PIECEWISE_CONSTANT_DECAY, "piecewise_constant_decay", {"boundaries", "values", "name"}},
    {SY_LR_POLYNOMIAL_DECAY, "polynomial_decay",
     {"initial_learning_rate", "decay_steps", "end_learning_rate", "power", "cycle", "name"}},
    {SY_LR_INVERSE_TIME_DECAY, "inverse_time_decay", {"initial_learning_rate", "decay_steps", "decay_rate", "staircase", "name"}},
    {SY_LR_COSINE_DECAY, "cosine_decay", {"initial_learning_rate", "decay_steps", "alpha", "name", "warmup_target", "warmup_steps"}},
    {SY_LR_COSINE_DECAY_RESTARTS, "cosine_decay_restarts",
     {"initial_learning_rate", "first_decay_steps", "t_mul", "m_mul", "alpha", "name"}},
};
#define N_FORMS (sizeof forms / sizeof forms[0])

static const schedule_form *form_of(sy_lr_schedule_kind kind) {
    for (size_t i = 0; i < N_FORMS; i++)
        if (forms[i].kind == kind) return &forms[i];
    return NULL;
}

static const schedule_form *form_named(const char *name) {
    for (size_t i = 0; i < N_FORMS; i++)
        if (!strcmp(name, forms[i].snake) || !strcmp(name, sy_lr_schedule_class_name(forms[i].kind))) return &forms[i];
    return NULL;
}

#define KNOWN_SCHEDULES                                                                                                \
    "ExponentialDecay, PiecewiseConstantDecay, PolynomialDecay, InverseTimeDecay, CosineDecay, CosineDecayRestarts"

/* A step count as Python had it: an int when whole. */
static json_t *steps_json(double v) {
    return v == floor(v) && fabs(v) < 9e15 ? json_integer((json_int_t)v) : json_real(v);
}

json_t *keras_lr_schedule_json(const sy_lr_schedule *s) {
    const schedule_form *f = form_of(s->kind);
    if (!f) return NULL;
    json_t *c = json_object();
    for (int k = 0; k < 7 && f->keys[k]; k++) {
        const char *key = f->keys[k];
        json_t *v;
        if (!strcmp(key, "name")) v = json_null();
        else if (!strcmp(key, "initial_learning_rate")) v = json_real(s->initial_learning_rate);
        else if (!strcmp(key, "decay_steps") || !strcmp(key, "first_decay_steps")) v = steps_json(s->decay_steps);
        else if (!strcmp(key, "decay_rate")) v = json_real(s->decay_rate);
        else if (!strcmp(key, "staircase")) v = json_boolean(s->staircase);
        else if (!strcmp(key, "end_learning_rate")) v = json_real(s->end_learning_rate);
        else if (!strcmp(key, "power")) v = json_real(s->power);
        else if (!strcmp(key, "cycle")) v = json_boolean(s->cycle);
        else if (!strcmp(key, "alpha")) v = json_real(s->alpha);
        else if (!strcmp(key, "warmup_target")) v = s->has_warmup_target ? json_real(s->warmup_target) : json_null();
        else if (!strcmp(key, "warmup_steps")) v = steps_json(s->warmup_steps);
        else if (!strcmp(key, "t_mul")) v = json_real(s->t_mul);
        else if (!strcmp(key, "m_mul")) v = json_real(s->m_mul);
        else if (!strcmp(key, "boundaries")) {
            v = json_array();
            for (int32_t i = 0; i < s->n_boundaries; i++) json_array_append_new(v, steps_json(s->boundaries[i]));
        } else { /* values */
            v = json_array();
            for (int32_t i = 0; i <= s->n_boundaries; i++) json_array_append_new(v, json_real(s->values[i]));
        }
        json_object_set_new(c, key, v);
    }
    json_t *wrap = json_object();
    json_object_set_new(wrap, "module", json_string("keras.optimizers.schedules"));
    json_object_set_new(wrap, "class_name", json_string(sy_lr_schedule_class_name(s->kind)));
    json_object_set_new(wrap, "config", c);
    json_object_set_new(wrap, "registered_name", json_null());
    return wrap;
}

/* A number argument: *out keeps its default when the key is absent (or
 * null where Keras's default is None); required ones must be present. */
static sy_status number(const json_t *c, const char *where, const char *cls, const char *key, bool required,
                        double *out) {
    const json_t *v = json_object_get(c, key);
    if (!v || json_is_null(v)) {
        if (!required) return SY_OK;
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: %s needs %s", where, cls, key);
    }
    if (!json_is_number(v))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: %s: %s must be a number", where, cls, key);
    *out = json_number_value(v);
    return SY_OK;
}

static sy_status boolean(const json_t *c, const char *where, const char *cls, const char *key, bool *out) {
    const json_t *v = json_object_get(c, key);
    if (!v) return SY_OK;
    if (!json_is_boolean(v))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: %s: %s must be true or false", where, cls, key);
    *out = json_is_true(v);
    return SY_OK;
}

static sy_status list(const json_t *c, const char *where, const char *key, double *out, int32_t max, int32_t *n) {
    const json_t *v = json_object_get(c, key);
    if (!json_is_array(v))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: PiecewiseConstantDecay needs %s, a list of numbers", where, key);
    if (json_array_size(v) > (size_t)max)
        return sy_error(SY_ERR_UNSUPPORTED, "%s: PiecewiseConstantDecay: %zu %s; at most %d are supported", where,
                        json_array_size(v), key, max);
    *n = (int32_t)json_array_size(v);
    for (int32_t i = 0; i < *n; i++) {
        const json_t *x = json_array_get(v, (size_t)i);
        if (!json_is_number(x))
            return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: PiecewiseConstantDecay: %s[%d] must be a number", where, key, i);
        out[i] = json_number_value(x);
    }
    return SY_OK;
}

sy_status keras_lr_schedule_read(const json_t *j, const char *where, sy_lr_schedule *out) {
    const json_t *cls_j = json_object_get(j, "class_name"), *c = json_object_get(j, "config");
    const char *cls = json_string_value(cls_j);
    if (!cls || !json_is_object(c))
        return sy_error(SY_ERR_CORRUPT, "%s: a learning rate schedule needs a class_name and a config object", where);
    const schedule_form *f = form_named(cls);
    if (!f)
        return sy_error(SY_ERR_UNSUPPORTED, "%s: unknown learning rate schedule '%s'; known: " KNOWN_SCHEDULES, where, cls);
    cls = sy_lr_schedule_class_name(f->kind);
    const char *key;
    const json_t *value;
    json_object_foreach((json_t *)c, key, value) {
        bool known = false;
        for (int k = 0; k < 7 && f->keys[k] && !known; k++) known = !strcmp(key, f->keys[k]);
        if (!known) {
            char takes[256] = "";
            for (int k = 0; k < 7 && f->keys[k]; k++)
                snprintf(takes + strlen(takes), sizeof takes - strlen(takes), "%s%s", k ? ", " : "", f->keys[k]);
            return sy_error(SY_ERR_INVALID_ARGUMENT, "%s: %s got an unexpected argument '%s'; it takes %s", where, cls,
                            key, takes);
        }
    }
    sy_lr_schedule s;
    memset(&s, 0, sizeof s);
    switch (f->kind) { /* Keras's defaults */
    case SY_LR_POLYNOMIAL_DECAY: s = sy_lr_polynomial_decay(0, 0, 0.0001, 1.0, false); break;
    case SY_LR_COSINE_DECAY_RESTARTS: s = sy_lr_cosine_decay_restarts(0, 0, 2.0, 1.0, 0.0); break;
    default: s.kind = f->kind; break;
    }
    sy_status st = SY_OK;
    if (f->kind == SY_LR_PIECEWISE_CONSTANT_DECAY) {
        int32_t nb = 0, nv = 0;
        if (!(st = list(c, where, "boundaries", s.boundaries, SY_LR_SCHEDULE_MAX_BOUNDARIES, &nb)) &&
            !(st = list(c, where, "values", s.values, SY_LR_SCHEDULE_MAX_BOUNDARIES + 1, &nv)) && nb != nv - 1)
            st = sy_error(SY_ERR_INVALID_ARGUMENT,
                          "%s: PiecewiseConstantDecay: the length of boundaries should be 1 less than the length of "
                          "values. Received: boundaries of length %d, and values of length %d",
                          where, nb, nv);
        s.n_boundaries = nb;
    } else {
        bool steps_first = f->kind == SY_LR_COSINE_DECAY_RESTARTS;
        bool rate = f->kind == SY_LR_EXPONENTIAL_DECAY || f->kind == SY_LR_INVERSE_TIME_DECAY;
        if (!st) st = number(c, where, cls, "initial_learning_rate", true, &s.initial_learning_rate);
        if (!st) st = number(c, where, cls, steps_first ? "first_decay_steps" : "decay_steps", true, &s.decay_steps);
        if (!st && rate) st = number(c, where, cls, "decay_rate", true, &s.decay_rate);
        if (!st) st = boolean(c, where, cls, "staircase", &s.staircase);
        if (!st) st = number(c, where, cls, "end_learning_rate", false, &s.end_learning_rate);
        if (!st) st = number(c, where, cls, "power", false, &s.power);
        if (!st) st = boolean(c, where, cls, "cycle", &s.cycle);
        if (!st) st = number(c, where, cls, "alpha", false, &s.alpha);
        if (!st) st = number(c, where, cls, "warmup_steps", false, &s.warmup_steps);
        if (!st) st = number(c, where, cls, "t_mul", false, &s.t_mul);
        if (!st) st = number(c, where, cls, "m_mul", false, &s.m_mul);
        const json_t *wt = json_object_get(c, "warmup_target");
        s.has_warmup_target = wt && !json_is_null(wt);
        if (!st) st = number(c, where, cls, "warmup_target", false, &s.warmup_target);
    }
    if (!st && (st = sy_lr_schedule_check(&s))) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", sy_last_error());
        st = sy_error(st, "%s: %s", where, msg);
    }
    if (!st) *out = s;
    return st;
}

/* One value of the text form as JSON: true/false, a number (an integer
 * when written as one), or a '/'-separated list of numbers. */
static json_t *text_value(const char *v, size_t len) {
    char buf[512];
    if (len >= sizeof buf) return NULL;
    memcpy(buf, v, len);
    buf[len] = '\0';
    if (!strcmp(buf, "true") || !strcmp(buf, "True")) return json_true();
    if (!strcmp(buf, "false") || !strcmp(buf, "False")) return json_false();
    if (strchr(buf, '/')) {
        json_t *a = json_array();
        for (char *p = buf, *slash; a; p = slash + 1) {
            slash = strchr(p, '/');
            json_t *x = text_value(p, slash ? (size_t)(slash - p) : strlen(p));
            if (!x || json_is_array(x) || !json_is_number(x)) {
                json_decref(x);
                json_decref(a);
                return NULL;
            }
            json_array_append_new(a, x);
            if (!slash) break;
        }
        return a;
    }
    char *end;
    if (!*buf || isspace((unsigned char)*buf)) return NULL;
    long long i = strtoll(buf, &end, 10);
    if (!*end) return json_integer(i);
    double d = strtod(buf, &end);
    return *end || !isfinite(d) ? NULL : json_real(d);
}

sy_status sy_lr_schedule_parse(const char *text, double initial_learning_rate, sy_lr_schedule *out) {
    const char *colon = text ? strchr(text, ':') : NULL;
    size_t name_len = colon ? (size_t)(colon - text) : (text ? strlen(text) : 0);
    char name[64];
    if (!text || name_len == 0 || name_len >= sizeof name)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "learning rate schedule '%s': expected NAME:key=value,... with NAME one of exponential_decay, "
                        "piecewise_constant_decay, polynomial_decay, inverse_time_decay, cosine_decay, "
                        "cosine_decay_restarts",
                        text ? text : "(null)");
    memcpy(name, text, name_len);
    name[name_len] = '\0';
    json_t *c = json_object(), *j = json_object();
    sy_status st = SY_OK;
    for (const char *p = colon ? colon + 1 : ""; *p && !st;) {
        const char *comma = strchr(p, ','), *eq = strchr(p, '=');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        if (!eq || eq >= p + len || eq == p) {
            st = sy_error(SY_ERR_INVALID_ARGUMENT, "learning rate schedule '%s': '%.*s' is not key=value", text, (int)len, p);
            break;
        }
        char key[64];
        snprintf(key, sizeof key, "%.*s", (int)(eq - p), p);
        json_t *v = text_value(eq + 1, (size_t)(p + len - eq - 1));
        if (!v)
            st = sy_error(SY_ERR_INVALID_ARGUMENT,
                          "learning rate schedule '%s': %s=%.*s is not a number, true, false or a list a/b/c", text,
                          key, (int)(p + len - eq - 1), eq + 1);
        else
            json_object_set_new(c, key, v);
        p += len + (comma != NULL);
    }
    const schedule_form *f = form_named(name);
    if (!st && f && f->kind != SY_LR_PIECEWISE_CONSTANT_DECAY && !json_object_get(c, "initial_learning_rate") &&
        isfinite(initial_learning_rate)) {
        /* an optimizer's float32 rate (0.001f) as the Python float Keras would hold (0.001) */
        if ((double)(float)initial_learning_rate == initial_learning_rate)
            initial_learning_rate = keras_float_as_decimal((float)initial_learning_rate);
        json_object_set_new(c, "initial_learning_rate", json_real(initial_learning_rate));
    }
    json_object_set_new(j, "class_name", json_string(name));
    json_object_set(j, "config", c);
    if (!st) {
        char where[600];
        snprintf(where, sizeof where, "learning rate schedule '%s'", text);
        st = keras_lr_schedule_read(j, where, out);
    }
    json_decref(c);
    json_decref(j);
    return st;
}

/* ---- the model's learning rate -------------------------------------------------------- */

/* Keras's optimizer.learning_rate: the constant, or with a schedule the
 * value of its last step (_current_learning_rate, computed at the top of
 * apply_gradients: schedule(iterations - 1) after a step, schedule(0)
 * before any), unless a callback has set it since. */
double sy_model_learning_rate(const sy_model *m) {
    if (!m->compiled) return 0.0;
    const sy_lr_schedule *s = &m->optimizer.schedule;
    if (s->kind == SY_LR_SCHEDULE_NONE) return m->optimizer.learning_rate;
    int64_t it = sy_model_iterations(m);
    if (m->lr_set_at == it + 1) return m->lr_set;
    return sy_lr_schedule_value(s, it > 0 ? it - 1 : 0);
}

sy_status sy_model_set_learning_rate(sy_model *m, double learning_rate) {
    if (!m->compiled)
        return sy_error(SY_ERR_STATE, "set_learning_rate: model '%s' is not compiled (it has no optimizer)", m->name);
    if (!(learning_rate >= 0) || isinf(learning_rate))
        return sy_error(SY_ERR_INVALID_ARGUMENT, "set_learning_rate: %g is not a finite number >= 0", learning_rate);
    float lr = (float)learning_rate; /* Keras keeps it in a float32 variable */
    if (m->optimizer.schedule.kind != SY_LR_SCHEDULE_NONE) {
        /* Keras assigns _current_learning_rate, which the next step computes again */
        m->lr_set = lr;
        m->lr_set_at = sy_model_iterations(m) + 1;
        return SY_OK;
    }
    m->optimizer.learning_rate = lr;
    for (int mode = 0; mode < MODE_COUNT; mode++) {
        replica_set *rs = m->plans[mode].rs;
        for (int32_t i = 0; rs && i < rs->n; i++) sy_plan_set_learning_rate(rs->plans[i], lr);
    }
    return SY_OK;
}
