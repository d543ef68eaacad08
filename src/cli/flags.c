/*
 * flags.c - a table-driven parser for `--name value` and `--name=value`
 * flags (a list flag may be given again: each value joins its list), and
 * `--name` switches. Every flag has a type, and a value that
 * does not parse as that type, an unknown flag, a missing value or a value
 * given to a switch is a usage error (exit status 2) that names the flag.
 *
 * Numbers are parsed whole (strtoll, strtod: no trailing text) and checked
 * against the flag's range, which is that of the field the value ends up
 * in or narrower: a value past it is refused with the range, never cut to
 * 32 bits or to a float's infinity on the way. Floats must be finite; a
 * value that underflows (strtod's ERANGE toward zero) is refused as well,
 * as it would not be the number typed.
 */
#include "cli_internal.h"

#include "core/core_internal.h" /* SY_ASSERT */

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int parse_value(flag *f, const char *text, const char *command) {
    char *end;
    errno = 0;
    switch (f->kind) {
    case FLAG_INT: {
        long long v = strtoll(text, &end, 10);
        if (!*text || *end) {
            fprintf(stderr, "systolic %s: %s expects an integer from %lld to %lld, got '%s'\n", command, f->name,
                    (long long)f->min, (long long)f->max, text);
            return 2;
        }
        if (errno == ERANGE || v < f->min || v > f->max) {
            fprintf(stderr, "systolic %s: %s: %s is out of range (%lld to %lld)\n", command, f->name, text,
                    (long long)f->min, (long long)f->max);
            return 2;
        }
        *(int64_t *)f->value = v;
        break;
    }
    case FLAG_FLOAT: {
        double v = strtod(text, &end);
        if (!*text || *end || isnan(v)) {
            fprintf(stderr, "systolic %s: %s expects a number from %g to %g, got '%s'\n", command, f->name, f->lo, f->hi,
                    text);
            return 2;
        }
        if (errno == ERANGE || !(v >= f->lo && v <= f->hi)) {
            if (f->lo == -DBL_MAX && f->hi == DBL_MAX)
                fprintf(stderr, "systolic %s: %s: %s is not a finite number\n", command, f->name, text);
            else
                fprintf(stderr, "systolic %s: %s: %s is out of range (%g to %g)\n", command, f->name, text, f->lo, f->hi);
            return 2;
        }
        *(double *)f->value = v;
        break;
    }
    case FLAG_STRING: *(const char **)f->value = text; break;
    case FLAG_BOOL: *(bool *)f->value = true; break;
    case FLAG_LIST: {
        flag_list *l = f->value;
        if (l->n == FLAG_LIST_MAX) {
            fprintf(stderr, "systolic %s: %s is given more than %d times\n", command, f->name,
                    FLAG_LIST_MAX);
            return 2;
        }
        l->v[l->n++] = text;
        break;
    }
    }
    f->set = true;
    return 0;
}

int flag_refused(const char *command, const char *flag_name) {
    fprintf(stderr, "systolic %s: %s: %s\n", command, flag_name, sy_last_error());
    return 2;
}

int flags_parse(int argc, char **argv, flag *flags, int n_flags, const char **positional, int max_positional,
                int *n_positional, const char *command) {
    *n_positional = 0;
    for (int k = 0; k < n_flags; k++) /* every number has its range */
        SY_ASSERT((flags[k].kind != FLAG_INT || flags[k].min < flags[k].max) &&
                  (flags[k].kind != FLAG_FLOAT || (isfinite(flags[k].lo) && isfinite(flags[k].hi) && flags[k].lo < flags[k].hi)));
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0 || a[2] == '\0') {
            if (*n_positional >= max_positional) {
                fprintf(stderr, "systolic %s: unexpected argument '%s' (see systolic %s --help)\n", command, a, command);
                return 2;
            }
            positional[(*n_positional)++] = a;
            continue;
        }
        const char *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        flag *f = NULL;
        for (int k = 0; k < n_flags; k++)
            if (strlen(flags[k].name) == len && strncmp(flags[k].name, a, len) == 0) f = &flags[k];
        if (!f) {
            fprintf(stderr, "systolic %s: unknown flag '%.*s' (see systolic %s --help)\n", command, (int)len, a, command);
            return 2;
        }
        const char *value = eq ? eq + 1 : NULL;
        if (f->kind == FLAG_BOOL && value) {
            fprintf(stderr, "systolic %s: %s takes no value\n", command, f->name);
            return 2;
        }
        if (f->kind == FLAG_BOOL) value = "";
        if (!value) {
            if (i + 1 >= argc) {
                fprintf(stderr, "systolic %s: %s needs a value (%s)\n", command, f->name, f->arg);
                return 2;
            }
            value = argv[++i];
        }
        int rc = parse_value(f, value, command);
        if (rc) return rc;
    }
    return 0;
}

void flags_help(FILE *out, const flag *flags, int n_flags) {
    for (int k = 0; k < n_flags; k++) {
        char left[64];
        snprintf(left, sizeof left, "%s%s%s", flags[k].name, *flags[k].arg ? " " : "", flags[k].arg);
        fprintf(out, "  %-26s %s\n", left, flags[k].help);
    }
}
