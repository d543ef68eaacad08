/*
 * records.c - `systolic train MODEL --data tfrecord:GLOB`: a model's data
 * read from TFRecord files of tf.train.Examples, as `systolic convert`
 * writes them, through the input pipeline (a built-in model's sample
 * shape is its tutorial's; a model file's is its input, word sequences
 * when it starts with an Embedding: model_file.c):
 *
 *   files (GLOB, sorted) -> TFRecordDataset (one file after another)
 *   -> [training: shuffle] -> map(parse and
 *   decode, on parallel threads) -> batch (training: drop_remainder, the
 *   static shape the plan needs) -> [repeat, when steps_per_epoch is set]
 *   -> prefetch(AUTOTUNE)
 *
 * What an Example holds is convert.c's: images as "image" (the raw uint8
 * pixels, H*W*C bytes, channels last) and "label" (int64); IMDB reviews as
 * "text" (int64 word indices as Keras's load_data gives them with its
 * defaults) and "label". The parse function makes what the model takes
 * from arrays: images uint8 (H, W, C); reviews int32 (maxlen), with the
 * words the model's vocabulary lacks turned into the out-of-vocabulary
 * index 2 and padded or cut at the start, as load_data(num_words) and
 * pad_sequences do. So the same model trains on the same numbers either
 * way. Any other layout, and a model with several inputs and outputs, is
 * read through a --features record spec (issue 17; src/data/features.c),
 * arranged in the model's input and output order, so that each element is
 * (x1..xn, y1..ym, [sample_weight]) as sy_model_fit_dataset takes it.
 *
 * The shuffle buffer holds 65,536 records, more than the training split
 * of any built-in dataset, so each epoch is a uniform shuffle, as fit()
 * gives arrays; the seed is the command's. That is also why the files are
 * read one after another: reading several at once (num_parallel_reads)
 * would mix nothing the buffer does not, and its reader threads cost
 * CPU the replicas want (bench_pipeline measured about 3.1 microseconds
 * of CPU per element with 4 parallel reads, 2.3 with one).
 *
 * issue 20, TPU Pods: on H hosts each reads its own share, as tf.data's
 * auto-sharding gives a Pod's hosts theirs, and batches it by its share
 * of the global batch (the global batch / replicas x its replicas).
 * Training shards by file (host h reads files h, h + H, ...: FILE policy)
 * when there are at least H files, else by record (DATA policy: record i
 * to host i % H, after reading, before parsing); evaluate and predict
 * always by record, so that the hosts' predictions interleave back into
 * the files' order (replicas_gather_dealt).
 */
#include "cli_internal.h"

#include "core/core_internal.h"   /* sy_error */
#include "keras/keras_internal.h" /* the model's inputs and outputs: names, shapes */

#include <glob.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>

#define SHUFFLE_BUFFER 65536
#define OOV 2 /* Keras's imdb oov_char */

/* Finish an element whose x (out->c[0]) is made: the label v[1] becomes
 * its y; the parsed tensors are freed either way. */
static sy_status with_label(sy_status st, sy_tensor *v[2], sy_element *out) {
    if (!st) {
        out->c[1] = v[1];
        v[1] = NULL;
        out->n = 2;
    }
    sy_tensor_free(v[0]);
    sy_tensor_free(v[1]);
    return st;
}

/* An Example's image and label: uint8 (H, W, C) and int64 (). */
static sy_status parse_image(const record_parse *p, const sy_string *rec, sy_element *out) {
    sy_feature_spec specs[2] = {{"image", SY_FEATURE_FIXED_LEN, SY_STRING, sy_shape_of(0), NULL},
                                {"label", SY_FEATURE_FIXED_LEN, SY_I64, sy_shape_of(0), NULL}};
    sy_tensor *v[2] = {NULL, NULL};
    sy_status st = sy_parse_single_example(rec->data, (size_t)rec->size, specs, 2, v);
    if (st) return st;
    sy_string img = sy_tensor_string(v[0], 0);
    int64_t want = sy_shape_count(&p->x_shape);
    if (img.size != want) {
        char s[SY_SHAPE_STR_MAX];
        st = sy_error(SY_ERR_SHAPE, "\"image\" holds %lld bytes but model %s takes %s images (%lld bytes)",
                      (long long)img.size, p->b->name, sy_shape_format(&p->x_shape, s, sizeof s), (long long)want);
    }
    if (!st) st = sy_tensor_new(SY_U8, p->x_shape, &out->c[0]);
    if (!st) memcpy(sy_tensor_data(out->c[0]), img.data, (size_t)want);
    return with_label(st, v, out);
}

