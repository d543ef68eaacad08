/*
 * fuzz_tar.c - libFuzzer target for the tar reader and the IMDB loader on
 * top of it: any bytes, plain or gzip, must give members or an error, never
 * a crash, a leak, undefined behaviour or an allocation out of proportion
 * to the input.
 *
 * Each input is read twice: once member by member (every member's data read
 * whole, so sizes, padding and long names are exercised), once by
 * imdb_load_tar with a small word index (the review names, the tokenizer,
 * sorting, shuffling and Keras's steps).
 *
 *   make fuzz                     (every target, FUZZ_SECONDS each)
 *   build-fuzz/fuzz_tar CORPUS_DIR tests/fuzz/corpus/fuzz_tar
 */
#include "data/data_internal.h"

#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char words[] = "{\"the\": 1, \"movie\": 2, \"a\": 3, \"br\": 4, \"good\": 5, "
                            "\"bad\": 6, \"it's\": 7, \"caf\\u00e9\": 8}";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    tar_reader *r = NULL;
    if (tar_open_memory(data, size, "fuzz", &r) == SY_OK) {
        const tar_entry *e;
        while (tar_next(r, &e) == SY_OK && e) {
            uint8_t *bytes;
            size_t n;
            if (tar_read(r, &bytes, &n) != SY_OK) break;
            SY_ASSERT(n == e->size && bytes[n] == 0 && strlen(e->name) < (1 << 20) + 1);
        }
    }
    tar_close(r);

    static sy_word_index *wi;
    if (!wi) SY_ASSERT(word_index_parse((const uint8_t *)words, strlen(words), "words", &wi) == 0);
    if (tar_open_memory(data, size, "fuzz", &r) != SY_OK) return 0;
    sy_imdb_options o = sy_imdb_options_default();
    o.seed = size;
    o.maxlen = (int32_t)(size % 7);
    o.num_words = (int32_t)(size % 11);
    sy_imdb_split split;
    if (imdb_load_tar(r, wi, &o, &split) == SY_OK) {
        SY_ASSERT(sy_sequences_count(split.x_train) == sy_tensor_count(split.y_train));
        sy_tensor *padded = NULL;
        sy_pad_options p = sy_pad_options_default();
        p.maxlen = 5;
        SY_ASSERT(sy_pad_sequences(split.x_test, &p, &padded) == SY_OK);
        sy_tensor_free(padded);
    } else {
        SY_ASSERT(!split.x_train && !split.x_test && !split.y_train && !split.y_test);
    }
    sy_imdb_split_free(&split);
    tar_close(r);
    return 0;
}
