/*
 * train.c - the commands that run a model: train, evaluate, predict and
 * summary. Each takes a MODEL -- a built-in one (builtin.c) or a Keras model
 * file (MODEL.json or MODEL.h5, model_file.c) -- and flags that mirror Keras's compile()
 * and fit() arguments; a flag not given keeps the tutorial's value, which
 * --help lists per model, or for a model file Keras's default.
 */
#include "cli_internal.h"
#include "keras/keras_internal.h" /* the compiled metrics' names, for --monitor */

#include <float.h>
#include <math.h>
#include <stdlib.h> /* issue 17, fit arguments: strtol, strtod */
#include <string.h>
#include <time.h>

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct run_opts {
    int64_t epochs, steps_per_epoch, batch_size, validation_freq, validation_steps, eval_steps, seed, verbose, count,
        steps_per_execution;
    double learning_rate;
    const char *optimizer, *tpu, *data, *data_compression;
    bool skip_corrupt;
    bool optimizer_set, learning_rate_set; /* given on the command line */
    /* a model from a file (model.json, model.h5) */
    const char *dataset, *loss, *metrics;
    double label_smoothing; /* issue 17: --label-smoothing, the crossentropies' */
    bool label_smoothing_set;
    /* saving */
    const char *save_weights, *load_weights, *save_model;
    /* checkpoints */
    const char *model_dir;
    int64_t save_checkpoints_steps, keep_checkpoints;
    bool resume;
    /* TensorBoard */
    const char *logdir;
    int64_t update_freq;
    /* CSV log and early stopping */
    const char *csv_log, *monitor;
    bool csv_append, restore_best_weights, terminate_on_nan;
    bool early_stopping; /* --early-stopping given (its PATIENCE may be 0) */
    int64_t patience;
    double min_delta;
    /* predict on a user's arrays: --input [NAME=]FILE.npy|FILE.npz:KEY|FILE.npz, one per model
     * input; --output FILE.npy|.npz|.csv */
    flag_list inputs;
    const char *output;
    const char *dtype_policy; /* issue 16, mixed_bfloat16: --dtype-policy */
    /* issue 17, fit arguments: --validation-split, --class-weight, ModelCheckpoint's flags, --backup-dir */
    double validation_split;
    const char *class_weight, *checkpoint_filepath, *checkpoint_monitor, *checkpoint_mode, *backup_dir;
    bool save_best_only, save_weights_only;
    int64_t save_freq;
    double class_weights[256];
    int32_t n_class_weights;
    /* issue 17, learning-rate schedules: --lr-schedule, --reduce-lr-on-plateau and its settings */
    const char *lr_schedule, *reduce_lr_monitor;
    int64_t reduce_lr_patience;
    double reduce_lr_factor, reduce_lr_min_lr;
    bool reduce_lr;
    /* issue 17, TFRecord layouts: --features, parsed */
    const char *features;
    sy_record_spec spec;
    bool plan, plan_predict; /* issue 21: summary --plan [--predict] */
    /* issue 18: quantize's -o/--output, --calibration-steps, --inference-input-type, --inference-output-type */
    const char *tflite_out, *input_type, *output_type;
    int64_t calibration_steps;
    bool dynamic_range; /* issue 18: quantize --dynamic-range */
} run_opts;

enum { F_EPOCHS, F_STEPS, F_BATCH, F_OPTIMIZER, F_LR, F_VALFREQ, F_VALSTEPS, F_EVALSTEPS, F_SEED, F_VERBOSE, F_COUNT, F_TPU, F_SPE,
       F_DATA, F_DATA_COMPRESSION, F_SKIP_CORRUPT,
       F_DATASET, F_LOSS, F_METRICS,
       F_SAVE_WEIGHTS, F_LOAD_WEIGHTS, F_SAVE_MODEL,
       F_MODEL_DIR, F_CKPT_STEPS, F_KEEP_CKPT, F_RESUME,
       F_LOGDIR, F_UPDATE_FREQ,
       F_CSV_LOG, F_CSV_APPEND, F_PATIENCE, F_MONITOR, F_MIN_DELTA, F_RESTORE_BEST,
       F_TERMINATE_ON_NAN, F_INPUT, F_OUTPUT,
       F_LABEL_SMOOTHING, /* issue 17, losses and metrics */
       F_DTYPE_POLICY, /* issue 16, mixed_bfloat16 */
       /* issue 17, fit arguments */
       F_VALIDATION_SPLIT, F_CLASS_WEIGHT, F_CKPT_FILEPATH, F_CKPT_MONITOR, F_CKPT_MODE, F_SAVE_BEST_ONLY,
       F_SAVE_WEIGHTS_ONLY, F_SAVE_FREQ, F_BACKUP_DIR,
       F_LR_SCHEDULE, F_REDUCE_LR, F_REDUCE_LR_FACTOR, F_REDUCE_LR_MIN_LR, F_REDUCE_LR_MONITOR, /* issue 17, lr schedules */
       F_FEATURES, /* issue 17, TFRecord layouts */
       F_PLAN, F_PLAN_PREDICT, /* issue 21: summary --plan [--predict] */
       F_TFLITE_OUT, F_CAL_STEPS, F_INPUT_TYPE, F_OUTPUT_TYPE, F_DYNAMIC_RANGE, /* issue 18: quantize */
       F_N };

