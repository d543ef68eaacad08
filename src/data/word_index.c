/*
 * word_index.c - Keras's IMDB word index (imdb_word_index.json): word ->
 * frequency rank, 1 for "the", and the hash table that looks words up.
 *
 * The file is one JSON object of 88,584 words, parsed with jansson
 * (JSON_REJECT_DUPLICATES, so a repeated word is an error with its line and
 * column, as every syntax error is). The ranks must be the integers 1..count,
 * each once, which Keras's file is: then rank -> word is an array, and
 * sy_word_index_word needs no search.
 *
 * The words are copied, in rank order and NUL-terminated, into one block
 * (`chars`, 0.7 MB for IMDB), with start[r] the offset of the word of rank
 * r. Lookups go through an open-addressing table of 2^k slots, at most half
 * full (256 Ki slots, 2 MB for IMDB: it stays in cache). A slot holds the
 * word's rank and 32 bits of its hash (FNV-1a, 64 bits), so a probe
 * compares strings only when the hashes agree; collisions probe linearly.
 * Loading the 50,000 reviews looks up 11.8 million words in 0.5 s on one
 * core, bound by cache misses (the 2 MB table is larger than L2). A second,
 * 64 KB table for the 4,096 most frequent words (89% of the words looked
 * up) was tried and measured no faster.
 */
#include "data_internal.h"

#include <jansson.h>
#include <string.h>

struct sy_word_index {
    int64_t count;
    char *chars;     /* the words in rank order, each NUL-terminated */
    uint32_t *start; /* (count + 2): the word of rank r is chars + start[r], of
                        start[r + 1] - start[r] - 1 bytes */
    uint64_t *slots; /* (mask + 1): hash << 32 | rank, 0 when empty */
    uint64_t mask;
};

static uint64_t fnv1a(const char *p, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)p[i]) * 0x100000001b3ull;
    return h;
}

int32_t word_index_find(const sy_word_index *wi, const char *word, size_t len) {
    uint64_t h = fnv1a(word, len), tag = h >> 32;
    for (uint64_t i = h & wi->mask;; i = (i + 1) & wi->mask) {
        uint64_t slot = wi->slots[i];
        if (!slot) return 0;
        if (slot >> 32 != tag) continue;
        uint32_t rank = (uint32_t)slot, at = wi->start[rank];
        if (wi->start[rank + 1] - at - 1 != len) continue;
        /* words are short (4.6 bytes on average): a loop beats a call to memcmp */
        const char *known = wi->chars + at;
        size_t k = 0;
        while (k < len && known[k] == word[k]) k++;
        if (k == len) return (int32_t)rank;
    }
}

void sy_word_index_free(sy_word_index *wi) {
    if (!wi) return;
    sy_free(wi->chars);
    sy_free(wi->start);
    sy_free(wi->slots);
    sy_free(wi);
}

int64_t sy_word_index_count(const sy_word_index *wi) {
    return wi ? wi->count : 0;
}

int32_t sy_word_index_get(const sy_word_index *wi, const char *word) {
    return wi && word ? word_index_find(wi, word, strlen(word)) : 0;
}

const char *sy_word_index_word(const sy_word_index *wi, int32_t rank) {
    return wi && rank >= 1 && rank <= wi->count ? wi->chars + wi->start[rank] : NULL;
}

/* A word as a message shows it: at most 40 bytes, other than printable
 * ASCII as \xNN. */
static const char *quoted(const char *word, char buf[200]) {
    size_t n = 0;
    for (size_t i = 0; word[i] && n < 190; i++) {
        uint8_t c = (uint8_t)word[i];
        if (i == 40) {
            n += (size_t)snprintf(buf + n, 200 - n, "...");
            break;
        }
        n += (size_t)(c >= 0x20 && c < 0x7f && c != '"' && c != '\\'
                          ? snprintf(buf + n, 200 - n, "%c", c)
                          : snprintf(buf + n, 200 - n, "\\x%02x", c));
    }
    buf[n] = '\0';
    return buf;
}

static const char *json_kind(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "an object";
    case JSON_ARRAY:
        return "an array";
    case JSON_STRING:
        return "a string";
    case JSON_REAL:
        return "a real number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "a boolean";
    case JSON_NULL:
        return "null";
    default:
        return "an integer";
    }
}

