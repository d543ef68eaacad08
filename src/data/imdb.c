/*
 * imdb.c - Keras's imdb.load_data(), rebuilt from the review texts.
 *
 * Keras downloads imdb.npz, the 50,000 labelled reviews of Maas et al.'s
 * Large Movie Review Dataset already turned into word indices; that file is
 * not available here, so the sequences are rebuilt from what it was made
 * of: the review texts (aclImdb/{train,test}/{pos,neg}/<id>_<rating>.txt,
 * in aclImdb_v1_labeled.tar.gz) and Keras's own word index
 * (imdb_word_index.json: word -> frequency rank). Each review is
 *
 *   1. tokenized as keras.preprocessing.text.text_to_word_sequence does with
 *      its defaults (imdb_tokenize): ASCII letters lower-cased, the
 *      characters !"#$%&()*+,-./:;<=>?@[\]^_`{|}~ tab and newline turned
 *      into spaces, split at spaces, empty words dropped. The HTML line
 *      breaks "<br />" are NOT removed first: they become the word "br", as
 *      they did when Keras made imdb.npz ("br" is rank 7 in its word index,
 *      between "is" and "in"; with the breaks removed it would occur once
 *      in the training reviews). Bytes >= 0x80 (UTF-8) stay inside words
 *      unchanged: the word index was made from byte strings, lower-casing
 *      ASCII only (it holds "Ángela" and "itsÕ", with capitals), and 1,843
 *      of its words hold non-ASCII characters;
 *   2. mapped through the word index, dropping the words it lacks (words
 *      that occur only in test reviews: Keras's docs say they "have simply
 *      been skipped").
 *
 * With these rules the training reviews' words are exactly the 88,584 words
 * of the index, and ordering them by their count in the training reviews
 * gives the index's ranks with no exception (ties aside): this is how Keras
 * made the index, and its sequences with it. Checked with Python against
 * what tutorials print of Keras's data: the first training review (train/
 * pos/576_10.txt here) comes out as the same 218 indices, and the mean and
 * standard deviation of all 50,000 lengths are 234.76 and 172.91 as quoted
 * for imdb.npz (docs/design/datasets.md has the comparison).
 *
 * Order: reviews are read in a fixed order (each split's negative reviews
 * by id, then its positive ones by id, whatever the order in the archive),
 * then each split is shuffled with a Fisher-Yates shuffle driven by one
 * Philox stream (sy_rng_new(seed, 0)), the training split first, as Keras
 * shuffles both splits with one numpy RandomState(seed). The order cannot
 * match Keras's: it permutes imdb.npz's order, which is not documented.
 *
 * Then Keras's load_data steps, in its order and with its quirks:
 * start_char is put first and index_from added to each rank; reviews whose
 * length (start_char included) is maxlen or more are dropped; num_words 0
 * means the largest index present, which Keras's test `w < num_words` then
 * turns into oov_char like any index >= num_words; indices below skip_top
 * (start_char too) become oov_char, or are removed when oov_char is -1.
 *
 * Loading all 50,000 reviews takes 1.4 s on one core (1.6 to 1.8 s through
 * sy_imdb_load_data, which first checks both files' SHA-256): inflating
 * the 108 MB archive 0.5 s, tokenizing 0.3 s, looking up the 11.8 million
 * words 0.5 s (cache misses on the hash table), the rest building the
 * arrays.
 */
#include "data_internal.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

/* ---- the tokenizer ----------------------------------------------------------- */

/* The separators: Keras's default filters '!"#$%&()*+,-./:;<=>?@[\]^_`{|}~\t\n'
 * and the space it splits at. */
static const bool separator[256] = {
    ['!'] = 1, ['"'] = 1,  ['#'] = 1, ['$'] = 1,  ['%'] = 1,  ['&'] = 1, ['('] = 1,
    [')'] = 1, ['*'] = 1,  ['+'] = 1, [','] = 1,  ['-'] = 1,  ['.'] = 1, ['/'] = 1,
    [':'] = 1, [';'] = 1,  ['<'] = 1, ['='] = 1,  ['>'] = 1,  ['?'] = 1, ['@'] = 1,
    ['['] = 1, ['\\'] = 1, [']'] = 1, ['^'] = 1,  ['_'] = 1,  ['`'] = 1, ['{'] = 1,
    ['|'] = 1, ['}'] = 1,  ['~'] = 1, ['\t'] = 1, ['\n'] = 1, [' '] = 1,
};

