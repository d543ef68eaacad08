/*
 * sequences.c - ragged arrays of int32 (sy_sequences: reviews as word
 * indices) and Keras's pad_sequences, which makes them one dense tensor.
 *
 * A sy_sequences is CSR-like: all values in one array, and offsets[i] ..
 * offsets[i + 1] the range of sequence i. The 25,000 IMDB training reviews
 * are 6 million values (24 MB) and 25,001 offsets, in two allocations,
 * where Keras holds 25,000 Python lists.
 *
 * pad_sequences follows keras.utils.pad_sequences (Keras 2.15) with its
 * defaults dtype int32, padding "pre", truncating "pre", value 0: every row
 * starts full of `value`; a sequence longer than maxlen keeps its last
 * maxlen values (truncating "pre") or its first (truncating "post"), and
 * what is kept goes to the end of the row (padding "pre") or its start
 * (padding "post"). maxlen 0 stands for Keras's None: the longest length.
 * Keras checks the padding and truncating strings only when it meets a
 * non-empty sequence; here they are checked first, always.
 */
#include "data_internal.h"

#include <string.h>

sy_status sequences_new(int64_t count, int64_t total, sy_sequences **out) {
    *out = NULL;
    SY_ASSERT(count >= 0 && total >= 0);
    sy_sequences *s = sy_calloc(1, sizeof *s);
    if (s) {
        s->count = count;
        s->offsets = sy_calloc((size_t)count + 1, sizeof *s->offsets);
        s->data = sy_malloc((size_t)total * sizeof *s->data);
    }
    if (!s || !s->offsets || !s->data) {
        sy_sequences_free(s);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "out of memory for %lld sequences of %lld values",
                        (long long)count, (long long)total);
    }
    *out = s;
    return SY_OK;
}

void sy_sequences_free(sy_sequences *s) {
    if (!s) return;
    sy_free(s->offsets);
    sy_free(s->data);
    sy_free(s);
}

int64_t sy_sequences_count(const sy_sequences *s) {
    return s ? s->count : 0;
}

int64_t sy_sequences_length(const sy_sequences *s, int64_t index) {
    return s && index >= 0 && index < s->count ? s->offsets[index + 1] - s->offsets[index] : 0;
}

const int32_t *sy_sequences_data(const sy_sequences *s, int64_t index) {
    return s && index >= 0 && index < s->count ? s->data + s->offsets[index] : NULL;
}

sy_pad_options sy_pad_options_default(void) {
    sy_pad_options o = {.maxlen = 0, .padding = "pre", .truncating = "pre", .value = 0};
    return o;
}

/* "pre" -> true, "post" -> false, NULL -> "pre"; anything else an error
 * naming the option, as Keras's ValueError does. */
static sy_status pre_or_post(const char *option, const char *value, bool *pre) {
    if (!value || strcmp(value, "pre") == 0) {
        *pre = true;
        return SY_OK;
    }
    if (strcmp(value, "post") == 0) {
        *pre = false;
        return SY_OK;
    }
    return sy_error(SY_ERR_INVALID_ARGUMENT,
                    "pad_sequences: %s \"%.40s\" not understood: expected \"pre\" or \"post\"",
                    option, value);
}

sy_status sy_pad_sequences(const sy_sequences *s, const sy_pad_options *options, sy_tensor **out) {
    *out = NULL;
    sy_pad_options o = options ? *options : sy_pad_options_default();
    bool pad_pre = true, trunc_pre = true;
    sy_status st = pre_or_post("padding", o.padding, &pad_pre);
    if (!st) st = pre_or_post("truncating", o.truncating, &trunc_pre);
    if (st) return st;
    if (!s) return sy_error(SY_ERR_INVALID_ARGUMENT, "pad_sequences: no sequences (NULL)");
    if (o.maxlen < 0)
        return sy_error(SY_ERR_INVALID_ARGUMENT,
                        "pad_sequences: maxlen %lld: expected a length >= 1, or 0 for the longest "
                        "sequence's",
                        (long long)o.maxlen);
    int64_t maxlen = o.maxlen;
    if (!maxlen)
        for (int64_t i = 0; i < s->count; i++) maxlen = sy_max64(maxlen, sy_sequences_length(s, i));
    sy_tensor *t;
    if ((st = sy_tensor_new(SY_I32, sy_shape_of(2, s->count, maxlen), &t))) return st;
    int32_t *x = sy_tensor_data(t);
    for (int64_t i = 0; i < s->count; i++) {
        int32_t *row = x + i * maxlen;
        const int32_t *seq = sy_sequences_data(s, i);
        int64_t len = sy_sequences_length(s, i), keep = sy_min64(len, maxlen);
        const int32_t *from = trunc_pre ? seq + len - keep : seq;
        int32_t *to = pad_pre ? row + maxlen - keep : row;
        for (int64_t j = 0; j < maxlen; j++) row[j] = o.value;
        memcpy(to, from, (size_t)keep * sizeof *row);
    }
    *out = t;
    return SY_OK;
}