/* An Example's review and label: int32 (maxlen) and int64 (). */
static sy_status parse_words(const record_parse *p, const sy_string *rec, sy_element *out) {
    sy_feature_spec specs[2] = {{"text", SY_FEATURE_VAR_LEN, SY_I64, sy_shape_of(0), NULL},
                                {"label", SY_FEATURE_FIXED_LEN, SY_I64, sy_shape_of(0), NULL}};
    sy_tensor *v[2] = {NULL, NULL};
    sy_status st = sy_parse_single_example(rec->data, (size_t)rec->size, specs, 2, v);
    if (st) return st;
    int64_t maxlen = p->b->maxlen, n = sy_tensor_count(v[0]), keep = n < maxlen ? n : maxlen;
    if (!(st = sy_tensor_new(SY_I32, sy_shape_of(1, maxlen), &out->c[0]))) {
        const int64_t *words = (const int64_t *)sy_tensor_data(v[0]) + (n - keep); /* truncating 'pre' */
        int32_t *x = (int32_t *)sy_tensor_data(out->c[0]) + (maxlen - keep);     /* padding 'pre' (zeros) */
        for (int64_t i = 0; i < keep; i++) x[i] = words[i] >= 0 && words[i] < p->b->num_words ? (int32_t)words[i] : OOV;
    }
    return with_label(st, v, out);
}

/* issue 17, TFRecord layouts: an Example of any layout, through the
 * --features spec, into (x..., y..., [w]) in the model's order (or the x's
 * alone for predict: fit_spec cut the spec to them); the element carries
 * its file and record index (with_origin), which every error names. */
static sy_status parse_with_spec(const record_parse *p, const sy_element *in, const sy_string *rec, sy_element *out) {
    char where[512];
    sy_string file = sy_tensor_string(in->c[1], 0);
    snprintf(where, sizeof where, "%.*s, record %lld", (int)(file.size > 400 ? 400 : file.size), (const char *)file.data,
             (long long)*(const int64_t *)sy_tensor_data(in->c[2]));
    return sy_record_spec_apply(p->spec, rec->data, (size_t)rec->size, where, out);
}

static sy_status parse_record(void *ctx, const sy_element *in, sy_element *out) {
    const record_parse *p = ctx;
    sy_string rec = sy_tensor_string(in->c[0], 0);
    sy_status st = p->spec ? parse_with_spec(p, in, &rec, out)
                   : p->b->maxlen ? parse_words(p, &rec, out) : parse_image(p, &rec, out);
    if (!st && !p->spec &&
        !p->with_label) { /* predict: x alone (a spec holds the inputs alone then) */
        for (int32_t i = 1; i < out->n; i++) sy_tensor_free(out->c[i]);
        out->n = 1;
    }
    return st;
}

sy_status records_features(const char *text, sy_record_spec *out) {
    size_t n = strlen(text);
    if (n > 5 && !strcmp(text + n - 5, ".json")) return sy_record_spec_read(text, out);
    return sy_record_spec_parse(text, out);
}

/* issue 17: a compressed file read as plain fails at its first header,
 * and with --skip-corrupt would silently count as one damaged record; so
 * each file's first bytes are looked at first, and gzip's and zlib's
 * headers named with the flag to give. */
