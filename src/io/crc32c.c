/*
 * crc32c.c - CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the
 * checksum of TFRecord framing (tfrecord.c) and of TensorFlow's other file
 * formats.
 *
 * Two implementations give the same result: the SSE4.2 crc32 instruction,
 * 8 bytes per instruction, used when the CPU has it (every x86-64 CPU since
 * 2008; checked once at run time, so a build without -march=native still
 * uses it), and slicing-by-8 tables, which run anywhere at about 1 to 2
 * GB/s. A TFRecord file's data is checksummed once on writing and once on
 * reading, so the checksum sits on the input pipeline's path: the hardware
 * path keeps it far below the cost of parsing the records.
 *
 * crc32c_extend(crc, data, n) continues a CRC: crc32c_extend(crc32c(a), b)
 * is the CRC of a followed by b, and crc32c("123456789") is 0xE3069283.
 */
#include "io_internal.h"

#include <pthread.h>

#define CRC32C_POLY 0x82F63B78u

static uint32_t crc_table[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;
static bool crc_hw;

static void crc_init(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ CRC32C_POLY : c >> 1;
        crc_table[0][i] = c;
    }
    /* table[k][i]: the CRC of byte i followed by k zero bytes */
    for (int k = 1; k < 8; k++)
        for (int i = 0; i < 256; i++)
            crc_table[k][i] = (crc_table[k - 1][i] >> 8) ^ crc_table[0][crc_table[k - 1][i] & 0xff];
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc_soft(uint32_t c, const uint8_t *p, size_t n) {
    for (; n >= 8; n -= 8, p += 8) {
        uint32_t lo = c ^ io_le32(p), hi = io_le32(p + 4);
        c = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
            crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^ crc_table[3][hi & 0xff] ^
            crc_table[2][(hi >> 8) & 0xff] ^ crc_table[1][(hi >> 16) & 0xff] ^
            crc_table[0][hi >> 24];
    }
    while (n--) c = (c >> 8) ^ crc_table[0][(c ^ *p++) & 0xff];
    return c;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#include <string.h>

__attribute__((target("sse4.2"))) static uint32_t crc_sse42(uint32_t c, const uint8_t *p,
                                                            size_t n) {
    uint64_t c64 = c;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c64 = _mm_crc32_u64(c64, v);
    }
    c = (uint32_t)c64;
    while (n--) c = _mm_crc32_u8(c, *p++);
    return c;
}
#endif

uint32_t crc32c_extend(uint32_t crc, const void *data, size_t n) {
    pthread_once(&crc_once, crc_init);
    uint32_t c = ~crc;
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    if (crc_hw) return ~crc_sse42(c, data, n);
#endif
    return ~crc_soft(c, data, n);
}

uint32_t crc32c_soft(uint32_t crc, const void *data, size_t n) {
    pthread_once(&crc_once, crc_init);
    return ~crc_soft(~crc, data, n);
}