static void make_flags(flag *f, run_opts *o) {
    memset(o, 0, sizeof *o);
    o->verbose = 1;
    o->count = 10;
    o->steps_per_execution = 1;
    f[F_EPOCHS] = (flag){"--epochs", FLAG_INT, &o->epochs, "N", "epochs to train", .set = false, .min = 0, .max = INT32_MAX};
    f[F_STEPS] = (flag){"--steps-per-epoch", FLAG_INT, &o->steps_per_epoch, "N", "steps per epoch (0: one pass over the training set)", .set = false, .min = 0, .max = INT64_MAX};
    f[F_BATCH] = (flag){"--batch-size", FLAG_INT, &o->batch_size, "N", "global batch size", .set = false, .min = 1, .max = INT64_MAX};
    f[F_OPTIMIZER] = (flag){"--optimizer", FLAG_STRING, &o->optimizer, "NAME",
                            "a Keras optimizer (sgd, adam, rmsprop, adamw, adadelta, adagrad, adamax, adafactor, "
                            "nadam, ftrl, lion), with tf.keras 2.15's defaults",
                            .set = false};
    f[F_LR] = (flag){"--learning-rate", FLAG_FLOAT, &o->learning_rate, "X", "the optimizer's learning rate", .set = false, .lo = 0, .hi = FLT_MAX};
    f[F_VALFREQ] = (flag){"--validation-freq", FLAG_INT, &o->validation_freq, "N", "validate on the test split after every N-th epoch", .set = false, .min = 1, .max = INT32_MAX};
    f[F_VALSTEPS] = (flag){"--validation-steps", FLAG_INT, &o->validation_steps, "N",
                           "validate on the first N batches of the test split only (default 0: all of it)", .set = false, .min = 0, .max = INT64_MAX};
    f[F_EVALSTEPS] = (flag){"--steps", FLAG_INT, &o->eval_steps, "N", "evaluate the first N batches only (default 0: all)", .set = false, .min = 0, .max = INT64_MAX};
    f[F_SEED] = (flag){"--seed", FLAG_INT, &o->seed, "N", "seed of the initial weights, dropout and shuffling (default 0)", .set = false, .min = 0, .max = INT64_MAX};
    f[F_VERBOSE] = (flag){"--verbose", FLAG_INT, &o->verbose, "N", "0 silent, 1 progress bar, 2 one line per epoch (default 1)", .set = false, .min = 0, .max = 2};
    f[F_COUNT] = (flag){"--count", FLAG_INT, &o->count, "N", "predictions to print (default 10)", .set = false, .min = 0, .max = INT64_MAX};
    f[F_TPU] = (flag){"--tpu", FLAG_STRING, &o->tpu, "SPEC",
                      "devices to run replicas on: local, cpu, cpu:N, or an emulated TPU slice sim:v2-8, sim:v3-8, sim:v4-8, sim:v3-32, ... "
                      "(default $SYSTOLIC_TPU, else local: one per core); on a sim slice the progress bar shows the "
                      "emulated chip's time per step beside the host's (systolic profile MODEL --tpu SPEC: op by op); a .tflite "
                      "model runs on local, cpu, cpu:N (N threads) or sim:v1, the emulated TPU v1",
                      .set = false};
    f[F_DATA] = (flag){"--data", FLAG_STRING, &o->data, "tfrecord:GLOB",
                       "TFRecord files of tf.train.Examples (as `systolic convert` writes them, or as --features says) "
                       "through the input pipeline; train validates on the files with \"test\" for the last "
                       "\"train\" in their name; evaluate and predict run on every record of GLOB's files",
                       .set = false};
    f[F_DATA_COMPRESSION] = (flag){"--data-compression", FLAG_STRING, &o->data_compression, "NAME",
                                   "the --data files' compression: NONE, ZLIB or GZIP (default NONE)", .set = false};
    f[F_SKIP_CORRUPT] = (flag){"--skip-corrupt", FLAG_BOOL, &o->skip_corrupt, "",
                               "skip the --data files' corrupt records, counting them per file on stderr, instead of "
                               "stopping at the first",
                               .set = false};
    /* a model from a file */
    f[F_DATASET] = (flag){"--dataset", FLAG_STRING, &o->dataset, "NAME",
                          "a model file's data: fashion_mnist, mnist or imdb (train and test splits), shaped as the "
                          "model takes it",
                          .set = false};
    f[F_LOSS] = (flag){"--loss", FLAG_STRING, &o->loss, "NAME",
                       "a model file's loss, Keras's name: any tf.keras 2.15 built-in loss, e.g. huber, "
                       "binary_focal_crossentropy (default sparse_categorical_crossentropy; binary_crossentropy for "
                       "a one-unit output)",
                       .set = false};
    f[F_LABEL_SMOOTHING] = (flag){"--label-smoothing", FLAG_FLOAT, &o->label_smoothing, "X",
                                  "the loss's label_smoothing, in [0, 1] (binary and categorical crossentropy and "
                                  "their focal forms, as Keras's)",
                                  .set = false, .lo = 0, .hi = 1};
    f[F_METRICS] = (flag){"--metrics", FLAG_STRING, &o->metrics, "A,B",
                          "a model file's metrics, Keras's names or classes with arguments, e.g. "
                          "\"AUC(curve='PR')\" (default sparse_categorical_accuracy; accuracy for a one-unit output)",
                          .set = false};
    /* saving */
    f[F_SAVE_WEIGHTS] = (flag){"--save-weights", FLAG_STRING, &o->save_weights, "FILE",
                               "after training, save the weights as Keras's model.save_weights (HDF5)", .set = false};
    f[F_LOAD_WEIGHTS] = (flag){"--load-weights", FLAG_STRING, &o->load_weights, "FILE",
                               "start from the weights in FILE (Keras HDF5 weights or a full model .h5)", .set = false};
    f[F_SAVE_MODEL] = (flag){"--save-model", FLAG_STRING, &o->save_model, "FILE",
                             "after training, save the model as Keras's model.save (FILE.h5) or to_json (FILE.json)",
                             .set = false};
    /* checkpoints */
    f[F_MODEL_DIR] = (flag){"--model-dir", FLAG_STRING, &o->model_dir, "DIR",
                            "write a checkpoint to DIR after every epoch (and --save-checkpoints-steps)", .set = false};
    f[F_CKPT_STEPS] = (flag){"--save-checkpoints-steps", FLAG_INT, &o->save_checkpoints_steps, "N",
                             "also checkpoint every N training steps (needs --model-dir)", .set = false, .min = 0, .max = INT64_MAX};
    f[F_KEEP_CKPT] = (flag){"--keep-checkpoints", FLAG_INT, &o->keep_checkpoints, "N",
                            "keep the newest N checkpoints in --model-dir (default 5)", .set = false, .min = 1, .max = INT32_MAX};
    f[F_RESUME] = (flag){"--resume", FLAG_BOOL, &o->resume, "",
                         "continue from the newest checkpoint in --model-dir", .set = false};
    /* TensorBoard */
    f[F_LOGDIR] = (flag){"--logdir", FLAG_STRING, &o->logdir, "DIR",
                         "write TensorBoard event files to DIR/train and DIR/validation", .set = false};
    f[F_UPDATE_FREQ] = (flag){"--update-freq", FLAG_INT, &o->update_freq, "N",
                              "also write per-batch scalars every N steps to --logdir (default 0: epochs only)", .set = false, .min = 0, .max = INT64_MAX};
    /* CSV log and early stopping */
    f[F_CSV_LOG] = (flag){"--csv-log", FLAG_STRING, &o->csv_log, "FILE", "write each epoch's logs to FILE as a row (Keras's CSVLogger; FILE is replaced unless --csv-append)", .set = false};
    f[F_CSV_APPEND] = (flag){"--csv-append", FLAG_BOOL, &o->csv_append, "", "keep what --csv-log's FILE holds and add to it", .set = false};
    f[F_PATIENCE] = (flag){"--early-stopping", FLAG_INT, &o->patience, "PATIENCE",
                           "stop when --monitor has not improved for PATIENCE epochs (Keras's EarlyStopping)", .set = false, .min = 0, .max = INT32_MAX};
    f[F_MONITOR] = (flag){"--monitor", FLAG_STRING, &o->monitor, "NAME", "what early stopping watches (default val_loss)", .set = false};
    f[F_MIN_DELTA] = (flag){"--min-delta", FLAG_FLOAT, &o->min_delta, "X",
                            "the least change early stopping counts as an improvement (default 0)", .set = false, .lo = -DBL_MAX, .hi = DBL_MAX};
    f[F_TERMINATE_ON_NAN] = (flag){"--terminate-on-nan", FLAG_BOOL, &o->terminate_on_nan, "",
                                   "stop when the loss becomes NaN or infinite (Keras's TerminateOnNaN); the run then exits "
                                   "with status 1 and saves no --save-weights or --save-model",
                                   .set = false};
    f[F_RESTORE_BEST] = (flag){"--restore-best-weights", FLAG_BOOL, &o->restore_best_weights, "",
                               "when early stopping stops, restore the best epoch's weights", .set = false};
    f[F_INPUT] = (flag){
        "--input",
        FLAG_LIST,
        &o->inputs,
        "FILE",
        "predict on the samples in FILE instead of the test split: FILE.npy, or FILE.npz:KEY for "
        "the array KEY of an np.savez archive; shaped (samples, the input's shape...), any "
        "numeric dtype (cast to the model's input type, as Keras does); needs --output. A model "
        "with several inputs takes one --input per input, in its order, or NAME=FILE naming "
        "each input layer, or one FILE.npz whose arrays are named after the input layers",
        .set = false};
    f[F_OUTPUT] = (flag){
        "--output",
        FLAG_STRING,
        &o->output,
        "FILE",
        "write the model's whole output for --input's or --data's samples to FILE.npy: float32 "
        "(samples, output shape...), model.predict's array; to FILE.npz: one such array per "
        "output, named after its layer (a model with several outputs); or to FILE.csv: a header "
        "row naming the columns after the output layers, then a row per sample (written whole or "
        "not at all)",
        .set = false};
    /* issue 21: summary --plan */
    f[F_PLAN] = (flag){
        "--plan",
        FLAG_BOOL,
        &o->plan,
        "",
        "print the compiled training step instead: each kernel, the model's ops fused into it, its "
        "buffers and the arena's total, at --batch-size over the --tpu replicas",
        .set = false};
    f[F_PLAN_PREDICT] = (flag){"--predict", FLAG_BOOL, &o->plan_predict, "",
                               "with --plan: the predict step (the inference plan predict and evaluate run) "
                               "instead of the training step",
                               .set = false};
    /* issue 18: quantize */
    o->calibration_steps = 100;
    f[F_TFLITE_OUT] = (flag){"--output", FLAG_STRING, &o->tflite_out, "OUT.tflite",
                             "the int8 TensorFlow Lite file to write (also -o; written whole or not at all)",
                             .set = false};
    f[F_CAL_STEPS] = (flag){"--calibration-steps", FLAG_INT, &o->calibration_steps, "N",
                            "batches of --batch-size training samples run through the float model to find each "
                            "tensor's range (default 100)", .set = false, .min = 1, .max = INT32_MAX};
    f[F_INPUT_TYPE] = (flag){"--inference-input-type", FLAG_STRING, &o->input_type, "TYPE",
                             "float32 (default: a QUANTIZE op first) or int8 (TFLiteConverter's inference_input_type)",
                             .set = false};
    f[F_OUTPUT_TYPE] = (flag){"--inference-output-type", FLAG_STRING, &o->output_type, "TYPE",
                              "float32 (default: a DEQUANTIZE op last) or int8 (inference_output_type)", .set = false};
    f[F_DYNAMIC_RANGE] = (flag){"--dynamic-range", FLAG_BOOL, &o->dynamic_range, "",
                                "dynamic-range quantization, TFLiteConverter's optimizations=[DEFAULT] without a "
                                "representative dataset: int8 weights, float32 activations, no calibration data; "
                                "taken without this flag for a model with an Embedding or an LSTM",
                                .set = false};
    /* issue 16, mixed_bfloat16 */
    f[F_DTYPE_POLICY] = (flag){"--dtype-policy", FLAG_STRING, &o->dtype_policy, "NAME",
                               "Keras's dtype policy for every layer: float32 or mixed_bfloat16 (variables float32, "
                               "computation and activations bfloat16); default: the model's own (float32 for a "
                               "built-in one)",
                               .set = false};
    /* issue 17, learning-rate schedules */
    o->reduce_lr_factor = 0.1;
    f[F_LR_SCHEDULE] = (flag){"--lr-schedule", FLAG_STRING, &o->lr_schedule, "NAME:K=V,...",
                              "a Keras learning-rate schedule, e.g. exponential_decay:decay_steps=1000,decay_rate=0.96 "
                              "(also piecewise_constant_decay:boundaries=B1/B2,values=V0/V1/V2, polynomial_decay, "
                              "inverse_time_decay, cosine_decay, cosine_decay_restarts; Keras's arguments; "
                              "initial_learning_rate defaults to the optimizer's learning rate)",
                              .set = false};
    f[F_REDUCE_LR] = (flag){"--reduce-lr-on-plateau", FLAG_INT, &o->reduce_lr_patience, "PATIENCE",
                            "multiply the learning rate by --reduce-lr-factor when --reduce-lr-monitor has not improved "
                            "for PATIENCE epochs (Keras's ReduceLROnPlateau); adds lr to the logs",
                            .set = false, .min = 0, .max = INT32_MAX};
    f[F_REDUCE_LR_FACTOR] = (flag){"--reduce-lr-factor", FLAG_FLOAT, &o->reduce_lr_factor, "X",
                                   "the factor of --reduce-lr-on-plateau, in [0, 1) (default 0.1)", .set = false, .lo = 0,
                                   .hi = 0.999999999};
    f[F_REDUCE_LR_MIN_LR] = (flag){"--reduce-lr-min-lr", FLAG_FLOAT, &o->reduce_lr_min_lr, "X",
                                   "the least learning rate --reduce-lr-on-plateau goes to (default 0)", .set = false,
                                   .lo = 0, .hi = FLT_MAX};
    f[F_REDUCE_LR_MONITOR] = (flag){"--reduce-lr-monitor", FLAG_STRING, &o->reduce_lr_monitor, "NAME",
                                    "what --reduce-lr-on-plateau watches (default val_loss)", .set = false};
    /* issue 17, TFRecord layouts */
    f[F_FEATURES] = (flag){"--features", FLAG_STRING, &o->features, "SPEC",
                           "what --data's Examples hold: x (the input) and y (the label), each a feature as tf.io "
                           "reads it, e.g. 'x=FixedLen(image, float, [28,28,1]); y=FixedLen(label, int64)', "
                           "'x=VarLen(text, int64, length=250)', 'x=Image(image/encoded, channels=3, "
                           "resize=[224,224], rescale=0.00392156862)'; x.NAME and y.NAME for each input and "
                           "output layer of a model with several; w=FixedLen(KEY, float) for a sample weight; "
                           "or FILE.json (docs/design/tfrecord.md); default: the layout `systolic convert` writes",
                           .set = false};
    f[F_SPE] = (flag){"--steps-per-execution", FLAG_INT, &o->steps_per_execution, "N",
                      "steps per host round trip; the progress bar updates every N steps (default 1)", .set = false, .min = 1, .max = INT32_MAX};
    /* issue 17, fit arguments (docs/design/fit-arguments.md) */
    f[F_VALIDATION_SPLIT] = (flag){"--validation-split", FLAG_FLOAT, &o->validation_split, "X",
                                   "validate on the last fraction X of the training arrays (cut before shuffling, as "
                                   "Keras's validation_split) instead of the test split",
                                   .set = false, .lo = 0, .hi = 1};
    f[F_CLASS_WEIGHT] = (flag){"--class-weight", FLAG_STRING, &o->class_weight, "C:W,...",
                               "weigh each sample's loss by its class's weight, Keras's class_weight, e.g. 0:1,1:3 "
                               "(every class from 0)", .set = false};
    f[F_CKPT_FILEPATH] = (flag){"--checkpoint-filepath", FLAG_STRING, &o->checkpoint_filepath, "PATTERN",
                                "save the model (HDF5) as Keras's ModelCheckpoint, to PATTERN formatted with the epoch "
                                "and the logs, e.g. 'w-{epoch:02d}-{val_loss:.2f}.h5'", .set = false};
    f[F_CKPT_MONITOR] = (flag){"--checkpoint-monitor", FLAG_STRING, &o->checkpoint_monitor, "NAME",
                               "what --save-best-only compares (default val_loss)", .set = false};
    f[F_CKPT_MODE] = (flag){"--checkpoint-mode", FLAG_STRING, &o->checkpoint_mode, "MODE",
                            "auto (max for names holding 'acc'), min or max: which way --checkpoint-monitor improves",
                            .set = false};
    f[F_SAVE_BEST_ONLY] = (flag){"--save-best-only", FLAG_BOOL, &o->save_best_only, "",
                                 "save only when --checkpoint-monitor improves", .set = false};
    f[F_SAVE_WEIGHTS_ONLY] = (flag){"--save-weights-only", FLAG_BOOL, &o->save_weights_only, "",
                                    "save the weights (model.save_weights) instead of the whole model", .set = false};
    f[F_SAVE_FREQ] = (flag){"--save-freq", FLAG_INT, &o->save_freq, "N",
                            "save every N batches instead of at each epoch's end", .set = false, .min = 1, .max = INT64_MAX};
    f[F_BACKUP_DIR] = (flag){"--backup-dir", FLAG_STRING, &o->backup_dir, "DIR",
                             "back the run up to DIR at each epoch's end and resume from it when run again (Keras's "
                             "BackupAndRestore); DIR is deleted when training ends", .set = false};
}