static sy_status check_compression(const glob_t *g, const sy_tfrecord_options *to) {
    if (to->compression != SY_COMPRESSION_NONE) return SY_OK;
    for (size_t i = 0; i < g->gl_pathc; i++) {
        struct stat sb;
        if (stat(g->gl_pathv[i], &sb) != 0 || !S_ISREG(sb.st_mode)) continue; /* a FIFO would block: the reader refuses it */
        FILE *f = fopen(g->gl_pathv[i], "rb");
        unsigned char h[2] = {0, 0};
        size_t got = f ? fread(h, 1, 2, f) : 0;
        if (f) fclose(f);
        if (got < 2) continue; /* the reader says what is wrong */
        if (h[0] == 0x1f && h[1] == 0x8b)
            return sy_error(SY_ERR_CORRUPT, "'%s' looks GZIP-compressed (it starts with gzip's magic bytes 1f 8b): "
                            "give --data-compression GZIP", g->gl_pathv[i]);
        /* a plain file starts with a length whose checksum follows; a zlib header passes that only by chance */
        if (h[0] == 0x78 && (h[0] << 8 | h[1]) % 31 == 0) {
            sy_tfrecord_reader *r = NULL;
            const uint8_t *data;
            size_t n;
            bool end;
            sy_tfrecord_options plain = *to;
            plain.skip_corrupt = false;
            sy_status st = sy_tfrecord_reader_open(g->gl_pathv[i], &plain, &r);
            if (!st) st = sy_tfrecord_read(r, &data, &n, &end);
            sy_tfrecord_reader_close(r);
            sy_clear_error();
            if (st)
                return sy_error(SY_ERR_CORRUPT, "'%s' looks ZLIB-compressed (it starts with a zlib header): give "
                                "--data-compression ZLIB", g->gl_pathv[i]);
        }
    }
    return SY_OK;
}

/* The files a glob names, sorted (glob's order); SY_ERR_NOT_FOUND if none. */
static sy_status expand(const char *pattern, glob_t *g) {
    memset(g, 0, sizeof *g);
    int rc = glob(pattern, 0, NULL, g);
    if (rc == GLOB_NOMATCH || (rc == 0 && g->gl_pathc == 0))
        return sy_error(SY_ERR_NOT_FOUND, "no file matches '%s'", pattern);
    if (rc != 0) return sy_error(SY_ERR_IO, "cannot expand '%s' (glob error %d)", pattern, rc);
    return SY_OK;
}

/* The test split's files beside the training ones: the pattern with the
 * last "train" of its file name made "test" (convert's names); NULL when
 * the pattern has none. */
static char *test_pattern(const char *train) {
    const char *base = strrchr(train, '/');
    base = base ? base + 1 : train;
    const char *at = NULL;
    for (const char *q = strstr(base, "train"); q; q = strstr(q + 1, "train")) at = q;
    if (!at) return NULL;
    size_t n = strlen(train);
    char *s = malloc(n + 1);
    if (!s) return NULL;
    size_t head = (size_t)(at - train);
    memcpy(s, train, head);
    memcpy(s + head, "test", 4);
    strcpy(s + head + 4, at + 5);
    return s;
}

typedef struct pipeline {
    sy_dataset *stages[8];
    int n;
} pipeline;

static sy_dataset *top(const pipeline *p) { return p->stages[p->n - 1]; }

/* Keep stage d (made with status st) as the pipeline's last. */
static sy_status push(pipeline *p, sy_status st, sy_dataset **d) {
    if (st == SY_OK) p->stages[p->n++] = *d;
    return st;
}

static void pipeline_free(pipeline *p) {
    for (int i = 0; i < p->n; i++) sy_dataset_free(p->stages[i]);
    p->n = 0;
}

/* One split's pipeline (see the top of the file); *out holds its own
 * reference to the last stage. */
