/*
 * check.h - the tests' assertions: CHECK records a failure with file, line
 * and a message and carries on; a test's main returns check_report(), which
 * is non-zero if anything failed. 77 means skipped (ctest SKIP_RETURN_CODE).
 */
#ifndef SY_TEST_CHECK_H
#define SY_TEST_CHECK_H

#include <math.h>
#include <stdio.h>

static int check_failures, check_count;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        check_count++;                                                                             \
        if (!(cond)) {                                                                             \
            check_failures++;                                                                      \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
        }                                                                                          \
    } while (0)

/* |a - b| <= atol + rtol * |b| */
#define CHECK_CLOSE(a, b, rtol, atol, fmt, ...)                                                    \
    do {                                                                                           \
        double a_ = (a), b_ = (b);                                                                 \
        CHECK(fabs(a_ - b_) <= (atol) + (rtol)*fabs(b_), fmt ": %.9g vs %.9g", ##__VA_ARGS__, a_, b_); \
    } while (0)

#define CHECK_OK(expr)                                                                             \
    do {                                                                                           \
        sy_status st_ = (expr);                                                                    \
        CHECK(st_ == SY_OK, "%s: %s", sy_status_name(st_), sy_last_error());                       \
    } while (0)

/* expr returns `status`, and sy_last_error() mentions each of the strings
 * that follow (needs string.h and systolic's core.h). */
#define CHECK_ERR(expr, status, ...)                                                               \
    do {                                                                                           \
        sy_status got_ = (expr);                                                                   \
        CHECK(got_ == (status), "%s instead of %s (%s): ", sy_status_name(got_),                   \
              sy_status_name(status), sy_last_error());                                            \
        const char *needles_[] = {__VA_ARGS__};                                                    \
        for (size_t k_ = 0; k_ < sizeof needles_ / sizeof needles_[0]; k_++)                       \
            CHECK(strstr(sy_last_error(), needles_[k_]), "the message should mention '%s': %s",    \
                  needles_[k_], sy_last_error());                                                  \
    } while (0)

static int check_report(const char *name) {
    if (check_failures) {
        fprintf(stderr, "%s: %d of %d checks failed\n", name, check_failures, check_count);
        return 1;
    }
    fprintf(stderr, "%s: all %d checks passed\n", name, check_count);
    return 0;
}

#endif