/* issue 17, fit arguments: --class-weight C:W,... into o->class_weights, every class from 0 once (Keras asks for
 * keys from 0 to one less than the number of classes); NULL or what is wrong. */
static const char *parse_class_weight(run_opts *o) {
    static char why[256];
    bool seen[256] = {false};
    int32_t n = 0;
    for (const char *s = o->class_weight; *s;) {
        char *end;
        long c = strtol(s, &end, 10);
        if (end == s || *end != ':' || c < 0 || c >= 256) {
            snprintf(why, sizeof why, "--class-weight: '%s' is not CLASS:WEIGHT,... with classes 0 to 255 (e.g. 0:1,1:3)",
                     o->class_weight);
            return why;
        }
        s = end + 1;
        double w = strtod(s, &end);
        if (end == s || (*end && *end != ',') || !isfinite(w)) {
            snprintf(why, sizeof why, "--class-weight: class %ld's weight in '%s' is not a finite number", c, o->class_weight);
            return why;
        }
        if (seen[c]) {
            snprintf(why, sizeof why, "--class-weight: class %ld is given twice in '%s'", c, o->class_weight);
            return why;
        }
        seen[c] = true;
        o->class_weights[c] = w;
        n = (int32_t)c + 1 > n ? (int32_t)c + 1 : n;
        s = *end ? end + 1 : end;
    }
    for (int32_t c = 0; c < n; c++)
        if (!seen[c]) {
            snprintf(why, sizeof why, "--class-weight: Expected `class_weight` to be a dict with keys from 0 to one less "
                     "than the number of classes, found {%s}: class %d is missing", o->class_weight, c);
            return why;
        }
    if (!n) return "--class-weight: no CLASS:WEIGHT given (e.g. 0:1,1:3)";
    o->n_class_weights = n;
    return NULL;
}

typedef struct command_spec {
    const char *name, *summary;
    const int *flags; /* indices into the flag table, -1 terminated */
} command_spec;

static const int train_flags[] = {F_EPOCHS,     F_STEPS,      F_BATCH,      F_OPTIMIZER,  F_LR,           F_VALFREQ,
                                  F_VALSTEPS,   F_SEED,       F_VERBOSE,    F_TPU,        F_SPE,          F_DATA,
                                  F_DATA_COMPRESSION, F_SKIP_CORRUPT, F_DATASET, F_LOSS,    F_METRICS,      F_SAVE_WEIGHTS,
                                  F_LOAD_WEIGHTS, F_SAVE_MODEL, F_MODEL_DIR, F_CKPT_STEPS,  F_KEEP_CKPT,    F_RESUME,
                                  F_LOGDIR,     F_UPDATE_FREQ, F_CSV_LOG,   F_CSV_APPEND,  F_PATIENCE,     F_MONITOR,
                                  F_MIN_DELTA,  F_RESTORE_BEST, F_TERMINATE_ON_NAN, F_LABEL_SMOOTHING, F_DTYPE_POLICY,
                                  /* issue 17, fit arguments */
                                  F_VALIDATION_SPLIT, F_CLASS_WEIGHT, F_CKPT_FILEPATH, F_CKPT_MONITOR, F_CKPT_MODE,
                                  F_SAVE_BEST_ONLY, F_SAVE_WEIGHTS_ONLY, F_SAVE_FREQ, F_BACKUP_DIR,
                                  /* issue 17, learning-rate schedules */
                                  F_LR_SCHEDULE, F_REDUCE_LR, F_REDUCE_LR_FACTOR, F_REDUCE_LR_MIN_LR, F_REDUCE_LR_MONITOR,
                                  /* issue 17, TFRecord layouts */
                                  F_FEATURES, -1};

static const int eval_flags[] = {F_BATCH, F_EVALSTEPS, F_SEED, F_VERBOSE, F_TPU, F_SPE, F_DATASET, F_LOSS, F_METRICS,
                                 F_LOAD_WEIGHTS, F_LABEL_SMOOTHING, F_DTYPE_POLICY,
                                 F_DATA, F_DATA_COMPRESSION, F_SKIP_CORRUPT, F_FEATURES, -1}; /* issue 17: --data */
static const int predict_flags[] = {F_BATCH, F_SEED, F_VERBOSE, F_COUNT, F_TPU, F_SPE, F_DATASET, F_LOAD_WEIGHTS,
                                    F_INPUT, F_OUTPUT, F_DTYPE_POLICY,
                                    F_DATA, F_DATA_COMPRESSION, F_SKIP_CORRUPT, F_FEATURES, -1}; /* issue 17: --data */
static const int quantize_flags[] = {F_TFLITE_OUT, F_CAL_STEPS, F_INPUT_TYPE, F_OUTPUT_TYPE, F_DYNAMIC_RANGE,
                                     F_BATCH, F_SEED, F_DATASET, F_LOAD_WEIGHTS, -1}; /* issue 18 */
static const int summary_flags[] = {F_SEED, F_LOAD_WEIGHTS, F_PLAN, F_PLAN_PREDICT, F_BATCH,
                                    F_TPU,  F_DTYPE_POLICY, -1};

