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
    /* What one sample is, for reading the model's data from TFRecord files
     * (records.c): x's shape without the batch axis; for word sequences
     * the vocabulary (indices past it become 2) and the padded length (0:
     * images). */
    sy_shape input_shape;
    int64_t num_words, maxlen;
    /* The tutorial's loss takes logits (SparseCategoricalCrossentropy(from_logits=True)). */
    bool from_logits;
    /* The tutorial's tf.data pipeline over the loaded arrays (NULL: fit
     * takes the arrays, batched and shuffled as Keras's fit does): the
     * training dataset, already batched, and the validation one. issue 20:
     * on several hosts, host `host` of `hosts` takes its shard (shard(hosts,
     * host)) of each, in batches of train_batch and eval_batch (cli_host_batch). */
    sy_status (*pipeline)(const sy_data_split *d, int64_t train_batch, int64_t eval_batch, uint64_t seed,
                          int32_t hosts, int32_t host, sy_dataset **train, sy_dataset **validation);
} builtin_model;

const builtin_model *builtin_find(const char *name);
int builtin_count(void);
const builtin_model *builtin_at(int index);
/* The IMDB reviews with word indices below num_words (0: all), each padded
 * or cut to maxlen (int32 (25000, maxlen)); labels uint8 (25000,). */
sy_status builtin_imdb_data(int32_t num_words, int64_t maxlen, sy_data_split *out);
/* The first n samples of x (0 < n <= x's first dimension), as a new
 * tensor: Keras's x[:n]. */
sy_status builtin_head(const sy_tensor *x, int64_t n, sy_tensor **out);

/* ---- a model from a file (model_file.c) ------------------------------------ */

typedef enum model_file_kind { MODEL_FILE_NONE, MODEL_FILE_JSON, MODEL_FILE_H5, MODEL_FILE_TFLITE } model_file_kind;

/* What the name says a file holds: .json (to_json()), .h5/.hdf5
 * (model.save()), .tflite (TFLiteConverter's; issue 18: read and verified,
 * not run yet -- file_model_init says so). */
model_file_kind model_file_kind_of(const char *path);

/* MODEL as a file: described as a built-in model is, so the commands treat
 * both alike. b.name is the path, b.build NULL (file_model_load builds),
 * b.load NULL (file_model_data loads); the hyperparameters are Keras's
 * compile() and fit() defaults; b's loss, metrics and sample shape (for
 * --data) are filled in when the model is read. */
typedef struct file_model {
    builtin_model b;
    const char *dataset; /* --dataset: fashion_mnist, mnist, imdb; NULL: none given */
    char loss[64];
    char metrics[256];   /* --metrics, split in place into b.metrics */
    bool metrics_given;
    /* a .h5 file with a training_config: the optimizer it was compiled
     * with, used unless --optimizer or --learning-rate say otherwise */
    bool has_optimizer;
    sy_optimizer optimizer;
    char saved_loss[48], saved_metrics[4][256];
    bool saved_from_logits; /* the file's loss takes logits (a Loss object's from_logits) */
    bool saved_has_args;    /* issue 17: the file's loss is a Loss object with these arguments */
    sy_loss_args saved_args;
    /* issue 17: the model's, which --dataset (one of each) must match */
    int32_t n_inputs, n_outputs;
    /* issue 17: the file's weighted_metrics, kept when the model is compiled again */
    char saved_weighted[4][256];
    const char *weighted[4];
    int32_t n_weighted;
} file_model;

/* issue 18 (lite.c): predict and evaluate on a TFLite model (MODEL.tflite); other commands refuse it.
 * Returns the exit status. */
typedef struct lite_cli_opts {
    const char *model, *input, *output, *dataset, *tpu;
    int n_inputs;
    int64_t batch_size;
    int64_t steps;   /* evaluate: the first N batches only (0: all) */
    int64_t verbose; /* 0: the results alone */
} lite_cli_opts;
int lite_cli_run(const char *command, const lite_cli_opts *o);

/* Set f up from MODEL's path and the file model's flags (each may be NULL).
 * Returns -1 to go on, else an exit status after printing why. */
int file_model_init(file_model *f, const char *command, const char *path, const char *dataset, const char *loss,
                    const char *metrics);
/* Read the model (in the current strategy scope; from .json with initial
 * weights drawn with `seed`, from .h5 with the file's weights) and fill in
 * what depends on it: the loss and metrics not given (the .h5 file's
 * training_config's, else by the output's units), the sample shape for
 * --data. */
sy_status file_model_load(file_model *f, uint64_t seed, sy_model **out);
/* --dataset's data, shaped as the model takes it. */
sy_status file_model_data(const file_model *f, sy_data_split *out);
/* Why --save-model FILE cannot be written, or NULL when it can. */
const char *model_file_check_save(const char *path);
/* --save-model: the model as FILE.json (to_json()) or FILE.h5 (model.save()), written whole. */
sy_status model_file_save(const sy_model *m, const char *path);