static sy_status split_dataset(const builtin_model *b, const sy_model *m, record_parse *parse, const char *pattern,
                               const sy_tfrecord_options *to, int64_t batch, bool training, int64_t steps_per_epoch,
                               uint64_t seed, sy_dataset **out) {
    *out = NULL;
    glob_t g;
    sy_status st = expand(pattern, &g);
    if (st) return st;
    int32_t files = (int32_t)g.gl_pathc;
    /* issue 20: this host's share: its files, or (fewer files than hosts, or not training) its records */
    int32_t hosts = model_hosts(m), host = hosts > 1 ? sy_strategy_host(m->strategy) : 0;
    bool by_file = hosts > 1 && training && files >= hosts, by_record = hosts > 1 && !by_file;
    const char **names = malloc((size_t)files * sizeof *names);
    if (!names) {
        globfree(&g);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "out of memory");
    }
    int32_t mine = 0;
    for (int32_t f = by_file ? host : 0; f < files; f += by_file ? hosts : 1) names[mine++] = g.gl_pathv[f];
    sy_component_spec specs[SY_ELEMENT_MAX] = {{b->maxlen ? SY_I32 : SY_U8, parse->x_shape},
                                               {SY_I64, sy_shape_of(0)}};
    int32_t n_specs = parse->with_label ? 2 : 1;
    sy_tfrecord_options with_origin = *to;
    if (parse->spec) { /* issue 17: the spec's components, records with their origin */
        with_origin.with_origin = true;
        n_specs = parse->spec->n;
        for (int32_t i = 0; i < n_specs; i++) specs[i] = sy_record_spec_component(parse->spec, i);
    }
    if ((st = check_compression(&g, to))) {
        free(names);
        globfree(&g);
        return st;
    }
    pipeline p = {{NULL}, 0};
    sy_dataset *d = NULL;
    st = push(&p, sy_dataset_tfrecord(names, mine, &with_origin, 1, &d), &d);
    if (!st && by_record) st = push(&p, sy_dataset_shard(top(&p), hosts, host, &d), &d);
    if (!st && training) st = push(&p, sy_dataset_shuffle(top(&p), SHUFFLE_BUFFER, seed, true, &d), &d);
    if (!st) st = push(&p, sy_dataset_map(top(&p), parse_record, parse, SY_AUTOTUNE, specs, n_specs, &d), &d);
    if (!st) st = push(&p, sy_dataset_batch(top(&p), batch, training, &d), &d);
    if (!st && training && steps_per_epoch) st = push(&p, sy_dataset_repeat(top(&p), SY_INFINITE, &d), &d);
    if (!st) st = push(&p, sy_dataset_prefetch(top(&p), SY_AUTOTUNE, &d), &d);
    if (!st) {
        *out = top(&p);
        p.n--; /* the caller's now */
    }
    pipeline_free(&p);
    free(names);
    globfree(&g);
    return st;
}

sy_status records_check_spec(const char *spec) {
    if (strncmp(spec, RECORDS_PREFIX, sizeof RECORDS_PREFIX - 1) != 0 || !spec[sizeof RECORDS_PREFIX - 1])
        return sy_error(SY_ERR_INVALID_ARGUMENT, "'%s': expected tfrecord:GLOB (files `systolic convert` wrote)", spec);
    return SY_OK;
}

/* f, the component for input `name` (or, label, the labels of output
 * `name`), gives numbers of the shape `want` (a label may add or drop a
 * trailing 1, as Keras's losses take (batch,) or (batch, 1)). */