static void print_models(FILE *out, bool with_defaults) {
    fprintf(out, "\nmodels%s:\n", with_defaults ? " and the defaults they train with" : "");
    for (int i = 0; i < builtin_count(); i++) {
        const builtin_model *b = builtin_at(i);
        fprintf(out, "  %-19s %s\n", b->name, b->description);
        if (with_defaults)
            fprintf(out, "  %-19s   --epochs %d --steps-per-epoch %lld --batch-size %lld --optimizer %s --learning-rate %g --validation-freq %d\n",
                    "", b->epochs, (long long)b->steps_per_epoch, (long long)b->batch_size, b->optimizer,
                    (double)b->learning_rate, b->validation_freq);
    }
    fprintf(out, "  %-19s a Keras model: its model.to_json() output; its data from --dataset NAME%s\n", "MODEL.json",
            with_defaults ? " or --data" : "");
    fprintf(out, "  %-19s a full Keras model (model.save()): its weights, and its loss, metrics and optimizer when "
                 "saved compiled\n", "MODEL.h5");
    if (with_defaults)
        fprintf(out, "  %-19s   Keras's defaults: --epochs 1 --steps-per-epoch 0 --batch-size 32 --optimizer rmsprop "
                     "--learning-rate 0.001 --validation-freq 1\n", "");
}

static void usage(FILE *out, const command_spec *c, const flag *all) {
    fprintf(out, "usage: systolic %s MODEL [flags]\n\n%s\n\nflags:\n", c->name, c->summary);
    flag shown[F_N];
    int n = 0;
    for (const int *k = c->flags; *k >= 0; k++) shown[n++] = all[*k];
    flags_help(out, shown, n);
    print_models(out, c->flags == train_flags);
    fprintf(out, "\nDatasets are read from $SYSTOLIC_DATASETS, then the cache, else downloaded (but IMDB's review archive\n"
                 "has no public download: put aclImdb_v1_labeled.tar.gz in $SYSTOLIC_DATASETS/imdb/).\n");
}

static bool takes(const command_spec *c, int flag_index) {
    for (const int *k = c->flags; *k >= 0; k++)
        if (*k == flag_index) return true;
    return false;
}

/* A model file (MODEL.json, MODEL.h5): its own flags and data. Returns -1 to go on,
 * else an exit status. */
static int parse_file_model(const command_spec *c, const char *path, const run_opts *o, file_model *fm) {
    if (model_file_kind_of(path) == MODEL_FILE_TFLITE) { /* issue 18: run by the int8 path, lite.c */
        lite_cli_opts lo = {path, o->inputs.n ? o->inputs.v[0] : NULL, o->output, o->dataset, o->tpu, o->inputs.n,
                            o->batch_size, o->eval_steps, o->verbose};
        return lite_cli_run(c->name, &lo);
    }
    int rc = file_model_init(fm, c->name, path, o->dataset, o->loss, o->metrics);
    if (rc >= 0) return rc;
    if (takes(c, F_DATASET) && !o->dataset && !o->data && !o->inputs.n) {
        fprintf(stderr, "systolic %s: a model from a file needs --dataset NAME%s (its training and test data)\n", c->name,
                takes(c, F_DATA) ? " or --data tfrecord:GLOB" : takes(c, F_INPUT) ? " or --input FILE" : "");
        return 2;
    }
    if (o->dataset && (o->data || o->inputs.n)) {
        fprintf(stderr, "systolic %s: --dataset and %s both give the data: give one\n", c->name,
                o->data ? "--data" : "--input");
        return 2;
    }
    return -1;
}

static int fail(const char *command, const char *what);

/* The flags whose values are names the library looks up -- --optimizer,
 * --tpu, --data, --data-compression and --features -- checked before anything is
 * loaded, so that a mistake in one is a usage error (exit status 2) that
 * names the flag. Returns -1 to go on, else an exit status. */
static int check_names(const command_spec *c, run_opts *o) {
    sy_optimizer opt;
    if (o->optimizer_set && sy_optimizer_from_name(o->optimizer, &opt)) return flag_refused(c->name, "--optimizer");
    sy_cluster *cluster;
    if (sy_cluster_resolve(o->tpu, &cluster)) {
        if (sy_cluster_size() > 1) return fail(c->name, "--tpu"); /* issue 20: joined, then refused (builds) */
        return flag_refused(c->name, o->tpu && *o->tpu ? "--tpu" : "--tpu (from $SYSTOLIC_TPU)");
    }
    sy_cluster_free(cluster);
    cli_joined(); /* issue 20: from here the chief alone prints */
    sy_compression compression;
    if (o->data_compression && sy_compression_from_name(o->data_compression, &compression))
        return flag_refused(c->name, "--data-compression");
    if (o->data && records_check_spec(o->data)) return flag_refused(c->name, "--data");
    if (o->features && records_features(o->features, &o->spec)) return flag_refused(c->name, "--features");
    sy_dtype_policy policy;
    if (o->dtype_policy && sy_dtype_policy_from_name(o->dtype_policy, NULL, &policy))
        return flag_refused(c->name, "--dtype-policy");
    sy_clear_error();
    return -1;
}

/* Parse the command line; returns -1 to go on, else an exit status. */
static int parse(const command_spec *c, int argc, char **argv, flag *f, run_opts *o, const builtin_model **model,
                 file_model *fm) {
    make_flags(f, o);
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout, c, f);
            return 0;
        }
    flag allowed[F_N];
    int n = 0;
    for (const int *k = c->flags; *k >= 0; k++) allowed[n++] = f[*k];
    const char *pos[1];
    int n_pos;
    int rc = flags_parse(argc, argv, allowed, n, pos, 1, &n_pos, c->name);
    if (rc) return rc;
    n = 0;
    for (const int *k = c->flags; *k >= 0; k++) f[*k].set = allowed[n++].set;
    if (n_pos == 0) {
        fprintf(stderr, "systolic %s: which model? (see systolic %s --help)\n", c->name, c->name);
        return 2;
    }
    *model = builtin_find(pos[0]);
    if (!*model && model_file_kind_of(pos[0]) != MODEL_FILE_NONE) {
        if ((rc = parse_file_model(c, pos[0], o, fm)) >= 0) return rc;
        *model = &fm->b;
    } else if (*model && (o->dataset || o->loss || o->metrics)) {
        fprintf(stderr, "systolic %s: --dataset, --loss and --metrics are for a model file (MODEL.json, MODEL.h5); '%s' has "
                        "its own\n", c->name, pos[0]);
        return 2;
    }
    if (!*model) {
        fprintf(stderr, "systolic %s: unknown model '%s'; built-in models:", c->name, pos[0]);
        for (int i = 0; i < builtin_count(); i++) fprintf(stderr, " %s", builtin_at(i)->name);
        fprintf(stderr, "; or a Keras model file, MODEL.json or MODEL.h5\n");
        return 2;
    }
    const builtin_model *b = *model;
    if (!f[F_EPOCHS].set) o->epochs = b->epochs;
    if (!f[F_STEPS].set) o->steps_per_epoch = b->steps_per_epoch;
    if (!f[F_BATCH].set) o->batch_size = b->batch_size;
    o->optimizer_set = f[F_OPTIMIZER].set;
    o->learning_rate_set = f[F_LR].set;
    o->label_smoothing_set = f[F_LABEL_SMOOTHING].set;
    if (!f[F_OPTIMIZER].set) o->optimizer = b->optimizer;
    if (!f[F_LR].set) o->learning_rate = b->learning_rate;
    if (!f[F_VALFREQ].set) o->validation_freq = b->validation_freq;
    sy_optimizer keras_default;
    if (b == &fm->b && !f[F_LR].set && sy_optimizer_from_name(o->optimizer, &keras_default) == SY_OK)
        o->learning_rate = keras_default.learning_rate; /* the optimizer's own, as Keras's compile() */
    sy_clear_error();
    const char *bad_save = o->save_model ? model_file_check_save(o->save_model) : NULL;
    /* the numbers' ranges are flags_parse's; here what depends on other flags */
    const char *bad =
        !o->data && (o->data_compression || o->skip_corrupt)
            ? "--data-compression and --skip-corrupt describe --data's files: give --data "
              "tfrecord:GLOB"
        : !o->data && o->features ? "--features describes --data's files: give --data tfrecord:GLOB"
        : o->data && o->inputs.n  ? "--data and --input both give the samples: give one"
        : !o->model_dir && (f[F_CKPT_STEPS].set || f[F_KEEP_CKPT].set || o->resume)
            ? "--save-checkpoints-steps, --keep-checkpoints and --resume need --model-dir DIR"
            : bad_save;
    if (bad) {
        fprintf(stderr, "systolic %s: %s\n", c->name, bad);
        return 2;
    }
    if ((rc = check_names(c, o)) >= 0) return rc;
    /* CSV log and early stopping: flags that would be ignored are refused */
    bad = f[F_CSV_APPEND].set && !o->csv_log ? "--csv-append adds to --csv-log's FILE: give --csv-log FILE"
          : !f[F_PATIENCE].set && (f[F_MONITOR].set || f[F_MIN_DELTA].set || f[F_RESTORE_BEST].set)
              ? "--monitor, --min-delta and --restore-best-weights configure early stopping: give --early-stopping "
                "PATIENCE"
                : NULL;
    if (bad) {
        fprintf(stderr, "systolic %s: %s\n", c->name, bad);
        return 2;
    }
    o->early_stopping = f[F_PATIENCE].set;
    bool samples =
        o->inputs.n || (o->data && c->flags == predict_flags); /* issue 17: predict --data */
    bad =
        o->data && c->flags == predict_flags && !o->output
            ? "--data tfrecord:GLOB needs --output FILE (.npy, .npz or .csv): predict writes the "
              "output of every record"
        : samples != !!o->output
            ? "--input FILE and --output FILE.npy go together: predict reads one, writes the other"
        : samples && f[F_COUNT].set
            ? "--count is for the printed table; with --input or --data every sample is predicted"
        : o->inputs.n ? array_check_inputs(&o->inputs)
                      : NULL;
    if (!bad && o->output) bad = array_check_output(o->output);
    if (bad) {
        fprintf(stderr, "systolic %s: %s\n", c->name, bad);
        return 2;
    }
    /* issue 17, learning-rate schedules: --lr-schedule's form now (its initial rate is known at compile) */
    sy_lr_schedule probe;
    if (o->lr_schedule && sy_lr_schedule_parse(o->lr_schedule, 1.0, &probe)) return flag_refused(c->name, "--lr-schedule");
    o->reduce_lr = f[F_REDUCE_LR].set;
    if (!o->reduce_lr && (f[F_REDUCE_LR_FACTOR].set || f[F_REDUCE_LR_MIN_LR].set || f[F_REDUCE_LR_MONITOR].set)) {
        fprintf(stderr, "systolic %s: --reduce-lr-factor, --reduce-lr-min-lr and --reduce-lr-monitor configure "
                        "--reduce-lr-on-plateau PATIENCE: give it\n", c->name);
        return 2;
    }
    if (o->update_freq && !o->logdir) {
        fprintf(stderr, "systolic %s: --update-freq writes to --logdir: give --logdir DIR\n", c->name);
        return 2;
    }
    /* issue 17, fit arguments: flags that would be ignored, and values known bad before any training */
    bad = !o->checkpoint_filepath && (o->checkpoint_monitor || o->checkpoint_mode || o->save_best_only ||
                                      o->save_weights_only || f[F_SAVE_FREQ].set)
              ? "--checkpoint-monitor, --checkpoint-mode, --save-best-only, --save-weights-only and --save-freq "
                "configure --checkpoint-filepath: give --checkpoint-filepath PATTERN"
          : o->checkpoint_mode && strcmp(o->checkpoint_mode, "auto") && strcmp(o->checkpoint_mode, "min") &&
                  strcmp(o->checkpoint_mode, "max")
              ? "--checkpoint-mode: expected auto, min or max"
          : o->backup_dir && o->model_dir ? "--backup-dir and --model-dir both checkpoint the run: give one"
          : f[F_VALIDATION_SPLIT].set && !(o->validation_split > 0 && o->validation_split < 1)
              ? "--validation-split: expected a fraction strictly between 0 and 1"
          : f[F_VALIDATION_SPLIT].set && o->data
              ? "--validation-split cuts arrays; --data gives a dataset (Keras's validation_split is only supported "
                "for Tensors or NumPy arrays)"
          : o->class_weight ? parse_class_weight(o)
                            : NULL;
    if (bad) {
        fprintf(stderr, "systolic %s: %s\n", c->name, bad);
        return 2;
    }
    return -1;
}

