/*
 * image.c - PNG and JPEG images decoded as TensorFlow 2.15's
 * tf.io.decode_image decodes them (dtype uint8), through libpng and
 * libjpeg-turbo, into uint8 tensors (height, width, channels).
 *
 * The format is found from the first bytes, as decode_image finds it: PNG
 * (89 50 4E 47), JPEG (FF D8 FF); GIF and BMP, which decode_image also
 * takes, are refused by name. `channels` 0 keeps the file's own (a
 * palette PNG gives 3, or 4 when it has a transparency chunk); 1, 3 or
 * 4 (PNG) convert as TensorFlow does:
 *
 *  - PNG: the libpng transformations TensorFlow's png_io.cc asks for, in
 *    its order, so the same library computes the same pixels: palette to
 *    RGB, gray below 8 bits expanded, tRNS to alpha when alpha is wanted
 *    (else alpha stripped), an opaque alpha added (filler 2^bits - 1) when
 *    wanted and absent, 16 bits stripped to their high byte
 *    (png_set_strip_16: decode_image with dtype uint8 decodes with 8
 *    channel bits), RGB to gray with weights 0.299, 0.587 (Rec. 601, as
 *    JPEG) and gray to RGB; interlaced images through libpng's passes.
 *  - JPEG: jpeg_mem.cc's settings: fancy upsampling on, scale 1/1, the
 *    output colour space RGB (or grayscale for channels 1; a one-component
 *    file with channels 0 stays gray) and the DCT method
 *    TensorFlow's decode_image leaves at its default, JDCT_IFAST ("the
 *    TensorFlow-chosen default ... sacrificing image quality for speed"):
 *    tests/tfrecord_layouts.py checks every pixel against TensorFlow's.
 *    A truncated file is refused (TensorFlow's try_recover_truncated is
 *    off by default); CMYK and YCCK files are refused by name.
 *
 * Hostile input: both libraries report errors through callbacks that
 * longjmp back here (libpng's png_jmpbuf, libjpeg's error_exit), so a
 * corrupt file is an error and never an abort; warnings are not printed.
 * The output is allocated from the header's dimensions only after they
 * are checked: height * width * channels must stay under max_bytes
 * (2^29 for sy_image_decode, the bound TensorFlow's JPEG decoder sets
 * itself), so a 60-byte file declaring 100,000 x 100,000 pixels is refused
 * before any memory is taken. Without libpng or libjpeg (the build says
 * which it found) decoding that format is refused saying it was not built
 * in.
 */
#include "io_internal.h"

#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#ifdef SY_HAVE_PNG
#include <png.h>
#endif
#ifdef SY_HAVE_JPEG
#include <jpeglib.h>
#include <jerror.h>
#endif

#define IMAGE_MAX_BYTES ((int64_t)1 << 29)

static bool starts(const uint8_t *p, size_t n, const char *magic, size_t m) { return n >= m && !memcmp(p, magic, m); }

const char *io_image_format(const void *data, size_t n) {
    const uint8_t *p = data;
    if (starts(p, n, "\x89PNG\r\n\x1a\n", 8)) return "PNG";
    if (starts(p, n, "\xff\xd8\xff", 3)) return "JPEG";
    if (starts(p, n, "GIF8", 4)) return "GIF";
    if (starts(p, n, "BM", 2)) return "BMP";
    return NULL;
}

#if defined(SY_HAVE_PNG) || defined(SY_HAVE_JPEG)
/* SY_ERR_CORRUPT unless height x width x channels fits in max_bytes. */
static sy_status check_size(const char *format, uint64_t w, uint64_t h, int channels, int64_t max_bytes) {
    if (w == 0 || h == 0)
        return sy_error(SY_ERR_CORRUPT, "%s image of %llu x %llu pixels: it holds no pixels", format,
                        (unsigned long long)w, (unsigned long long)h);
    if (w > (uint64_t)max_bytes || h > (uint64_t)max_bytes || w * h * (uint64_t)channels > (uint64_t)max_bytes)
        return sy_error(SY_ERR_CORRUPT, "%s image of %llu x %llu pixels x %d channels is too large: at most %lld bytes",
                        format, (unsigned long long)w, (unsigned long long)h, channels, (long long)max_bytes);
    return SY_OK;
}

static sy_status new_image(int64_t h, int64_t w, int c, sy_tensor **out) {
    return sy_tensor_new(SY_U8, sy_shape_of(3, h, w, (int64_t)c), out);
}
#endif

/* ---- PNG ---------------------------------------------------------------------------------------- */

#ifdef SY_HAVE_PNG
typedef struct png_src {
    const uint8_t *p;
    size_t n, pos;
    char msg[160];
} png_src;

