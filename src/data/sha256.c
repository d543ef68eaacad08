/*
 * sha256.c - SHA-256 (FIPS 180-4), to verify dataset files against their
 * published checksums.
 *
 * Our own implementation rather than OpenSSL's: the data module needs only
 * this one digest, and a hundred lines of portable C keep the library free of
 * a crypto dependency (libcurl may or may not bring one, depending on how it
 * was built). The message is consumed in 64-byte blocks; a partial block
 * waits in ctx->block until the next update or the final padding. It runs
 * at about 190 MB/s on one core (measured: the 26 MB Fashion-MNIST training
 * images in 0.14 s, against 0.27 s to inflate and parse them), which makes
 * it affordable to check every file on every load, as Keras's get_file
 * does when it has a hash.
 */
#include "data_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

static const uint32_t k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static inline uint32_t rotr(uint32_t x, int n) {
    return x >> n | x << (32 - n);
}

static void sha256_compress(uint32_t h[8], const uint8_t *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++) w[i] = io_be32(p + 4 * i);
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rotr(w[i - 15], 7) ^ rotr(w[i - 15], 18) ^ w[i - 15] >> 3;
        uint32_t s1 = rotr(w[i - 2], 17) ^ rotr(w[i - 2], 19) ^ w[i - 2] >> 10;
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], hh = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 =
            hh + (rotr(e, 6) ^ rotr(e, 11) ^ rotr(e, 25)) + ((e & f) ^ (~e & g)) + k[i] + w[i];
        uint32_t t2 = (rotr(a, 2) ^ rotr(a, 13) ^ rotr(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        hh = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
    h[5] += f;
    h[6] += g;
    h[7] += hh;
}

void sha256_init(sha256_ctx *c) {
    static const uint32_t h0[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->h, h0, sizeof h0);
    c->bytes = 0;
    c->fill = 0;
}

void sha256_update(sha256_ctx *c, const void *data, size_t n) {
    const uint8_t *p = data;
    c->bytes += n;
    if (c->fill) {
        size_t take = sy_min64((int64_t)n, (int64_t)(64 - c->fill));
        memcpy(c->block + c->fill, p, take);
        c->fill += take;
        p += take;
        n -= take;
        if (c->fill < 64) return;
        sha256_compress(c->h, c->block);
        c->fill = 0;
    }
    for (; n >= 64; p += 64, n -= 64) sha256_compress(c->h, p);
    if (n) memcpy(c->block, p, n);
    c->fill = n;
}

void sha256_final(sha256_ctx *c, uint8_t digest[32]) {
    uint64_t bits = c->bytes * 8;
    static const uint8_t pad[64] = {0x80};
    /* 0x80, zeros up to 56 mod 64, then the length in bits, big-endian. */
    size_t padlen = c->fill < 56 ? 56 - c->fill : 120 - c->fill;
    sha256_update(c, pad, padlen);
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)(bits >> (56 - 8 * i));
    sha256_update(c, len, 8);
    SY_ASSERT(c->fill == 0);
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 4; j++) digest[4 * i + j] = (uint8_t)(c->h[i] >> (24 - 8 * j));
}

void sha256_hex(const uint8_t digest[32], char hex[65]) {
    static const char digits[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        hex[2 * i] = digits[digest[i] >> 4];
        hex[2 * i + 1] = digits[digest[i] & 15];
    }
    hex[64] = '\0';
}

sy_status sha256_file(const char *path, char hex[65]) {
    FILE *f;
    sy_status st = io_fopen_read(path, NULL, &f, NULL);
    if (st) return st;
    sha256_ctx c;
    sha256_init(&c);
    uint8_t buf[1 << 16];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0) sha256_update(&c, buf, got);
    int failed = ferror(f);
    int err = errno;
    fclose(f);
    if (failed) return sy_error(SY_ERR_IO, "cannot read '%s': %s", path, strerror(err));
    uint8_t digest[32];
    sha256_final(&c, digest);
    sha256_hex(digest, hex);
    return SY_OK;
}