/* Check the ranks and lay out chars and start (in rank order). */
static sy_status build_words(sy_word_index *wi, json_t *root, const char *what) {
    int64_t count = wi->count;
    const char *key;
    size_t key_len;
    json_t *value;
    char a[200], b[200];
    /* first pass: each rank once, in range; the word's length into start[rank] */
    const char **word_of = sy_calloc((size_t)count + 1, sizeof *word_of);
    if (!word_of) return sy_error(SY_ERR_OUT_OF_MEMORY, "out of memory reading %s", what);
    sy_status st = SY_OK;
    uint64_t total = 0;
    json_object_keylen_foreach(root, key, key_len, value) {
        json_int_t rank = json_is_integer(value) ? json_integer_value(value) : 0;
        if (!json_is_integer(value) || rank < 1 || rank > count) {
            char got[64];
            if (json_is_integer(value))
                snprintf(got, sizeof got, "rank %lld", (long long)rank);
            else
                snprintf(got, sizeof got, "%s", json_kind(value));
            st = sy_error(SY_ERR_CORRUPT,
                          "%s: the word \"%s\" has %s, expected an integer rank from 1 to %lld "
                          "(the number of words)",
                          what, quoted(key, a), got, (long long)count);
            break;
        }
        if (word_of[rank]) {
            st = sy_error(SY_ERR_CORRUPT,
                          "%s: the words \"%s\" and \"%s\" both have rank %lld; each rank from 1 "
                          "to %lld must belong to one word",
                          what, quoted(word_of[rank], a), quoted(key, b), (long long)rank,
                          (long long)count);
            break;
        }
        word_of[rank] = key;
        wi->start[rank] = (uint32_t)key_len; /* a length for now */
        total += key_len + 1;
    }
    if (!st && total > UINT32_MAX)
        st = sy_error(SY_ERR_UNSUPPORTED, "%s: the words take %llu bytes, more than 4 GiB", what,
                      (unsigned long long)total);
    if (!st && !(wi->chars = sy_malloc((size_t)total)))
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "out of memory reading %s", what);
    /* second pass, in rank order: lengths become offsets, the words are copied */
    uint32_t at = 0;
    for (int64_t r = 1; !st && r <= count; r++) {
        uint32_t len = wi->start[r];
        wi->start[r] = at;
        memcpy(wi->chars + at, word_of[r], (size_t)len + 1);
        at += len + 1;
    }
    wi->start[count + 1] = at;
    sy_free(word_of);
    return st;
}

/* Fill the hash table with every word. */
static sy_status build_table(sy_word_index *wi, const char *what) {
    uint64_t size = 16;
    while (size < 2 * (uint64_t)wi->count) size *= 2;
    wi->mask = size - 1;
    if (!(wi->slots = sy_calloc(size, sizeof *wi->slots)))
        return sy_error(SY_ERR_OUT_OF_MEMORY, "out of memory reading %s", what);
    for (int64_t r = 1; r <= wi->count; r++) {
        const char *word = wi->chars + wi->start[r];
        uint64_t h = fnv1a(word, wi->start[r + 1] - wi->start[r] - 1), i = h & wi->mask;
        while (wi->slots[i]) i = (i + 1) & wi->mask;
        wi->slots[i] = (h >> 32) << 32 | (uint64_t)r;
    }
    return SY_OK;
}

sy_status word_index_parse(const uint8_t *buf, size_t n, const char *what, sy_word_index **out) {
    *out = NULL;
    json_error_t err;
    json_t *root = json_loadb((const char *)buf, n, JSON_REJECT_DUPLICATES, &err);
    if (!root)
        return sy_error(SY_ERR_CORRUPT,
                        "%s: invalid JSON at line %d, column %d (byte %d): %s; expected Keras's "
                        "word index, one JSON object of words and their ranks",
                        what, err.line, err.column, err.position, err.text);
    sy_status st = SY_OK;
    sy_word_index *wi = NULL;
    if (!json_is_object(root)) {
        st = sy_error(SY_ERR_CORRUPT,
                      "%s: the JSON is %s, expected an object of words and their ranks "
                      "(Keras's word index)",
                      what, json_kind(root));
        goto done;
    }
    size_t count = json_object_size(root);
    if (count > INT32_MAX - 2) {
        st = sy_error(SY_ERR_UNSUPPORTED, "%s: %zu words, more than 2^31 - 3", what, count);
        goto done;
    }
    if (!(wi = sy_calloc(1, sizeof *wi)) ||
        !(wi->start = sy_calloc(count + 2, sizeof *wi->start))) {
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "out of memory reading %s", what);
        goto done;
    }
    wi->count = (int64_t)count;
    if (!(st = build_words(wi, root, what))) st = build_table(wi, what);
done:
    json_decref(root);
    if (st) {
        sy_word_index_free(wi);
        return st;
    }
    *out = wi;
    return SY_OK;
}

static sy_status parse_bytes(const uint8_t *buf, size_t n, const char *path, void *out) {
    return word_index_parse(buf, n, path, out);
}

sy_status word_index_read(const char *path, sy_word_index **out) {
    *out = NULL;
    return data_with_file(path, parse_bytes, out);
}

sy_status sy_imdb_get_word_index(sy_word_index **out) {
    *out = NULL;
    char path[4096];
    sy_status st = sy_dataset_file("imdb", "imdb_word_index.json", path, sizeof path);
    return st ? st : word_index_read(path, out);
}