/* ---- a user's arrays (arrays.c) ------------------------------------------ */

/* A flag given again and again (FLAG_LIST, below): its values in order. */
#define FLAG_LIST_MAX 16 /* a model's inputs at most (MODEL_MAX_IO) */
typedef struct flag_list {
    const char *v[FLAG_LIST_MAX];
    int n;
} flag_list;

/* Input i's name as Keras gives it: its InputLayer's, or for a Sequential
 * model without one "<first layer>_input" (written into buf). */
const char *cli_input_name(const sy_model *m, int32_t i, char *buf, size_t size);
/* Why predict's --input flags ([NAME=]FILE.npy, FILE.npz:KEY, FILE.npz)
 * cannot be what they say, or NULL when they can: each one's form, all
 * named or none, a keyless FILE.npz alone. Checked before anything loads. */
const char *array_check_inputs(const flag_list *inputs);
/* The arrays the --input flags give, one per model input in its order,
 * into x[0 .. the model's inputs): new tensors as data's readers give them
 * (float32, float64, int32, uint8), each checked against its input's
 * shape, all with as many samples. Errors name the file, the array and the
 * input; *usage is set when the flags themselves do not fit the model (a
 * count or a NAME no input has: the command's usage error). */
sy_status array_read_inputs(const flag_list *inputs, const sy_model *m, sy_tensor **x, bool *usage);
/* Why --output FILE (.npy, .npz, .csv) cannot be written, or NULL. */
const char *array_check_output(const char *path);
/* SY_ERR_INVALID_ARGUMENT, naming the outputs, for FILE.npy and a model
 * with several outputs. */
sy_status array_check_output_for(const char *path, const sy_model *m);
/* predict's outputs p[0 .. n) (samples, ...) as FILE.npy (one output),
 * FILE.npz (one array per output, keyed by its layer's name) or FILE.csv
 * (a header row naming the columns after the output layers, one row per
 * sample, values with %.9g), written whole or not at all. */
sy_status array_write_outputs(const char *path, sy_tensor *const *p, int32_t n, const sy_model *m);
/* "wrote FILE: float32 (6, 10)" ("wrote FILE.npz: cls float32 (8, 3), reg ..." for several). */
void array_print_written(FILE *out, const char *path, sy_tensor *const *p, int32_t n,
                         const sy_model *m);

/* ---- TFRecord input (records.c) ------------------------------------------ */

/* The parse step's context: it must outlive the datasets. */
typedef struct record_parse {
    const builtin_model *b;
    sy_shape x_shape;
    sy_record_spec *spec; /* issue 17: --features, fitted to the model; NULL: convert's layout */
    bool with_label;      /* elements (x, y); false: (x) for predict */
} record_parse;

#define RECORDS_PREFIX "tfrecord:"
/* SY_ERR_INVALID_ARGUMENT unless spec is "tfrecord:GLOB" with a GLOB. */
sy_status records_check_spec(const char *spec);
/* --data tfrecord:GLOB: the training pipeline over the files GLOB names
 * (shuffled with seed, batches of `batch` with drop_remainder, repeated
 * when steps_per_epoch is set) and, when files with "test" in place of the
 * last "train" of the name exist, the validation pipeline (else
 * *validation is NULL and a note says so). Both end in a prefetch; both
 * read with `options` (compression, skip_corrupt). issue 17: features
 * (--features; NULL: convert's layout, for a model with one input and one
 * output) is fitted to model m first: arranged in its input and output
 * order (sy_record_spec_arrange), each x checked against its input (an
 * Image's dimensions not given are the input's), a y for every output
 * when labels are read, the x's alone when not (predict); errors name the
 * role and the model's input or output. */
sy_status records_datasets(const builtin_model *b, const sy_model *m, const char *spec,
                           sy_record_spec *features, const sy_tfrecord_options *options,
                           int64_t batch, int64_t steps_per_epoch, uint64_t seed,
                           record_parse *parse, sy_dataset **train, sy_dataset **validation);
/* issue 17: evaluate's and predict's pipeline over the files GLOB names, in
 * order, batches of `batch` with the last one partial (evaluate and predict
 * pad it and leave the padding out): elements (x..., y..., [w]), or the x's
 * alone without with_label. features: --features (NULL: convert's layout,
 * one input and one label); the components an Example gives are checked
 * against the model's inputs (m). */
sy_status records_eval_dataset(const builtin_model *b, const sy_model *m, const char *spec,
                               sy_record_spec *features, const sy_tfrecord_options *options,
                               int64_t batch, bool with_label, record_parse *parse,
                               sy_dataset **out);
/* issue 20: this host's share of a global batch on a model's hosts: its
 * replicas' shards (the whole batch on one host); for evaluation rounded
 * up, as evaluate pads. */