/* One pass: words are lower-cased in place and handed to fn as they end. */
void imdb_tokenize(char *text, size_t n, imdb_word_fn fn, void *ctx) {
    for (size_t i = 0; i < n;) {
        while (i < n && separator[(uint8_t)text[i]]) i++;
        size_t start = i;
        for (uint8_t c; i < n && !separator[c = (uint8_t)text[i]]; i++)
            text[i] = (char)(c + ((unsigned)(c - 'A') < 26u ? 'a' - 'A' : 0));
        if (i > start) fn(ctx, text + start, i - start);
    }
}

/* ---- the reviews of the archive ---------------------------------------------- */

typedef struct review {
    int64_t id;       /* from <id>_<rating>.txt */
    uint64_t offset;  /* its tar header's offset, for messages */
    int64_t start;    /* its ranks are ranks[start, start + len) of its split */
    int64_t len;      /* words found in the word index */
    int32_t max_rank; /* 0 for a review with no word found */
    uint8_t label;    /* 1 pos, 0 neg */
} review;

typedef struct split_reviews {
    review *reviews;
    int64_t count, cap;
    int32_t *ranks;
    int64_t used, ranks_cap;
} split_reviews;

static const char *const split_names[2] = {"train", "test"};

/* A digit run of at most `max` digits at *p, advanced past it. */
static bool digits(const char **p, int max, int64_t *value) {
    int n = 0;
    for (*value = 0; **p >= '0' && **p <= '9' && n < max; (*p)++, n++)
        *value = *value * 10 + (**p - '0');
    return n > 0 && !(**p >= '0' && **p <= '9');
}

/* "aclImdb/<split>/<pos|neg>/<id>_<rating>.txt", perhaps after "./". */
static bool review_name(const char *name, int *split, uint8_t *label, int64_t *id) {
    static const char root[] = "aclImdb/";
    const char *p = strncmp(name, "./", 2) == 0 ? name + 2 : name;
    if (strncmp(p, root, sizeof root - 1) != 0) return false;
    p += sizeof root - 1;
    int s = strncmp(p, "train/", 6) == 0 ? 0 : strncmp(p, "test/", 5) == 0 ? 1 : -1;
    if (s < 0) return false;
    p += s == 0 ? 6 : 5;
    if (strncmp(p, "pos/", 4) != 0 && strncmp(p, "neg/", 4) != 0) return false;
    *label = p[0] == 'p';
    p += 4;
    int64_t rating;
    if (!digits(&p, 18, id) || *p++ != '_' || !digits(&p, 9, &rating)) return false;
    *split = s;
    return strcmp(p, ".txt") == 0;
}

typedef struct tokens_ctx {
    const sy_word_index *wi;
    split_reviews *split;
    review *r;
    sy_status st;
} tokens_ctx;

static void add_word(void *ctx, const char *word, size_t len) {
    tokens_ctx *c = ctx;
    int32_t rank = word_index_find(c->wi, word, len);
    if (!rank || c->st) return;
    split_reviews *s = c->split;
    if (s->used == s->ranks_cap && (c->st = SY_GROW(s->ranks, s->ranks_cap, s->used + 1))) return;
    s->ranks[s->used++] = rank;
    c->r->len++;
    if (rank > c->r->max_rank) c->r->max_rank = rank;
}

/* Read the current member (a review) and append its ranks to its split. */
static sy_status read_review(tar_reader *tar, const tar_entry *e, const sy_word_index *wi,
                             split_reviews *s, uint8_t label, int64_t id) {
    sy_status st = SY_GROW(s->reviews, s->cap, s->count + 1);
    if (st) return st;
    review *r = &s->reviews[s->count];
    *r = (review){.id = id, .offset = e->offset, .start = s->used, .label = label};
    uint8_t *text;
    size_t n;
    if ((st = tar_read(tar, &text, &n))) return st;
    tokens_ctx ctx = {wi, s, r, SY_OK};
    imdb_tokenize((char *)text, n, add_word, &ctx);
    if (ctx.st) return ctx.st;
    s->count++;
    return SY_OK;
}