static int fail(const char *command, const char *what) {
    const char *msg = sy_last_error();
    if (what && strstr(msg, what)) what = NULL; /* a message that names the file already: not twice */
    if (!cli_reports()) return 1; /* issue 20: every rank has it; the chief says it */
    char rank[48] = "";
    if (sy_cluster_rank() > 0) snprintf(rank, sizeof rank, " (rank %d of %d)", sy_cluster_rank(), sy_cluster_size());
    fprintf(stderr, "systolic %s%s: %s%s%s\n", command, rank, what ? what : "", what ? ": " : "", msg);
    return 1;
}

/* issue 17: a model file compiled with a loss per output (Keras's list or
 * dict): each output's loss, loss weight and metrics as the file has them,
 * copied out of the model before compile() replaces them. */
typedef struct saved_outputs {
    sy_compile_output out[MODEL_MAX_IO];
    char loss[MODEL_MAX_IO][48], metrics[MODEL_MAX_IO][HEAD_MAX_METRICS][64];
    const char *metric_names[MODEL_MAX_IO][HEAD_MAX_METRICS], *weighted_names[MODEL_MAX_IO][HEAD_MAX_METRICS];
    sy_loss_args args[MODEL_MAX_IO];
    double weights[MODEL_MAX_IO];
} saved_outputs;

/* c's losses, weights and metrics per output from the file's compile (m's
 * heads), unless --loss gives one for all; --metrics, when given, stays one
 * flat list for every output, as Keras's compile(metrics=[...]). */
static void compile_saved_outputs(const sy_model *m, const run_opts *o, saved_outputs *so,
                                  sy_compile_options *c) {
    if (o->loss || m->n_outputs < 2 || m->form == LOSS_SINGLE) return;
    for (int32_t i = 0; i < m->n_outputs; i++) {
        /* a dict in the order its keys were given */
        int32_t j = m->form == LOSS_DICT ? m->dict_order[i] : i;
        const model_head *h = &m->heads[j];
        sy_compile_output *e = &so->out[i];
        memset(e, 0, sizeof *e);
        e->output = m->form == LOSS_DICT ? model_output_name(m, j) : NULL;
        snprintf(so->loss[i], sizeof so->loss[i], "%s", h->loss_name);
        e->loss = so->loss[i];
        e->from_logits = h->from_logits;
        so->args[i] = h->args;
        if (o->label_smoothing_set) so->args[i].label_smoothing = o->label_smoothing;
        if (h->object || o->label_smoothing_set) e->loss_args = &so->args[i];
        /* the file's metrics and, apart, its weighted_metrics (issue 17) */
        int32_t n = 0, n_weighted = 0;
        for (int32_t k = 0; !o->metrics && k < h->n_metrics; k++) {
            snprintf(so->metrics[i][k], sizeof so->metrics[i][k], "%s", h->metrics[k].given);
            if (h->metrics[k].weighted) so->weighted_names[i][n_weighted++] = so->metrics[i][k];
            else so->metric_names[i][n++] = so->metrics[i][k];
        }
        e->metrics = so->metric_names[i];
        e->n_metrics = n;
        e->weighted_metrics = so->weighted_names[i];
        e->n_weighted_metrics = n_weighted;
        so->weights[i] = h->weight;
    }
    c->outputs = so->out;
    c->n_outputs = m->n_outputs;
    if (m->loss_weights_given) {
        c->loss_weights = so->weights;
        c->n_loss_weights = m->n_outputs;
    }
    if (!o->metrics) c->n_metrics = 0; /* the file's, per output */
    c->loss_args = NULL;
}

/* Resolve the devices, build (or read, fm) and compile the model in the
 * strategy's scope; load its data. */
static int prepare(const char *command, const builtin_model *b, file_model *fm, const run_opts *o, sy_strategy **s,
                   sy_model **m, sy_data_split *d, bool with_data) {
    memset(d, 0, sizeof *d);
    sy_cluster *cluster;
    if (sy_cluster_resolve(o->tpu, &cluster)) return fail(command, "--tpu");
    sy_status st = sy_strategy_new(cluster, s);
    sy_cluster_free(cluster);
    if (st) return fail(command, NULL);
    cli_joined(); /* issue 20: the chief alone prints */
    sy_strategy_scope_enter(*s);
    st = fm ? file_model_load(fm, (uint64_t)o->seed, m) : b->build((uint64_t)o->seed, m);
    if (st == SY_OK && o->dtype_policy) st = sy_model_set_dtype_policy(*m, o->dtype_policy);
    sy_strategy_scope_exit(*s);
    if (st) return fail(command, b->name);
    sy_compile_options c = sy_compile_options_default();
    if (fm && fm->has_optimizer && !o->optimizer_set) { /* the .h5 file's, its learning rate unless given */
        c.optimizer = fm->optimizer;
        if (o->learning_rate_set) c.optimizer.learning_rate = (float)o->learning_rate;
    } else {
        if (sy_optimizer_from_name(o->optimizer, &c.optimizer)) return fail(command, NULL);
        c.optimizer.learning_rate = (float)o->learning_rate;
    }
    /* issue 17, learning-rate schedules: --learning-rate is a constant rate, over a file's schedule too;
     * --lr-schedule starts from the optimizer's rate unless it names initial_learning_rate */
    if (o->learning_rate_set) c.optimizer.schedule.kind = SY_LR_SCHEDULE_NONE;
    if (o->lr_schedule && sy_lr_schedule_parse(o->lr_schedule, c.optimizer.learning_rate, &c.optimizer.schedule))
        return flag_refused(command, "--lr-schedule");
    c.loss = b->loss;
    /* the .h5 file's own loss, with its from_logits (a --loss NAME takes probabilities, as Keras's compile(loss=NAME)) */
    c.from_logits = fm ? b->loss == fm->saved_loss && fm->saved_from_logits : b->from_logits;
    /* issue 17: the file's Loss object's arguments, and --label-smoothing over them */
    sy_loss_args args = fm && b->loss == fm->saved_loss && fm->saved_has_args ? fm->saved_args : sy_loss_args_default();
    if (fm && b->loss == fm->saved_loss && fm->saved_has_args) c.loss_args = &args;
    if (o->label_smoothing_set) {
        args.label_smoothing = o->label_smoothing;
        c.loss_args = &args;
    }
    c.metrics = b->metrics;
    c.n_metrics = b->n_metrics;
    saved_outputs so;
    if (fm && fm->has_optimizer) compile_saved_outputs(*m, o, &so, &c);
    if (fm && !o->metrics && !c.outputs) { /* issue 17: the file's weighted_metrics, unless --metrics
                                              replaces its metrics (per output: compile_saved_outputs) */
        c.weighted_metrics = fm->weighted;
        c.n_weighted_metrics = fm->n_weighted;
    }
    c.steps_per_execution = (int32_t)o->steps_per_execution;
    if ((st = sy_model_compile(*m, &c))) {
        /* an unknown --loss or --metrics name, or a metric that does not go with the loss: known only now */
        if ((st == SY_ERR_NOT_FOUND || st == SY_ERR_INVALID_ARGUMENT) && (o->loss || o->metrics))
            return flag_refused(command, o->loss && o->metrics ? "--loss, --metrics" : o->loss ? "--loss" : "--metrics");
        if (st == SY_ERR_INVALID_ARGUMENT && o->label_smoothing_set) return flag_refused(command, "--label-smoothing");
        return fail(command, b->name);
    }
    if (o->load_weights && sy_model_load_weights(*m, o->load_weights)) return fail(command, "--load-weights");
    if (with_data && (fm ? file_model_data(fm, d) : b->load(d))) return fail(command, NULL);
    return 0;
}

