/*
 * cli_internal.h - what the `systolic` command's files share: the built-in
 * models and the flag parser. bench/bench_models.c compiles builtin.c too,
 * to time exactly the models the command trains.
 */
#ifndef SY_CLI_INTERNAL_H
#define SY_CLI_INTERNAL_H

#include "systolic.h"

#include <stdio.h>

/* A built-in model: the architecture, its data and the hyperparameters of
 * the tutorial it reproduces. */
typedef struct builtin_model {
    const char *name;
    const char *description;
    sy_status (*build)(uint64_t seed, sy_model **out);
    /* The dataset, shaped as the model takes it. */
    sy_status (*load)(sy_data_split *out);
    const char *optimizer;
    float learning_rate;
    const char *loss;
    const char *metrics[4];
    int n_metrics;
    int64_t batch_size;
    int32_t epochs;
    int64_t steps_per_epoch;
    int32_t validation_freq;
} builtin_model;

const builtin_model *builtin_find(const char *name);
int builtin_count(void);
const builtin_model *builtin_at(int index);
/* The first n samples of x (0 < n <= x's first dimension), as a new
 * tensor: Keras's x[:n]. */
sy_status builtin_head(const sy_tensor *x, int64_t n, sy_tensor **out);

/* ---- flags --------------------------------------------------------------- */

typedef enum flag_kind { FLAG_INT, FLAG_FLOAT, FLAG_STRING } flag_kind;

typedef struct flag {
    const char *name; /* "--epochs" */
    flag_kind kind;
    void *value;      /* int64_t *, double *, const char ** */
    const char *arg;  /* "N" */
    const char *help;
    bool set;         /* out: given on the command line */
} flag;

/* Parse argv (after the command name): flags from `flags`, and at most
 * `max_positional` other words into positional[]. Returns 0, or 2 after
 * printing a usage error naming the flag. */
int flags_parse(int argc, char **argv, flag *flags, int n_flags, const char **positional, int max_positional,
                int *n_positional, const char *command);
void flags_help(FILE *out, const flag *flags, int n_flags);

/* The commands (train.c). */
int cmd_train(int argc, char **argv);
int cmd_evaluate(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_summary(int argc, char **argv);

#endif