static int by_label_and_id(const void *a, const void *b) {
    const review *x = a, *y = b;
    if (x->label != y->label) return x->label < y->label ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Sort a split's reviews into the fixed order; the same review twice is
 * damage. */
static sy_status sort_split(const char *what, split_reviews *s, int split) {
    qsort(s->reviews, (size_t)s->count, sizeof *s->reviews, by_label_and_id);
    for (int64_t i = 1; i < s->count; i++) {
        const review *a = &s->reviews[i - 1], *b = &s->reviews[i];
        if (a->label == b->label && a->id == b->id)
            return sy_error(SY_ERR_CORRUPT,
                            "%s: two reviews with id %lld in aclImdb/%s/%s/ (the members at bytes "
                            "%llu and %llu)",
                            what, (long long)a->id, split_names[split], a->label ? "pos" : "neg",
                            (unsigned long long)sy_min64((int64_t)a->offset, (int64_t)b->offset),
                            (unsigned long long)sy_max64((int64_t)a->offset, (int64_t)b->offset));
    }
    return SY_OK;
}

/* A uniform integer in [0, n) (Lemire's multiply-and-reject). */
static uint32_t below(sy_rng *rng, uint32_t n) {
    uint64_t m = (uint64_t)sy_rng_u32(rng) * n;
    if ((uint32_t)m < n) {
        uint32_t threshold = (uint32_t)-n % n;
        while ((uint32_t)m < threshold) m = (uint64_t)sy_rng_u32(rng) * n;
    }
    return (uint32_t)(m >> 32);
}

/* Fisher-Yates, as numpy's shuffle: i from the end, j uniform in [0, i]. */
static void shuffle(review *r, int64_t count, sy_rng *rng) {
    for (int64_t i = count - 1; i > 0; i--) {
        int64_t j = below(rng, (uint32_t)i + 1);
        review t = r[i];
        r[i] = r[j];
        r[j] = t;
    }
}

/* ---- Keras's load_data steps ------------------------------------------------- */

static sy_status check_options(const sy_imdb_options *o, int64_t words) {
    const char *bad = NULL;
    char range[64] = ">= 0";
    int64_t v = 0;
    if (o->num_words < 0)
        bad = "num_words", v = o->num_words;
    else if (o->skip_top < 0)
        bad = "skip_top", v = o->skip_top;
    else if (o->maxlen < 0)
        bad = "maxlen", v = o->maxlen;
    else if (o->start_char < -1)
        bad = "start_char", v = o->start_char, strcpy(range, ">= 0, or -1 for none");
    else if (o->oov_char < -1)
        bad = "oov_char", v = o->oov_char, strcpy(range, ">= 0, or -1 to remove the words");
    else if (o->index_from < 0 || o->index_from > INT32_MAX - words) {
        bad = "index_from", v = o->index_from;
        snprintf(range, sizeof range, "from 0 to %lld (2^31 - 1 - the words)",
                 (long long)(INT32_MAX - words));
    }
    if (!bad) return SY_OK;
    return sy_error(SY_ERR_INVALID_ARGUMENT, "imdb.load_data: %s is %lld, expected %s", bad,
                    (long long)v, range);
}

/* Whether maxlen keeps a review (Keras's _remove_long_seq: len < maxlen). */
static bool kept(const sy_imdb_options *o, const review *r) {
    return !o->maxlen || r->len + (o->start_char >= 0) < o->maxlen;
}

/* Keras's index of a word of rank `rank`; rank 0 stands for start_char. */
static int32_t keras_value(const sy_imdb_options *o, int32_t rank) {
    return rank ? rank + o->index_from : o->start_char;
}

/* One split's sequences and labels, after maxlen; num_words as Keras
 * settled it. */
static sy_status build_split(const split_reviews *s, const sy_imdb_options *o, int64_t num_words,
                             sy_sequences **x, sy_tensor **y) {
    int64_t count = 0, total = 0;
    for (int64_t i = 0; i < s->count; i++)
        if (kept(o, &s->reviews[i])) count++, total += s->reviews[i].len + (o->start_char >= 0);
    sy_status st = sequences_new(count, total, x);
    if (!st) st = sy_tensor_new(SY_U8, sy_shape_of(1, count), y);
    if (st) return st;
    uint8_t *labels = sy_tensor_data(*y);
    int64_t n = 0, at = 0;
    for (int64_t i = 0; i < s->count; i++) {
        const review *r = &s->reviews[i];
        if (!kept(o, r)) continue;
        labels[n] = r->label;
        const int32_t *ranks = s->ranks + r->start;
        for (int64_t k = o->start_char >= 0 ? -1 : 0; k < r->len; k++) {
            int32_t w = keras_value(o, k < 0 ? 0 : ranks[k]);
            if (w >= o->skip_top && w < num_words)
                (*x)->data[at++] = w;
            else if (o->oov_char >= 0)
                (*x)->data[at++] = o->oov_char;
        }
        (*x)->offsets[++n] = at;
    }
    return SY_OK;
}

static sy_status build(split_reviews s[2], const sy_imdb_options *o, sy_imdb_split *out) {
    /* maxlen must leave something in both splits (Keras: ValueError) */
    int64_t kept_count[2] = {0, 0};
    int64_t largest = 0; /* the largest index present, for num_words 0 */
    for (int k = 0; k < 2; k++)
        for (int64_t i = 0; i < s[k].count; i++) {
            const review *r = &s[k].reviews[i];
            if (!kept(o, r)) continue;
            kept_count[k]++;
            if (o->start_char >= 0) largest = sy_max64(largest, o->start_char);
            if (r->max_rank) largest = sy_max64(largest, keras_value(o, r->max_rank));
        }
    if (!kept_count[0] || !kept_count[1])
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "imdb.load_data: after filtering for sequences shorter than maxlen=%d, no "
                        "sequence was kept in the %s split; increase maxlen",
                        o->maxlen, kept_count[0] ? "test" : "training");
    int64_t num_words = o->num_words ? o->num_words : largest;
    sy_status st = build_split(&s[0], o, num_words, &out->x_train, &out->y_train);
    if (!st) st = build_split(&s[1], o, num_words, &out->x_test, &out->y_test);
    return st;
}