/* The library's messages with its INFO ones too, on stderr, for --resume. */
static void log_with_info(void *ctx, sy_log_level level, const char *message) {
    (void)ctx;
    if (level < SY_LOG_ERROR && sy_cluster_rank() > 0) return; /* issue 20: the chief says it */
    if (level == SY_LOG_INFO) fprintf(stderr, "%s\n", message);
    else if (level > SY_LOG_INFO)
        fprintf(stderr, "systolic: %s: %s\n", level == SY_LOG_WARNING ? "warning" : "error", message);
}

static void print_logs(FILE *out, const sy_logs *l) {
    for (int32_t i = 0; i < l->n; i++) { /* as Keras's progress bar: "nan", never "-nan"; %.4e for small values */
        char v[64];
        sy_logs_format_value(v, sizeof v, l->values[i]);
        fprintf(out, "%s%s: %s", i ? " - " : "", l->names[i], v);
    }
    fprintf(out, "\n");
}

/* What a command does once its model is built and compiled and its data
 * loaded; returns the exit status. */
typedef int (*body_fn)(const command_spec *c, const builtin_model *b, const run_opts *o, sy_model *m,
                       const sy_data_split *d);

static int run(const command_spec *c, int argc, char **argv, bool with_data, body_fn body) {
    flag f[F_N];
    run_opts o;
    const builtin_model *b = NULL;
    file_model fm;
    int rc = parse(c, argc, argv, f, &o, &b, &fm);
    if (rc >= 0) return rc;
    sy_model *m = NULL;
    sy_strategy *s = NULL;
    sy_data_split d;
    rc = prepare(c->name, b, b == &fm.b ? &fm : NULL, &o, &s, &m, &d,
                 with_data && !o.data && !o.inputs.n);
    if (rc == 0) rc = body(c, b, &o, m, &d);
    sy_data_split_free(&d);
    sy_model_free(m);
    sy_strategy_free(s);
    return rc;
}

/* Counts the steps fit runs (the epochs of a dataset have no length known
 * ahead): the hook sees the last step of each host round trip. */
typedef struct step_count {
    int64_t epoch, total;
} step_count;

static sy_status count_steps(void *ctx, sy_model *m, int64_t step, const sy_logs *logs) {
    (void)m, (void)logs;
    ((step_count *)ctx)->epoch = step + 1;
    return SY_OK;
}

static sy_status count_epoch(void *ctx, sy_model *m, int32_t epoch, const sy_logs *logs) {
    (void)m, (void)epoch, (void)logs;
    step_count *c = ctx;
    c->total += c->epoch;
    c->epoch = 0;
    return SY_OK;
}

/* --monitor must name what fit's logs will hold -- loss, the metrics, and
 * each with val_ -- or early stopping would never stop (Keras warns each
 * epoch; a command line is refused at once). Returns -1 to go on, else 2. */
static int check_monitor(const command_spec *c, const run_opts *o, const sy_model *m) {
    if (!o->early_stopping || !o->monitor) return -1;
    const char *name = strncmp(o->monitor, "val_", 4) ? o->monitor : o->monitor + 4;
    char known[2048] = "loss";
    bool found = !strcmp(name, "loss");
    size_t len = strlen(known);
    /* Keras's names, in its order: "<metric>" with one output; with several "<output>_loss" for
     * each, then "<output>_<metric>" */
    bool several = m->n_outputs > 1;
    for (int pass = several ? 0 : 1; pass < 2; pass++)
        for (int32_t j = 0; j < m->n_outputs; j++)
            for (int32_t i = pass ? 0 : -1;
                 i < (pass ? m->heads[j].n_metrics : 0) && len < sizeof known; i++) {
                char log[160];
                snprintf(log, sizeof log, "%s%s%s", several ? model_output_name(m, j) : "",
                         several ? "_" : "", i < 0 ? "loss" : m->heads[j].metrics[i].name);
                found |= !strcmp(name, log);
                len += (size_t)snprintf(known + len, sizeof known - len, ", %s", log);
            }
    if (found) return -1;
    fprintf(stderr,
            "systolic %s: --monitor: '%s' is not in the logs; known: %s, and each with val_\n",
            c->name, o->monitor, known);
    return 2;
}

