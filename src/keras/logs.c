/*
 * logs.c - named values (sy_logs) and the history of a fit() run.
 */
#include "keras_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

double sy_logs_get(const sy_logs *logs, const char *name) {
    for (int32_t i = 0; i < logs->n; i++)
        if (strcmp(logs->names[i], name) == 0) return logs->values[i];
    return NAN;
}

/* Keras's progress bar formats its logs' float32 values, so the value goes through float first: the
 * "lr" a callback logs, 0.00125 here, is float32 0.0012499999 there and shows as 0.0012. */
void sy_logs_format_value(char *buf, size_t size, double v) {
    double f = (double)(float)v; /* a NaN prints "nan": Python has no "-nan" */
    snprintf(buf, size, isnan(v) ? "nan" : fabs(f) > 1e-3 ? "%.4f" : "%.4e", f);
}

void logs_set(sy_logs *logs, const char *name, double value) {
    for (int32_t i = 0; i < logs->n; i++)
        if (strcmp(logs->names[i], name) == 0) {
            logs->values[i] = value;
            return;
        }
    if (logs->n >= SY_LOGS_MAX) return;
    snprintf(logs->names[logs->n], sizeof logs->names[0], "%s", name);
    logs->values[logs->n++] = value;
}

/* "loss,accuracy,lr": the names joined by commas, as Keras's warnings list them. */
const char *logs_names_joined(const sy_logs *logs, char *buf, size_t size) {
    size_t len = 0;
    buf[0] = '\0';
    for (int32_t i = 0; i < logs->n && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "%s%s", i ? "," : "", logs->names[i]);
    return buf;
}

struct sy_history {
    sy_logs *logs;
    int32_t *epoch;
    int64_t n, cap, cap_epoch;
};

sy_status history_new(sy_history **out) {
    *out = sy_calloc(1, sizeof **out);
    return *out ? SY_OK : sy_error(SY_ERR_OUT_OF_MEMORY, "history: out of memory");
}

sy_status history_append(sy_history *h, int32_t epoch, const sy_logs *logs) {
    if (SY_GROW(h->logs, h->cap, h->n + 1) || SY_GROW(h->epoch, h->cap_epoch, h->n + 1))
        return sy_error(SY_ERR_OUT_OF_MEMORY, "history: out of memory");
    h->logs[h->n] = *logs;
    h->epoch[h->n++] = epoch;
    return SY_OK;
}

void sy_history_free(sy_history *h) {
    if (!h) return;
    sy_free(h->logs);
    sy_free(h->epoch);
    sy_free(h);
}

int32_t sy_history_epochs(const sy_history *h) { return (int32_t)h->n; }
const sy_logs *sy_history_logs(const sy_history *h, int32_t i) { return i >= 0 && i < h->n ? &h->logs[i] : NULL; }
int32_t sy_history_epoch(const sy_history *h, int32_t i) { return i >= 0 && i < h->n ? h->epoch[i] : -1; }