static void png_read_mem(png_structp png, png_bytep dst, png_size_t n) {
    png_src *s = png_get_io_ptr(png);
    if (n > s->n - s->pos) {
        snprintf(s->msg, sizeof s->msg, "the file ends after %zu bytes, inside its data (truncated)", s->n);
        png_error(png, s->msg);
    }
    memcpy(dst, s->p + s->pos, n);
    s->pos += n;
}

static void png_on_error(png_structp png, png_const_charp msg) {
    png_src *s = png_get_error_ptr(png);
    if (msg != s->msg) snprintf(s->msg, sizeof s->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void png_on_warning(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

static sy_status decode_png(const uint8_t *data, size_t n, int want, int64_t max_bytes, sy_tensor **out) {
    png_src src = {data, n, 0, ""};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, png_on_error, png_on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return sy_error(SY_ERR_OUT_OF_MEMORY, "PNG: libpng could not start");
    }
    /* volatile: read after a longjmp */
    sy_tensor *volatile t = NULL;
    png_bytep *volatile rows = NULL;
    sy_status volatile st = SY_OK;
    if (setjmp(png_jmpbuf(png))) {
        st = sy_error(SY_ERR_CORRUPT, "PNG: %s", src.msg);
        goto done;
    }
    png_set_read_fn(png, &src, png_read_mem);
    png_read_info(png, info);
    png_uint_32 w, h;
    int depth, color;
    png_get_IHDR(png, info, &w, &h, &depth, &color, NULL, NULL, NULL);
    bool trns = png_get_valid(png, info, PNG_INFO_tRNS) != 0;
    int channels = want ? want : color == PNG_COLOR_TYPE_PALETTE ? (trns ? 4 : 3) : png_get_channels(png, info);
    if ((st = check_size("PNG", w, h, channels, max_bytes))) goto done;
    bool has_alpha = (color & PNG_COLOR_MASK_ALPHA) != 0;
    if ((channels & 1) == 0) { /* alpha wanted */
        if (!has_alpha) {
            if (trns) png_set_tRNS_to_alpha(png);
            else png_set_add_alpha(png, (png_uint_32)((1u << depth) - 1), PNG_FILLER_AFTER);
        }
    } else if (has_alpha || trns) {
        png_set_strip_alpha(png);
    }
    if (depth > 8) png_set_strip_16(png);
    png_set_packing(png);
    int passes = png_set_interlace_handling(png);
    (void)passes; /* png_read_image runs them */
    if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    bool is_gray = !(color & PNG_COLOR_MASK_COLOR);
    if (is_gray && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (channels < 3) {
        if (!is_gray) png_set_rgb_to_gray(png, 1, 0.299, 0.587);
    } else if (is_gray) {
        png_set_gray_to_rgb(png);
    }
    png_read_update_info(png, info);
    size_t row_bytes = png_get_rowbytes(png, info);
    if (row_bytes != (size_t)w * (size_t)channels) {
        st = sy_error(SY_ERR_CORRUPT, "PNG: rows of %zu bytes after conversion, expected %llu", row_bytes,
                      (unsigned long long)w * (unsigned long long)channels);
        goto done;
    }
    sy_tensor *img = NULL;
    if ((st = new_image(h, w, channels, &img))) goto done;
    t = img;
    rows = sy_malloc(sizeof(png_bytep) * h);
    if (!rows) {
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "PNG: no memory for %u rows", (unsigned)h);
        goto done;
    }
    for (png_uint_32 y = 0; y < h; y++) rows[y] = (png_bytep)sy_tensor_data(t) + (size_t)y * row_bytes;
    png_read_image(png, rows);
    png_read_end(png, NULL);
done:
    png_destroy_read_struct(&png, &info, NULL);
    sy_free(rows);
    if (st) {
        sy_tensor_free(t);
        return st;
    }
    *out = t;
    return SY_OK;
}
#endif

/* ---- JPEG --------------------------------------------------------------------------------------- */

#ifdef SY_HAVE_JPEG
typedef struct jpeg_err {
    struct jpeg_error_mgr pub;
    jmp_buf jump;
    char msg[JMSG_LENGTH_MAX + 64];
} jpeg_err;

static void jpeg_on_error(j_common_ptr cinfo) {
    jpeg_err *e = (jpeg_err *)cinfo->err;
    cinfo->err->format_message(cinfo, e->msg);
    longjmp(e->jump, 1);
}

/* Warnings are not printed; "premature end of data" is the one TensorFlow
 * refuses (the rest of the image would be made up). */
static void jpeg_on_message(j_common_ptr cinfo, int level) {
    if (level == -1 && cinfo->err->msg_code == JWRN_JPEG_EOF) {
        jpeg_err *e = (jpeg_err *)cinfo->err;
        snprintf(e->msg, sizeof e->msg, "the file ends inside its data (truncated)");
        longjmp(e->jump, 1);
    }
}

static sy_status decode_jpeg(const uint8_t *data, size_t n, int want, int64_t max_bytes, sy_tensor **out) {
    if (want == 4)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "JPEG: channels 4: a JPEG image decodes to 1 or 3 channels "
                        "(0: the file's own), as TensorFlow's");
    struct jpeg_decompress_struct cinfo;
    jpeg_err err;
    memset(&err, 0, sizeof err);
    cinfo.err = jpeg_std_error(&err.pub);
    err.pub.error_exit = jpeg_on_error;
    err.pub.emit_message = jpeg_on_message;
    sy_tensor *volatile t = NULL;
    sy_status volatile st = SY_OK;
    bool volatile created = false;
    if (setjmp(err.jump)) {
        st = sy_error(SY_ERR_CORRUPT, "JPEG: %s", err.msg);
        goto done;
    }
    jpeg_create_decompress(&cinfo);
    created = true;
    jpeg_mem_src(&cinfo, data, (unsigned long)n);
    jpeg_read_header(&cinfo, TRUE);
    if (cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK) {
        st = sy_error(SY_ERR_UNSUPPORTED, "JPEG: a CMYK image: only grayscale and YCbCr/RGB JPEGs are decoded");
        goto done;
    }
    int channels = want ? want : cinfo.num_components == 1 ? 1 : 3;
    cinfo.out_color_space = channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
    cinfo.do_fancy_upsampling = TRUE;
    cinfo.scale_num = 1;
    cinfo.scale_denom = 1;
    cinfo.dct_method = JDCT_IFAST;
    jpeg_calc_output_dimensions(&cinfo);
    if ((st = check_size("JPEG", cinfo.output_width, cinfo.output_height, channels, max_bytes))) goto done;
    sy_tensor *img = NULL;
    if ((st = new_image(cinfo.output_height, cinfo.output_width, channels, &img))) goto done;
    t = img;
    jpeg_start_decompress(&cinfo);
    size_t stride = (size_t)cinfo.output_width * (size_t)channels;
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW row = (JSAMPROW)sy_tensor_data(t) + (size_t)cinfo.output_scanline * stride;
        jpeg_read_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_decompress(&cinfo);
done:
    if (created) jpeg_destroy_decompress(&cinfo);
    if (st) {
        sy_tensor_free(t);
        return st;
    }
    *out = t;
    return SY_OK;
}
#endif

sy_status io_image_decode(const void *data, size_t n, int32_t channels, int64_t max_bytes, sy_tensor **out) {
    if (!out) return sy_error(SY_ERR_INVALID_ARGUMENT, "decode_image: out is NULL");
    *out = NULL;
    if (!data && n) return sy_error(SY_ERR_INVALID_ARGUMENT, "decode_image: data is NULL");
    if (channels < 0 || channels > 4 || channels == 2) /* decode_image refuses 2 too */
        return sy_error(SY_ERR_INVALID_ARGUMENT, "decode_image: channels %d; expected 0 (the file's own), 1, 3 or 4, "
                        "as tf.io.decode_image", (int)channels);
    const char *format = io_image_format(data, n);
    if (!format) {
        const uint8_t *p = data;
        return sy_error(SY_ERR_CORRUPT, "decode_image: %zu bytes that are not a PNG or JPEG image (they start %s%02x %02x "
                        "%02x %02x)", n, n < 4 ? "(short) " : "", n > 0 ? p[0] : 0, n > 1 ? p[1] : 0, n > 2 ? p[2] : 0,
                        n > 3 ? p[3] : 0);
    }
    if (format[0] == 'G' || format[0] == 'B')
        return sy_error(SY_ERR_UNSUPPORTED, "decode_image: a %s image: only PNG and JPEG are decoded", format);
    if (format[0] == 'P') {
#ifdef SY_HAVE_PNG
        return decode_png(data, n, channels, max_bytes, out);
#else
        return sy_error(SY_ERR_UNSUPPORTED, "decode_image: a PNG image, but systolic was built without libpng "
                        "(install libpng-dev and rebuild)");
#endif
    }
#ifdef SY_HAVE_JPEG
    return decode_jpeg(data, n, channels, max_bytes, out);
#else
    return sy_error(SY_ERR_UNSUPPORTED, "decode_image: a JPEG image, but systolic was built without libjpeg "
                    "(install libjpeg62-turbo-dev and rebuild)");
#endif
}

sy_status sy_image_decode(const void *data, size_t n, int32_t channels, sy_tensor **out) {
    return io_image_decode(data, n, channels, IMAGE_MAX_BYTES, out);
}
