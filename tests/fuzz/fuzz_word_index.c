/*
 * fuzz_word_index.c - libFuzzer target for the word index (Keras's
 * imdb_word_index.json) from any bytes: an index or an error, never a
 * crash, a leak or undefined behaviour; and every word of an index that
 * parses is found again with its rank.
 *
 *   make fuzz                     (every target, FUZZ_SECONDS each)
 *   build-fuzz/fuzz_word_index CORPUS_DIR tests/fuzz/corpus/fuzz_word_index
 */
#include "data/data_internal.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    sy_word_index *wi = NULL;
    sy_status st = word_index_parse(data, size, "fuzz", &wi);
    SY_ASSERT((st == SY_OK) == (wi != NULL));
    for (int32_t r = 1; r <= sy_word_index_count(wi); r++) {
        const char *word = sy_word_index_word(wi, r);
        SY_ASSERT(word && sy_word_index_get(wi, word) == r);
    }
    /* the input itself, and its prefixes, as words (absent or present) */
    for (size_t n = 0; wi && n <= size && n < 64; n++) {
        int32_t r = word_index_find(wi, (const char *)data, n);
        SY_ASSERT(r >= 0 && r <= sy_word_index_count(wi));
    }
    sy_word_index_free(wi);
    return 0;
}