static sy_status check_component(const sy_model *m, const sy_record_feature *f,
                                 const sy_shape *want, const char *name, bool label) {
    const sy_shape *g = &f->shape;
    bool same = g->rank == want->rank, extra_one = false;
    for (int k = 0; same && k < want->rank; k++) same = g->dims[k] == want->dims[k];
    if (label && !same && (g->rank == want->rank + 1 || g->rank + 1 == want->rank)) {
        const sy_shape *longer = g->rank > want->rank ? g : want,
                       *shorter = g->rank > want->rank ? want : g;
        extra_one = longer->dims[longer->rank - 1] == 1;
        for (int k = 0; extra_one && k < shorter->rank; k++)
            extra_one = longer->dims[k] == shorter->dims[k];
    }
    if ((same || extra_one) && f->dtype != SY_STRING) return SY_OK;
    char a[SY_SHAPE_STR_MAX], w[SY_SHAPE_STR_MAX + 8], role[SY_RECORD_NAME_MAX + 24],
        out[SY_SHAPE_STR_MAX + 8];
    snprintf(role, sizeof role, "%s%s%s", f->role, f->name[0] ? "." : "", f->name);
    const char *kind = f->kind == SY_RECORD_IMAGE     ? "Image"
                       : f->kind == SY_RECORD_VAR_LEN ? "VarLen"
                                                      : "FixedLen";
    sy_status st = f->dtype == SY_STRING ? SY_ERR_DTYPE : SY_ERR_SHAPE;
    const char *numbers = f->dtype == SY_STRING ? " numbers" : "";
    sy_shape_format(g, a, sizeof a);
    if (!label)
        return sy_error(
            st, "--features: %s (%s(%s)) gives %s %s but input '%s' of model '%s' takes%s %s", role,
            kind, f->key, sy_dtype_name(f->dtype), a, name, sy_model_name(m), numbers,
            keras_shape_str(want, w, sizeof w));
    int32_t j = 0;
    while (j < m->n_outputs && strcmp(model_output_name(m, j), name)) j++;
    sy_shape o = model_output_shape_at(m, j);
    return sy_error(
        st,
        "--features: %s (%s(%s)) gives %s %s but the loss %s of output '%s' %s takes%s labels of "
        "shape %s per sample",
        role, kind, f->key, sy_dtype_name(f->dtype), a, m->heads[j].loss_name, name,
        keras_shape_str(&o, out, sizeof out), numbers, sy_shape_format(want, w, sizeof w));
}

/* issue 17, TFRecord layouts: the --features spec fitted to model m:
 * arranged in its order, an image's dimensions not fixed by the spec the
 * input's; each x must then be what its input takes, each y what its
 * output's loss takes. */
static sy_status fit_spec(const sy_model *m, record_parse *parse) {
    sy_record_spec *s = parse->spec;
    const char *inputs[MODEL_MAX_IO], *outputs[MODEL_MAX_IO];
    char names[MODEL_MAX_IO][160];
    for (int32_t i = 0; i < m->n_inputs; i++)
        inputs[i] = cli_input_name(m, i, names[i], sizeof names[i]);
    for (int32_t j = 0; j < m->n_outputs; j++) outputs[j] = model_output_name(m, j);
    sy_status st = sy_record_spec_arrange(s, inputs, m->n_inputs, outputs, m->n_outputs);
    if (st) { /* the library's "record spec: ..." is the flag's */
        const char *msg = sy_last_error();
        return sy_error(st, "--features: %s", msg + (strncmp(msg, "record spec: ", 13) ? 0 : 13));
    }
    bool labels = s->n > m->n_inputs;
    if (parse->with_label && !labels) {
        char list[1024] = "";
        for (int32_t j = 0, len = 0; j < m->n_outputs && len < (int32_t)sizeof list; j++)
            len += snprintf(list + len, sizeof list - (size_t)len, "%sy.%s=...", j ? ", " : "",
                            outputs[j]);
        if (m->n_outputs == 1)
            return sy_error(SY_ERR_INVALID_ARGUMENT,
                            "--features: no y (the label) given; training and evaluating "
                            "need one");
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "--features: no y (the labels) given; training and evaluating need "
                        "one for each output: %s",
                        list);
    }
    if (!parse->with_label)
        s->n = m->n_inputs; /* predict: the inputs alone, so records without labels do */
    for (int32_t i = 0; i < m->n_inputs; i++) {
        sy_record_feature *x = &s->f[i];
        sy_shape want = model_input_shape_at(m, i);
        if (x->kind == SY_RECORD_IMAGE && want.rank == 3)
            for (int k = 0; k < 3; k++)
                if (x->shape.dims[k] < 0) x->shape.dims[k] = want.dims[k];
        if ((st = check_component(m, x, &want, inputs[i], false))) return st;
    }
    for (int32_t j = 0; j < m->n_outputs && s->n > m->n_inputs; j++) {
        sy_shape want = model_label_shape(m, j);
        if ((st = check_component(m, &s->f[m->n_inputs + j], &want, outputs[j], true))) return st;
    }
    return SY_OK;
}