static int train_body(const command_spec *c, const builtin_model *b, const run_opts *o, sy_model *m,
                      const sy_data_split *d) {
    int rc = check_monitor(c, o, m);
    if (rc >= 0) return rc;
    sy_fit_options fo = sy_fit_options_default();
    fo.batch_size = o->batch_size;
    fo.epochs = (int32_t)o->epochs;
    fo.steps_per_epoch = o->steps_per_epoch;
    fo.validation_freq = (int32_t)o->validation_freq;
    fo.validation_steps = o->validation_steps;
    fo.x_val = d->x_test;
    fo.y_val = d->y_test;
    fo.seed = (uint64_t)o->seed;
    fo.verbose = (int32_t)o->verbose;
    fo.model_dir = o->model_dir;
    fo.save_checkpoints_steps = o->save_checkpoints_steps;
    if (o->keep_checkpoints) fo.keep_checkpoint_max = (int32_t)o->keep_checkpoints;
    fo.resume = o->resume;
    /* issue 17, fit arguments */
    if (o->validation_split > 0) {
        fo.validation_split = o->validation_split;
        fo.x_val = fo.y_val = NULL; /* Keras ignores validation_split beside validation_data: the split it is */
    }
    if (o->n_class_weights) {
        fo.class_weight = o->class_weights;
        fo.n_class_weight = o->n_class_weights;
    }
    /* where a resumed run goes on from: fit says (sy_log, at INFO), naming
     * the checkpoint it loaded and any damaged one it skipped */
    if (o->resume && o->verbose) sy_set_log(log_with_info, NULL);
    step_count count = {0, 0};
    /* Each feature's callback goes into cbs; all are freed at the end. */
    sy_callback cbs[12];
    int32_t n_cbs = 0;
    cbs[n_cbs++] = (sy_callback){&count, NULL, NULL, count_steps, count_epoch, NULL, NULL};
    sy_status st = SY_OK;
    if (o->reduce_lr) { /* issue 17: first, so that the CSV log and the history have its lr */
        sy_reduce_lr_options rl = sy_reduce_lr_options_default();
        rl.patience = (int32_t)o->reduce_lr_patience;
        rl.factor = o->reduce_lr_factor;
        rl.min_lr = o->reduce_lr_min_lr;
        if (o->reduce_lr_monitor) rl.monitor = o->reduce_lr_monitor;
        rl.verbose = o->verbose ? 1 : 0;
        if (!(st = sy_callback_reduce_lr_on_plateau(&rl, &cbs[n_cbs]))) n_cbs++;
    }
    bool chief = model_chief(m); /* issue 20: the one writer of the files below */
    if (!st && o->csv_log && chief) {
        st = sy_callback_csv_logger(o->csv_log, ',', o->csv_append, &cbs[n_cbs]);
        if (!st) n_cbs++;
    }
    if (!st && o->early_stopping) {
        sy_early_stopping_options es = sy_early_stopping_options_default();
        es.patience = (int32_t)o->patience;
        if (o->monitor) es.monitor = o->monitor;
        es.min_delta = o->min_delta;
        es.restore_best_weights = o->restore_best_weights;
        es.verbose = o->verbose ? 1 : 0; /* its messages unless --verbose 0 */
        st = sy_callback_early_stopping(&es, &cbs[n_cbs]);
        if (!st) n_cbs++;
    }
    if (!st && o->terminate_on_nan && !(st = sy_callback_terminate_on_nan(stdout, &cbs[n_cbs]))) n_cbs++;
    if (!st && o->checkpoint_filepath) { /* issue 17, fit arguments */
        sy_model_checkpoint_options mc = sy_model_checkpoint_options_default();
        mc.filepath = o->checkpoint_filepath;
        if (o->checkpoint_monitor) mc.monitor = o->checkpoint_monitor;
        if (o->checkpoint_mode) mc.mode = o->checkpoint_mode;
        mc.save_best_only = o->save_best_only;
        mc.save_weights_only = o->save_weights_only;
        mc.save_freq = o->save_freq;
        mc.verbose = o->verbose ? 1 : 0;
        mc.progress = stdout;
        if (sy_callback_model_checkpoint(&mc, &cbs[n_cbs])) { /* a pattern that cannot be formatted: usage */
            for (int32_t i = 0; i < n_cbs; i++) sy_callback_free(&cbs[i]);
            return flag_refused(c->name, "--checkpoint-filepath");
        }
        if (chief) n_cbs++;
        else sy_callback_free(&cbs[n_cbs]); /* checked alike on every rank, kept by the writer */
    }
    if (!st && o->backup_dir && !(st = sy_callback_backup_and_restore(o->backup_dir, 0, true, &cbs[n_cbs]))) n_cbs++;
    if (!st && o->logdir && chief) {
        sy_tensorboard_options tb = sy_tensorboard_options_default();
        tb.log_dir = o->logdir;
        tb.update_freq = o->update_freq;
        if (!(st = sy_callback_tensorboard(&tb, &cbs[n_cbs]))) n_cbs++;
    }
    fo.callbacks = cbs;
    fo.n_callbacks = n_cbs;
    sy_history *h = NULL;
    double t0 = now_seconds();
    if (st) {
        /* a callback could not be made: st and its message stand */
    } else if (o->data) {
        sy_tfrecord_options to = sy_tfrecord_options_default();
        to.skip_corrupt = o->skip_corrupt;
        sy_dataset *train = NULL, *val = NULL;
        record_parse parse;
        sy_record_spec spec = o->spec; /* issue 17: --features, fitted to the model there */
        st = o->data_compression ? sy_compression_from_name(o->data_compression, &to.compression) : SY_OK;
        if (!st)
            st = records_datasets(b, m, o->data, o->features ? &spec : NULL, &to, o->batch_size,
                                  o->steps_per_epoch, (uint64_t)o->seed, &parse, &train, &val);
        st = strategy_agree(m->strategy, st); /* issue 20: every rank goes on, or none */
        if (!st) st = sy_model_fit_dataset(m, train, val, &fo, &h);
        sy_dataset_free(train);
        sy_dataset_free(val);
    } else if (b->pipeline) { /* the tutorial's own tf.data pipeline */
        sy_dataset *train = NULL, *val = NULL;
        int32_t hosts = sy_strategy_hosts(m->strategy); /* issue 20: each host its shard */
        st = cli_check_host_batch(m, o->batch_size);
        if (!st)
            st = b->pipeline(d, cli_host_batch(m, o->batch_size, true), cli_host_batch(m, o->batch_size, false),
                             (uint64_t)o->seed, hosts, sy_strategy_host(m->strategy), &train, &val);
        st = strategy_agree(m->strategy, st); /* issue 20: every rank goes on, or none */
        fo.x_val = fo.y_val = NULL;
        if (!st) st = sy_model_fit_dataset(m, train, val, &fo, &h);
        sy_dataset_free(train);
        sy_dataset_free(val);
    } else {
        st = sy_model_fit(m, d->x_train, d->y_train, &fo, &h);
    }
    cli_log_reset();
    for (int32_t i = 0; i < n_cbs; i++) sy_callback_free(&cbs[i]);
    if (st) return fail(c->name, b->name);
    int32_t n = sy_history_epochs(h);
    if (o->terminate_on_nan && n > 0 && !isfinite(sy_logs_get(sy_history_logs(h, n - 1), "loss"))) {
        /* the weights are not numbers: writing them would only replace good files */
        fprintf(stderr, "systolic train: %s: training stopped in epoch %d: the loss is not a finite number%s\n",
                b->name, n, o->save_weights || o->save_model ? "; nothing was saved" : "");
        sy_history_free(h);
        return 1;
    }
    if (o->save_weights && strategy_agree(m->strategy, chief ? sy_model_save_weights(m, o->save_weights) : SY_OK)) {
        sy_history_free(h);
        return fail(c->name, "--save-weights");
    }
    double secs = now_seconds() - t0;
    int64_t steps = count.total, per_epoch = n ? steps / n : 0;
    printf("%s: %d epoch%s of %lld steps in %.1f s (%.0f samples/s)", b->name, n, n == 1 ? "" : "s",
           (long long)per_epoch, secs, secs > 0 ? (double)(steps * o->batch_size) / secs : 0.0);
    if (n > 0) {
        printf("; ");
        print_logs(stdout, sy_history_logs(h, n - 1));
    } else {
        printf("\n");
    }
    sy_history_free(h);
    if (o->save_model) { /* model.save() for FILE.h5, model.to_json() for FILE.json */
        if (strategy_agree(m->strategy, chief ? model_file_save(m, o->save_model) : SY_OK))
            return fail(c->name, "--save-model");
        printf("saved %s\n", o->save_model);
    }
    return 0;
}

/* issue 17: evaluate's and predict's --data: GLOB's records in order, the
 * last batch partial (padded by evaluate and predict, left out of their
 * results). */
static sy_status records_for(const builtin_model *b, const sy_model *m, const run_opts *o,
                             bool with_label, record_parse *parse, sy_record_spec *spec,
                             sy_dataset **out) {
    sy_tfrecord_options to = sy_tfrecord_options_default();
    to.skip_corrupt = o->skip_corrupt;
    *spec = o->spec;
    sy_status st = o->data_compression ? sy_compression_from_name(o->data_compression, &to.compression) : SY_OK;
    if (!st)
        st = records_eval_dataset(b, m, o->data, o->features ? spec : NULL, &to, o->batch_size, with_label, parse, out);
    return strategy_agree(m->strategy, st); /* issue 20: every rank goes on, or none */
}

static int evaluate_body(const command_spec *c, const builtin_model *b, const run_opts *o, sy_model *m,
                         const sy_data_split *d) {
    sy_evaluate_options eo = sy_evaluate_options_default();
    eo.batch_size = o->batch_size;
    eo.steps = o->eval_steps;
    eo.verbose = (int32_t)o->verbose;
    sy_logs l;
    if (o->data) { /* issue 17 */
        record_parse parse;
        sy_record_spec spec;
        sy_dataset *data = NULL;
        sy_status st = records_for(b, m, o, true, &parse, &spec, &data);
        if (!st) st = sy_model_evaluate_dataset(m, data, &eo, &l);
        sy_dataset_free(data);
        if (st) return fail(c->name, b->name);
    } else if (sy_model_evaluate(m, d->x_test, d->y_test, &eo, &l)) {
        return fail(c->name, b->name);
    }
    print_logs(stdout, &l);
    return 0;
}

/* predict --input or --data: the model's whole outputs for every sample,
 * to --output (arrays.c): one array per output. */
static int predict_file(const command_spec *c, const builtin_model *b, const run_opts *o, sy_model *m) {
    int32_t n_out = m->n_outputs;
    sy_tensor *x[MODEL_MAX_IO] = {NULL}, *p[MODEL_MAX_IO] = {NULL};
    if (array_check_output_for(o->output, m)) return flag_refused(c->name, "--output");
    sy_evaluate_options eo = sy_evaluate_options_default();
    eo.batch_size = o->batch_size;
    eo.verbose = (int32_t)o->verbose;
    sy_status st;
    if (o->data) { /* issue 17: every record of --data's files, once */
        record_parse parse;
        sy_record_spec spec;
        sy_dataset *data = NULL;
        st = records_for(b, m, o, false, &parse, &spec, &data);
        if (!st) st = sy_model_predict_dataset_multi(m, data, &eo, p, n_out);
        sy_dataset_free(data);
    } else {
        bool usage;
        if (array_read_inputs(&o->inputs, m, x, &usage))
            return usage ? flag_refused(c->name, "--input") : fail(c->name, "--input");
        st = sy_model_predict_multi(m, (const sy_tensor *const *)x, m->n_inputs, &eo, p, n_out);
        for (int32_t i = 0; i < m->n_inputs; i++) sy_tensor_free(x[i]);
    }
    if (st) return fail(c->name, b->name);
    st = strategy_agree(m->strategy, model_chief(m) ? array_write_outputs(o->output, p, n_out, m) : SY_OK); /* issue 20 */
    if (!st) array_print_written(stdout, o->output, p, n_out, m);
    for (int32_t j = 0; j < n_out; j++) sy_tensor_free(p[j]);
    return st ? fail(c->name, "--output") : 0;
}

/* Predictions of the first --count test samples (each sample's prediction
 * is the same whatever else is in its batch). A one-unit output is a
 * sigmoid's probability of class 1: the predicted class is 1 above 0.5, as
 * binary_accuracy counts it, and the probability printed is that class's. */
static int predict_body(const command_spec *c, const builtin_model *b, const run_opts *o, sy_model *m,
                        const sy_data_split *d) {
    if (o->inputs.n || o->data) return predict_file(c, b, o, m);
    int64_t samples = sy_tensor_shape(d->x_test).dims[0], n = samples < o->count ? samples : o->count;
    printf("sample label predicted probability\n");
    if (n == 0) return 0;
    sy_evaluate_options eo = sy_evaluate_options_default();
    eo.batch_size = o->batch_size;
    eo.verbose = (int32_t)o->verbose;
    sy_tensor *x = NULL, *p = NULL;
    if (builtin_head(d->x_test, n, &x) || sy_model_predict(m, x, &eo, &p)) {
        sy_tensor_free(x);
        return fail(c->name, b->name);
    }
    sy_tensor_free(x);
    sy_shape s = sy_tensor_shape(p);
    int64_t classes = s.dims[s.rank - 1];
    const float *v = sy_tensor_data(p);
    for (int64_t i = 0; i < n; i++) {
        const float *row = v + i * classes;
        int64_t best = 0;
        float prob = row[0];
        if (classes == 1) {
            best = row[0] > 0.5f;
            prob = best ? row[0] : 1.0f - row[0];
        }
        for (int64_t j = 1; j < classes; j++)
            if (row[j] > row[best]) best = j, prob = row[j];
        printf("%6lld %5.0f %9lld %11.4f\n", (long long)i, sy_tensor_get(d->y_test, i), (long long)best, prob);
    }
    sy_tensor_free(p);
    return 0;
}