/* ---- loading ------------------------------------------------------------------ */

sy_imdb_options sy_imdb_options_default(void) {
    sy_imdb_options o = {.num_words = 0,
                         .skip_top = 0,
                         .maxlen = 0,
                         .seed = 113,
                         .start_char = 1,
                         .oov_char = 2,
                         .index_from = 3};
    return o;
}

void sy_imdb_split_free(sy_imdb_split *split) {
    if (!split) return;
    sy_sequences_free(split->x_train);
    sy_sequences_free(split->x_test);
    sy_tensor_free(split->y_train);
    sy_tensor_free(split->y_test);
    split->x_train = split->x_test = NULL;
    split->y_train = split->y_test = NULL;
}

/* Every review of the archive into s[0] (train) and s[1] (test). */
static sy_status read_reviews(tar_reader *tar, const sy_word_index *wi, split_reviews s[2]) {
    for (;;) {
        const tar_entry *e;
        sy_status st = tar_next(tar, &e);
        if (st || !e) return st;
        int split;
        uint8_t label;
        int64_t id;
        if (e->type != '0' || !review_name(e->name, &split, &label, &id)) continue;
        if ((st = read_review(tar, e, wi, &s[split], label, id))) return st;
    }
}

sy_status imdb_load_tar(tar_reader *tar, const sy_word_index *wi, const sy_imdb_options *options,
                        sy_imdb_split *out) {
    memset(out, 0, sizeof *out);
    sy_imdb_options o = options ? *options : sy_imdb_options_default();
    sy_status st = check_options(&o, sy_word_index_count(wi));
    if (st) return st;
    split_reviews s[2];
    memset(s, 0, sizeof s);
    const char *what = tar_name(tar);
    st = read_reviews(tar, wi, s);
    for (int k = 0; k < 2 && !st; k++) {
        if (!s[k].count)
            st = sy_error(SY_ERR_CORRUPT,
                          "%s: no %s reviews: expected files aclImdb/%s/pos/<id>_<rating>.txt "
                          "and aclImdb/%s/neg/<id>_<rating>.txt",
                          what, split_names[k], split_names[k], split_names[k]);
        else if (s[k].count > UINT32_MAX)
            st =
                sy_error(SY_ERR_UNSUPPORTED, "%s: more than 2^32 %s reviews", what, split_names[k]);
        else
            st = sort_split(what, &s[k], k);
    }
    if (!st) {
        sy_rng rng = sy_rng_new(o.seed, 0);
        shuffle(s[0].reviews, s[0].count, &rng);
        shuffle(s[1].reviews, s[1].count, &rng);
        st = build(s, &o, out);
    }
    for (int k = 0; k < 2; k++) {
        sy_free(s[k].reviews);
        sy_free(s[k].ranks);
    }
    if (st) sy_imdb_split_free(out);
    return st;
}

sy_status imdb_load_files(const char *archive, const char *word_index, const sy_imdb_options *o,
                          sy_imdb_split *out) {
    memset(out, 0, sizeof *out);
    sy_word_index *wi = NULL;
    tar_reader *tar = NULL;
    sy_status st = word_index_read(word_index, &wi);
    if (!st) st = tar_open_file(archive, &tar);
    if (!st) st = imdb_load_tar(tar, wi, o, out);
    tar_close(tar);
    sy_word_index_free(wi);
    return st;
}

sy_status sy_imdb_load_data(const sy_imdb_options *options, sy_imdb_split *out) {
    memset(out, 0, sizeof *out);
    char archive[PATH_MAX], word_index[PATH_MAX];
    /* both files found (or fetched) before either is parsed */
    sy_status st = sy_dataset_file("imdb", "imdb_word_index.json", word_index, sizeof word_index);
    if (!st) st = sy_dataset_file("imdb", "aclImdb_v1_labeled.tar.gz", archive, sizeof archive);
    return st ? st : imdb_load_files(archive, word_index, options, out);
}