int64_t cli_host_batch(const sy_model *m, int64_t batch, bool training);
/* issue 20: a global batch size that does not divide among the replicas of several hosts, refused (one
 * host takes any: fit splits it as Keras does) */
sy_status cli_check_host_batch(const sy_model *m, int64_t batch);

/* --features SPEC: a .json file's path, else the flag's spelling. */
sy_status records_features(const char *text, sy_record_spec *out);

/* ---- flags --------------------------------------------------------------- */

/* FLAG_BOOL is a switch: "--overwrite" sets it, and it takes no value.
 * FLAG_LIST may be given again and again (predict's --input, one per
 * model input): each value joins a flag_list, in the order given. */
typedef enum flag_kind { FLAG_INT, FLAG_FLOAT, FLAG_STRING, FLAG_BOOL, FLAG_LIST } flag_kind;

/* Numbers are checked against the range of what they end up in, so that
 * none is cut short on the way: an int32_t field (epochs) takes at most
 * INT32_MAX, a float (a learning rate) at most FLT_MAX. Tables give the
 * range after the positional fields, e.g.
 *   {"--epochs", FLAG_INT, &o.epochs, "N", "epochs to train", .set = false, .min = 0, .max = INT32_MAX}
 * and a FLAG_INT or FLAG_FLOAT without one (min >= max) is a bug that
 * flags_parse asserts on. */
typedef struct flag {
    const char *name; /* "--epochs" */
    flag_kind kind;
    void *value;      /* int64_t *, double *, const char **, bool *, flag_list * */
    const char *arg;  /* "N"; "" for a switch */
    const char *help;
    bool set;         /* out: given on the command line */
    int64_t min, max; /* FLAG_INT: the values accepted */
    double lo, hi;    /* FLAG_FLOAT: the values accepted, finite */
} flag;

/* Parse argv (after the command name): flags from `flags`, and at most
 * `max_positional` other words into positional[]. Returns 0, or 2 after
 * printing a usage error naming the flag: an unknown flag, a missing value,
 * a value that is not a number of the flag's kind or lies outside its
 * range (named), NaN or infinity. */
int flags_parse(int argc, char **argv, flag *flags, int n_flags, const char **positional, int max_positional,
                int *n_positional, const char *command);
void flags_help(FILE *out, const flag *flags, int n_flags);
/* A flag's value the library refused (an unknown --optimizer, a --tpu spec
 * it cannot resolve): prints "systolic COMMAND: FLAG: <sy_last_error()>"
 * and returns 2, the exit status of every usage error. The one place a
 * library error about what the user typed becomes a usage error. */
int flag_refused(const char *command, const char *flag_name);

/* issue 20, ranks (main.c): once an "mpi" spec is resolved, every rank but
 * the chief runs silent (stdout to /dev/null, the library's warnings
 * dropped); call after each resolve. cli_reports: whether this rank prints
 * the last error -- the chief always, another rank unless every rank has
 * it (sy_cluster_error_shared). */
void cli_joined(void);
bool cli_reports(void);
/* The library's log as the command prints it: warnings and errors, on the chief alone once joined. */
void cli_log_reset(void);

/* The commands (train.c). */
int cmd_train(int argc, char **argv);
int cmd_evaluate(int argc, char **argv);
int cmd_predict(int argc, char **argv);
int cmd_summary(int argc, char **argv);
int cmd_quantize(int argc, char **argv); /* issue 18 */
/* convert.c */
int cmd_convert(int argc, char **argv);
/* issue 16, cost model: profile.c */
int cmd_profile(int argc, char **argv);

/* issue 16, trace and roofline (profile_files.c): one step of a profile
 * written, whole or not at all, as a Chrome trace-event file (FILE.json,
 * for https://ui.perfetto.dev) or as a roofline plot (FILE.svg). model
 * names the model in titles; training says which step the plan runs. */
sy_status profile_write_trace(const char *path, const char *model, bool training, const sy_profile *p);
sy_status profile_write_roofline(const char *path, const char *model, bool training, const sy_profile *p);
/* SY_ERR_IO, naming path and why, unless a file can be written there (its
 * directory exists and is writable; it is not a directory or a FIFO):
 * checked before the profile is computed, so a bad path writes nothing. */
sy_status profile_check_output(const char *path);
/* s as a JSON string, quoted and escaped. */
void cli_json_string(FILE *out, const char *s);
/* issue 20, pods on paper: a slice's topology in words, "32x32 chips, 2-D torus" or "ring of 8"
 * (profile.c; `devices` and `profile` print it). */
void cli_topology_words(char *buf, size_t size, const sy_tpu_topology *t, int32_t replicas);

/* issue 18, TPU v1 (tpu1.c): systolic compile, and systolic profile --tpu sim:v1 (cmd_profile hands over) */
int cmd_compile(int argc, char **argv);
int cmd_profile_tpu1(int argc, char **argv);

#endif