static int summary_body(const command_spec *c, const builtin_model *b, const run_opts *o, sy_model *m,
                        const sy_data_split *d) {
    (void)d;
    if (o->plan_predict && !o->plan) {
        fprintf(stderr, "systolic %s: --predict goes with --plan (the step it prints)\n", c->name);
        return 2;
    }
    if (!o->plan) {
        sy_model_summary(m, stdout);
        return 0;
    }
    /* issue 21: the training step fit compiles (or, --predict, the step predict compiles), one replica's share
     * of the global batch */
    int64_t r = model_replicas(m);
    if (o->batch_size % r) {
        fprintf(stderr,
                "systolic %s: --batch-size %lld does not divide among the %lld replicas; use a "
                "multiple of %lld\n",
                c->name, (long long)o->batch_size, (long long)r, (long long)r);
        return 2;
    }
    return sy_model_plan_summary(m, o->batch_size / r, !o->plan_predict, stdout) ? fail(c->name, b->name) : 0;
}

int cmd_train(int argc, char **argv) {
    static const command_spec c = {"train",
                                   "Train a model on its dataset (model.fit), validating on the test split: a built-in "
                                   "model, or a Keras model file (MODEL.json, model.to_json()'s output, or MODEL.h5, model.save()'s) with --dataset "
                                   "or --data.",
                                   train_flags};
    return run(&c, argc, argv, true, train_body);
}

int cmd_evaluate(int argc, char **argv) {
    static const command_spec c = {"evaluate",
                                   "Evaluate a model (built-in, or MODEL.json or MODEL.h5 with --dataset) on its test split "
                                   "(model.evaluate), or on every record of --data's files: loss and metrics over every "
                                   "sample. The weights are the model's initial ones (seeded) unless --load-weights.",
                                   eval_flags};
    return run(&c, argc, argv, true, evaluate_body);
}

int cmd_predict(int argc, char **argv) {
    static const command_spec c = {"predict",
                                   "Run a model (built-in, or MODEL.json or MODEL.h5 with --dataset) on the first --count samples of "
                                   "its test split (model.predict) and "
                                   "print its predictions: sample, label, predicted class and its probability (for a "
                                   "one-unit sigmoid output, class 1 when the output is above 0.5). With --input "
                                   "FILE.npy (or FILE.npz:KEY; one per model input), or --data tfrecord:GLOB, and "
                                   "--output OUT.npy: the model's whole output for every sample, written to OUT.npy "
                                   "as float32 (samples, output shape...), as model.predict returns it, to OUT.npz "
                                   "(one array per output, named after it), or to OUT.csv.",
                                   predict_flags};
    return run(&c, argc, argv, true, predict_body);
}

/* issue 18: the model quantized to an int8 .tflite file, calibrated on its training split. */
static int quantize_body(const command_spec *c, const builtin_model *b, const run_opts *o, sy_model *m,
                         const sy_data_split *d) {
    sy_lite_quantize_options q = sy_lite_quantize_options_default();
    q.calibration_steps = o->calibration_steps;
    q.batch_size = o->batch_size;
    q.int8_input = o->input_type && !strcmp(o->input_type, "int8");
    q.int8_output = o->output_type && !strcmp(o->output_type, "int8");
    q.dynamic_range = o->dynamic_range;
    /* the layers first: a model the quantizer refuses is refused before its data loads */
    if (sy_lite_quantize_check(m, &q)) return fail(c->name, b->name);
    sy_lite_quantize_report r;
    if (sy_lite_quantize_dynamic(m, &q)) { /* no calibration: the weights alone */
        if (q.int8_input || q.int8_output) {
            fprintf(stderr, "systolic %s: --inference-input-type and --inference-output-type int8 are for full-integer "
                    "quantization; a dynamic-range file takes and gives what the model does\n", c->name);
            return 2;
        }
        if (sy_lite_quantize(m, NULL, &q, o->tflite_out, &r)) return fail(c->name, b->name);
        printf("%s: quantized to %s (TFLite dynamic-range: int8 weights, float32 activations)\n", b->name,
               o->tflite_out);
        printf("operators: %d (%s)\n", r.n_ops, r.ops);
        printf("size: %lld bytes of float32 weights -> %lld bytes of file (%.2fx smaller)\n", (long long)r.float_bytes,
               (long long)r.file_bytes, r.file_bytes ? (double)r.float_bytes / (double)r.file_bytes : 0.0);
        return 0;
    }
    sy_data_split own;
    if (!d->x_train) {
        if (b->build ? b->load(&own) : file_model_data((const file_model *)b, &own)) return fail(c->name, NULL);
        d = &own;
    }
    /* the samples calibration takes, as float32 (Keras casts raw pixels the same way) */
    sy_shape xs = sy_tensor_shape(d->x_train);
    int64_t per = xs.dims[0] > 0 ? sy_tensor_count(d->x_train) / xs.dims[0] : 0;
    if (xs.dims[0] > q.calibration_steps * q.batch_size) xs.dims[0] = q.calibration_steps * q.batch_size;
    sy_tensor *x = NULL;
    sy_status st = sy_tensor_new(SY_F32, xs, &x);
    for (int64_t i = 0; !st && i < xs.dims[0] * per; i++) ((float *)sy_tensor_data(x))[i] = (float)sy_tensor_get(d->x_train, i);
    if (!st) st = sy_lite_quantize(m, x, &q, o->tflite_out, &r);
    sy_tensor_free(x);
    if (d == &own) sy_data_split_free(&own);
    if (st) return fail(c->name, b->name);
    printf("%s: quantized to %s (int8, TFLite full-integer: %s input, %s output), calibrated on %lld training "
           "samples\n", b->name, o->tflite_out, q.int8_input ? "int8" : "float32", q.int8_output ? "int8" : "float32",
           (long long)r.samples);
    printf("operators: %d (%s)\n", r.n_ops, r.ops);
    printf("size: %lld bytes of float32 weights -> %lld bytes of file (%.2fx smaller)\n", (long long)r.float_bytes,
           (long long)r.file_bytes, r.file_bytes ? (double)r.float_bytes / (double)r.file_bytes : 0.0);
    return 0;
}

int cmd_quantize(int argc, char **argv) {
    static const command_spec c = {"quantize",
                                   "Quantize a model (built-in, or MODEL.h5 / MODEL.json with --dataset; its weights from "
                                   "the file or --load-weights) to an int8 TensorFlow Lite file, as TFLiteConverter does "
                                   "with optimizations=[DEFAULT] and a representative dataset: per-channel int8 weights, "
                                   "int8 activations calibrated on --calibration-steps batches of its training data, "
                                   "int32 biases (full-integer, the default for float inputs). A model with an Embedding "
                                   "or an LSTM (such as imdb_lstm), or any with --dynamic-range, is quantized as the "
                                   "converter does without a representative dataset: dynamic-range, int8 weights and "
                                   "float32 activations, its recurrent and dense layers TFLite's hybrid kernels. "
                                   "Usage: systolic quantize MODEL -o OUT.tflite [flags].",
                                   quantize_flags};
    /* -o is --output's short form here */
    char **args = malloc(((size_t)argc + 1) * sizeof *args);
    if (!args) return 1;
    const char *out = NULL, *in_type = NULL, *out_type = NULL;
    bool help = false;
    for (int i = 0; i < argc; i++) {
        args[i] = !strcmp(argv[i], "-o") ? (char *)"--output" : argv[i];
        help |= !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h");
        if (i + 1 < argc && (!strcmp(args[i], "--output"))) out = argv[i + 1];
        if (i + 1 < argc && !strcmp(argv[i], "--inference-input-type")) in_type = argv[i + 1];
        if (i + 1 < argc && !strcmp(argv[i], "--inference-output-type")) out_type = argv[i + 1];
    }
    args[argc] = NULL;
    const char *bad = help ? NULL
                      : !out ? "which file? give -o OUT.tflite"
                      : in_type && strcmp(in_type, "float32") && strcmp(in_type, "int8")
                          ? "--inference-input-type: expected float32 or int8"
                      : out_type && strcmp(out_type, "float32") && strcmp(out_type, "int8")
                          ? "--inference-output-type: expected float32 or int8"
                          : NULL;
    int rc;
    if (bad) {
        fprintf(stderr, "systolic quantize: %s\n", bad);
        rc = 2;
    } else {
        rc = run(&c, argc, args, false, quantize_body); /* the body loads the data, once the layers pass */
    }
    free(args);
    return rc;
}

int cmd_summary(int argc, char **argv) {
    static const command_spec c = {"summary",
                                   "Print a model's Keras summary (built-in, MODEL.json or MODEL.h5): layers, output shapes, "
                                   "parameters.",
                                   summary_flags};
    return run(&c, argc, argv, false, summary_body);
}