static sy_status parse_init(const builtin_model *b, const sy_model *m, sy_record_spec *features,
                            bool with_label, record_parse *parse) {
    parse->b = b;
    parse->x_shape = b->input_shape;
    parse->spec = features;
    parse->with_label = with_label;
    if (features) return fit_spec(m, parse);
    if (m->n_inputs > 1 || m->n_outputs > 1)
        return sy_error(
            SY_ERR_INVALID_ARGUMENT,
            "model '%s' has %d inputs and %d outputs, but the layout `systolic "
            "convert` writes holds one image (or review) and one label: give --features naming a "
            "feature for each input and output (x.NAME=..., y.NAME=...)",
            sy_model_name(m), m->n_inputs, m->n_outputs);
    return SY_OK;
}

sy_status cli_check_host_batch(const sy_model *m, int64_t batch) {
    int64_t replicas = model_replicas(m);
    if (model_hosts(m) > 1 && batch % replicas)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "--batch-size %lld does not divide among the %lld replicas in sync on %d hosts: use a "
                        "multiple of %lld",
                        (long long)batch, (long long)replicas, model_hosts(m), (long long)replicas);
    return SY_OK;
}

int64_t cli_host_batch(const sy_model *m, int64_t batch, bool training) {
    if (model_hosts(m) < 2) return batch;
    int32_t first, local = model_local_replicas(m, &first);
    int64_t replicas = model_replicas(m), per = training ? batch / replicas : (batch + replicas - 1) / replicas;
    return per * local;
}

sy_status records_eval_dataset(const builtin_model *b, const sy_model *m, const char *spec,
                               sy_record_spec *features, const sy_tfrecord_options *options,
                               int64_t batch, bool with_label, record_parse *parse,
                               sy_dataset **out) {
    *out = NULL;
    sy_status st = records_check_spec(spec);
    if (!st) st = parse_init(b, m, features, with_label, parse);
    if (!st) st = split_dataset(b, m, parse, spec + sizeof RECORDS_PREFIX - 1, options, cli_host_batch(m, batch, false), false,
                                0, 0, out);
    return st ? sy_error(st, "--data: %s", sy_last_error()) : SY_OK;
}

sy_status records_datasets(const builtin_model *b, const sy_model *m, const char *spec,
                           sy_record_spec *features, const sy_tfrecord_options *options,
                           int64_t batch, int64_t steps_per_epoch, uint64_t seed,
                           record_parse *parse, sy_dataset **train, sy_dataset **validation) {
    *train = *validation = NULL;
    sy_status st = records_check_spec(spec);
    if (!st) st = parse_init(b, m, features, true, parse);
    if (st) return sy_error(st, "--data: %s", sy_last_error());
    const char *pattern = spec + sizeof RECORDS_PREFIX - 1;
    st = cli_check_host_batch(m, batch);
    if (st) return st;
    st = split_dataset(b, m, parse, pattern, options, cli_host_batch(m, batch, true), true, steps_per_epoch, seed, train);
    if (st) return sy_error(st, "--data: %s", sy_last_error());
    char *test = test_pattern(pattern);
    glob_t g;
    if (test && expand(test, &g) == SY_OK) {
        globfree(&g);
        st = split_dataset(b, m, parse, test, options, cli_host_batch(m, batch, false), false, 0, seed, validation);
        if (st) {
            sy_dataset_free(*train);
            *train = NULL;
            st = sy_error(st, "--data (validation, %s): %s", test, sy_last_error());
        }
    } else {
        if (sy_cluster_rank() == 0) /* issue 20: the chief says it */
            fprintf(stderr, "systolic train: no test files beside '%s'%s%s; training without validation\n", pattern,
                test ? ": nothing matches " : "", test ? test : "");
    }
    if (!st) sy_clear_error(); /* the test files' glob may have failed: that is no error */
    free(test);
    return st;
}
