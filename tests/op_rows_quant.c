/*
 * op_rows_quant.c - the op harness's rows for the int8 ops (issue 18): each op
 * on small int8 inputs whose results are worked out by hand from TFLite's
 * arithmetic (docs/design/tflite.md), the edge cases included -- zero points
 * at -128 and 127, saturation, halves rounded away from zero, per-channel
 * multipliers, padding that holds the zero point, strides, grouped
 * (depthwise) products, the fused activation's clamp. Every backend runs the
 * int8 kernels (cpu/qref.c); each row is checked on ref, cpu and sim.
 */
#include "op_harness.h"

#include "check.h"

#include <math.h>
#include <string.h>

static sy_node i8(sy_graph *g, sy_shape s, const int8_t *v) { return graph_constant(g, "x", SY_I8, s, v); }

/* Multiplier and shift of a real scale, as (2, n) rows for n channels. */
static sy_node mults(sy_graph *g, int n, const double *real) {
    int32_t m[16];
    for (int c = 0; c < n; c++) {
        int shift;
        sy_q_multiplier(real[c], &m[c], &shift);
        m[n + c] = shift;
    }
    return graph_constant(g, "mult", SY_I32, sy_shape_of(2, (int64_t)2, (int64_t)n), m);
}

static void run(const char *name, sy_graph *g, sy_node y, const void *want, size_t bytes) {
    int before = check_failures;
    CHECK(sy_graph_status(g) == SY_OK, "%s: %s", name, sy_graph_error(g));
    const char *backends[] = {"ref", "cpu", "sim"};
    for (int b = 0; b < 3 && sy_graph_status(g) == SY_OK; b++) {
        sy_plan_options o = sy_plan_options_default();
        o.backend = backends[b];
        o.outputs = &y;
        o.n_outputs = 1;
        sy_plan *p = NULL;
        CHECK_OK(sy_plan_compile(g, &o, &p));
        if (!p) continue;
        CHECK_OK(sy_plan_run(p));
        const uint8_t *got = sy_plan_output(p, y);
        bool same = got && !memcmp(got, want, bytes);
        CHECK(same, "%s on %s: the output differs from TFLite's arithmetic", name, backends[b]);
        if (!same && got)
            for (size_t i = 0; i < bytes && i < 32; i++) fprintf(stderr, " %d/%d", (int8_t)got[i], ((const int8_t *)want)[i]);
        sy_plan_free(p);
    }
    fprintf(stderr, "%-40s %s\n", name, check_failures == before ? "ok" : "FAILED");
    sy_graph_free(g);
}

static sy_graph *fresh(sy_attrs *a) {
    sy_graph *g;
    sy_graph_new(&g);
    memset(a, 0, sizeof *a);
    a->q.act_min = -128, a->q.act_max = 127;
    return g;
}

/* ---- issue 18, dynamic-range quantization: the hybrid ops, float rows quantized on the fly ----
 * The expected floats follow TFLite's steps one rounding at a time (fully_connected.cc EvalHybrid,
 * lstm_eval.cc LstmStepHybrid); the int8 rows are worked out here by hand. */

static sy_node f32(sy_graph *g, sy_shape s, const float *v) { return graph_constant(g, "f", SY_F32, s, v); }

static void hybrid_rows(void) {
    sy_attrs a;
    sy_graph *g;
    /* FULLY_CONNECTED, symmetric rows: x = (1, -0.5) -> scale 1/127, q = (127, -64) (-63.5 rounded away from
     * zero); w (2, 2) = ((2, 3), (-1, 4)) at 0.5; dots 62 and -383 */
    const float xf[2] = {1.0f, -0.5f}, sc = 0.5f, bias[2] = {0.25f, -1.0f};
    const int8_t wf[4] = {2, 3, -1, 4};
    float s = (1.0f / 127.0f) * sc;
    float w_sym[2] = {0.25f + 62.0f * s, -1.0f + -383.0f * s};
    for (int asym = 0; asym < 2; asym++) {
        g = fresh(&a);
        a.hy.asymmetric = (uint8_t)asym;
        sy_node in[4] = {f32(g, sy_shape_of(2, (int64_t)1, (int64_t)2), xf),
                         i8(g, sy_shape_of(2, (int64_t)2, (int64_t)2), wf), f32(g, sy_shape_of(1, (int64_t)1), &sc),
                         f32(g, sy_shape_of(1, (int64_t)2), bias)};
        /* asymmetric: range [-0.5, 1] -> scale 1.5 / 255, zero point -43, q = (127, -128); the weight rows'
         * sums 5 and 3 take the zero point out: dots 254 - 384 + 215 = 85 and -639 + 129 = -510, i.e. the
         * exact products 0.25 and -1.5 */
        float sa = (float)(1.5 / 255.0);
        float w_asym[2] = {0.25f + 85.0f * (sa * sc), -1.0f + -510.0f * (sa * sc)};
        run(asym ? "hybrid/fully_connected_asymmetric" : "hybrid/fully_connected_symmetric", g,
            graph_add(g, SY_OP_HFULLY_CONNECTED, in, 4, &a, NULL), asym ? w_asym : w_sym, sizeof w_sym);
    }
    /* per-channel scales (0.5, 2) and a fused RELU, no bias: 62 s and max(0, -383 s') */
    g = fresh(&a);
    a.hy.act = 1;
    const float pc[2] = {0.5f, 2.0f};
    sy_node in[4] = {f32(g, sy_shape_of(2, (int64_t)1, (int64_t)2), xf), i8(g, sy_shape_of(2, (int64_t)2, (int64_t)2), wf),
                     f32(g, sy_shape_of(1, (int64_t)2), pc)};
    float w_pc[2] = {0.0f + 62.0f * (0.5f * (1.0f / 127.0f)), 0.0f};
    run("hybrid/fully_connected_per_channel_relu", g, graph_add(g, SY_OP_HFULLY_CONNECTED, in, 3, &a, NULL), w_pc,
        sizeof w_pc);
    /* LSTM, one unit, one feature, two steps, symmetric: x = (0.5, -1). Step 1: q(x) = 127 at 0.5/127, h = 0;
     * each gate g = bias_g + 127 wx_g (0.5/127 sx_g). Step 2: q(x) = -127 at 1/127, q(h) = 127 at h/127 */
    g = fresh(&a);
    const float xs[2] = {0.5f, -1.0f}, lb[4] = {0.1f, 1.0f, -0.2f, 0.3f};
    const int8_t wx[4] = {127, -64, 100, 1}, wh[4] = {-127, 50, 127, -3};
    const float ls[8] = {0.01f, 0.02f, 0.03f, 0.04f, 0.05f, 0.06f, 0.07f, 0.08f};
    sy_node li[5] = {f32(g, sy_shape_of(3, (int64_t)1, (int64_t)2, (int64_t)1), xs),
                     i8(g, sy_shape_of(2, (int64_t)4, (int64_t)1), wx), i8(g, sy_shape_of(2, (int64_t)4, (int64_t)1), wh),
                     f32(g, sy_shape_of(1, (int64_t)4), lb), f32(g, sy_shape_of(1, (int64_t)8), ls)};
    float w_lstm[2], h = 0, c = 0;
    for (int t = 0; t < 2; t++) {
        float range = fabsf(xs[t]), sx = range / 127.0f, sh = fabsf(h) / 127.0f;
        int32_t qx = (int32_t)roundf(xs[t] * (127.0f / range));
        int32_t qh = h != 0 ? (int32_t)roundf(h * (127.0f / fabsf(h))) : 0;
        float gate[4];
        for (int k = 0; k < 4; k++) {
            gate[k] = lb[k];
            gate[k] += (float)(wx[k] * qx) * (sx * ls[k]);
            gate[k] += (float)(wh[k] * qh) * ((h != 0 ? sh : 1.0f) * ls[4 + k]);
        }
        float ig = 1.0f / (1.0f + expf(-gate[0])), fg = 1.0f / (1.0f + expf(-gate[1])), cg = tanhf(gate[2]);
        c = fg * c;
        c += cg * ig;
        h = (1.0f / (1.0f + expf(-gate[3]))) * tanhf(c);
        w_lstm[t] = h;
    }
    run("hybrid/lstm_two_steps", g, graph_add(g, SY_OP_HLSTM, li, 5, &a, NULL), w_lstm, sizeof w_lstm);
}

int check_quant_ops(bool *covered, int *checks) {
    sy_attrs a;
    sy_graph *g;
    /* QUANTIZE float32 -> int8: round(x / 0.5) - 1, halves away from zero, saturating; NaN to the low end; 20
     * values, so that the cpu kernel's 16 lanes and its scalar tail both run */
    g = fresh(&a);
    float xf[20] = {-1.0f, 0.0f, 0.25f, 0.75f, 1000.0f, -1000.0f, -0.25f, -0.75f, 0.2f, 30.25f,
                    -30.25f, NAN, INFINITY, -INFINITY, 1e30f, 63.0f, -63.75f, 64.2f, -0.0f, 0.7f};
    sy_node x = graph_constant(g, "x", SY_F32, sy_shape_of(1, (int64_t)20), xf);
    a.q.y_scale = 0.5f, a.q.y_zp = -1;
    int8_t w_quant[20] = {-3, -1, 0, 1, 127, -128, -2, -3, -1, 60, -62, -128, 127, -128, 127, 125, -128, 127, -1, 0};
    run("qint8/quantize", g, graph_add(g, SY_OP_QUANTIZE, &x, 1, &a, NULL), w_quant, 20);
    /* QUANTIZE int8 -> int8 (requantize by 0.5): 127 -> 63.5 -> 64 (halves up), + 10 */
    g = fresh(&a);
    int8_t xr[3] = {-128, 0, 127};
    x = i8(g, sy_shape_of(1, (int64_t)3), xr);
    int shift;
    sy_q_multiplier(0.5, &a.q.mult[0], &shift);
    a.q.shift[0] = shift, a.q.y_zp = 10;
    int8_t w_req[3] = {-54, 10, 74};
    run("qint8/requantize", g, graph_add(g, SY_OP_QUANTIZE, &x, 1, &a, NULL), w_req, 3);
    /* DEQUANTIZE: 0.25 (x - 5) */
    g = fresh(&a);
    int8_t xd[3] = {-128, 5, 127};
    x = i8(g, sy_shape_of(1, (int64_t)3), xd);
    a.q.x_scale = 0.25f, a.q.x_zp = 5;
    float w_deq[3] = {-33.25f, 0.0f, 30.5f};
    run("qint8/dequantize", g, graph_add(g, SY_OP_DEQUANTIZE, &x, 1, &a, NULL), w_deq, sizeof w_deq);
    /* CONV_2D, SAME, input zero point -128: a 3x3 image of x - zp = 1, a 3x3 filter of ones (channel 0) and
     * twos at half the multiplier (channel 1): taps over the padding add nothing, so a corner sums 4, an
     * edge 6, the centre 9; output zero point -5; the centre clamped at 2 by a fused activation */
    g = fresh(&a);
    int8_t img[9], filt[18];
    memset(img, -127, sizeof img);
    for (int i = 0; i < 9; i++) filt[i] = 1, filt[9 + i] = 2;
    sy_node in[4] = {i8(g, sy_shape_of(4, (int64_t)1, (int64_t)3, (int64_t)3, (int64_t)1), img),
                     i8(g, sy_shape_of(4, (int64_t)2, (int64_t)3, (int64_t)3, (int64_t)1), filt)};
    int32_t bias[2] = {0, 0};
    in[2] = graph_constant(g, "bias", SY_I32, sy_shape_of(1, (int64_t)2), bias);
    in[3] = mults(g, 2, (double[]){1.0, 0.5});
    a.q.x_zp = -128, a.q.y_zp = -5, a.q.act_max = 2;
    a.q.stride[0] = a.q.stride[1] = 1, a.q.padding = SY_PAD_SAME;
    int8_t w_conv[18] = {-1, -1, 1, 1, -1, -1, 1, 1, 2, 2, 1, 1, -1, -1, 1, 1, -1, -1};
    run("qint8/conv2d_same_per_channel", g, graph_add(g, SY_OP_QCONV2D, in, 4, &a, NULL), w_conv, 18);
    /* CONV_2D, VALID, stride 2, dilation 2 over a 3x3 ramp, bias 3: the taps (0,0) (0,2) (2,0) (2,2) */
    g = fresh(&a);
    int8_t ramp[9], ones4[4] = {1, 1, 1, 1};
    for (int i = 0; i < 9; i++) ramp[i] = (int8_t)i;
    in[0] = i8(g, sy_shape_of(4, (int64_t)1, (int64_t)3, (int64_t)3, (int64_t)1), ramp);
    in[1] = i8(g, sy_shape_of(4, (int64_t)1, (int64_t)2, (int64_t)2, (int64_t)1), ones4);
    int32_t b3 = 3;
    in[2] = graph_constant(g, "bias", SY_I32, sy_shape_of(1, (int64_t)1), &b3);
    in[3] = mults(g, 1, (double[]){1.0});
    a.q.stride[0] = a.q.stride[1] = 2, a.q.dilation[0] = a.q.dilation[1] = 2, a.q.padding = SY_PAD_VALID;
    int8_t w_dil[1] = {0 + 2 + 6 + 8 + 3};
    run("qint8/conv2d_stride_dilation", g, graph_add(g, SY_OP_QCONV2D, in, 4, &a, NULL), w_dil, 1);
    /* DEPTHWISE (groups = C = 2, depth multiplier 2), 1x1 filter (c0: 1, -1; c1: 2, 3), zero point 127 */
    g = fresh(&a);
    int8_t px[2] = {117, 107}, dwf[4] = {1, -1, 2, 3};
    in[0] = i8(g, sy_shape_of(4, (int64_t)1, (int64_t)1, (int64_t)1, (int64_t)2), px);
    in[1] = i8(g, sy_shape_of(4, (int64_t)4, (int64_t)1, (int64_t)1, (int64_t)1), dwf);
    int32_t b4[4] = {0, 0, 0, 0};
    in[2] = graph_constant(g, "bias", SY_I32, sy_shape_of(1, (int64_t)4), b4);
    in[3] = mults(g, 4, (double[]){1.0, 1.0, 1.0, 1.0});
    a.q.x_zp = 127, a.q.groups = 2, a.q.stride[0] = a.q.stride[1] = 1;
    int8_t w_dw[4] = {-10, 10, -40, -60};
    run("qint8/depthwise_multiplier", g, graph_add(g, SY_OP_QCONV2D, in, 4, &a, NULL), w_dw, 4);
    /* FULLY_CONNECTED per tensor: (x - 1) . w + bias, saturating at 127 */
    g = fresh(&a);
    int8_t fx[6] = {2, 3, 4, 101, 101, 101}, fw[3] = {1, 2, 3};
    int32_t fb = -1;
    in[0] = i8(g, sy_shape_of(2, (int64_t)2, (int64_t)3), fx);
    in[1] = i8(g, sy_shape_of(2, (int64_t)1, (int64_t)3), fw);
    in[2] = graph_constant(g, "bias", SY_I32, sy_shape_of(1, (int64_t)1), &fb);
    in[3] = mults(g, 1, (double[]){1.0});
    a.q.x_zp = 1;
    int8_t w_fc[2] = {1 + 4 + 9 - 1, 127};
    run("qint8/fully_connected", g, graph_add(g, SY_OP_QFULLY_CONNECTED, in, 4, &a, NULL), w_fc, 2);
    /* ADD, scales 1 and 1 into 2: (x1 + x2) / 2, halves away from zero; output zero point 0 */
    g = fresh(&a);
    int8_t a1[4] = {0, 100, -128, -3}, a2[4] = {0, 27, -128, 0};
    in[0] = i8(g, sy_shape_of(1, (int64_t)4), a1);
    in[1] = i8(g, sy_shape_of(1, (int64_t)4), a2);
    a.q.left_shift = 20;
    double r[3] = {0.5, 0.5, 2.0 / ((1 << 20) * 2.0)};
    for (int j = 0; j < 3; j++) {
        sy_q_multiplier(r[j], &a.q.mult[j], &shift);
        a.q.shift[j] = shift;
    }
    int8_t w_add[4] = {0, 64, -128, -2};
    run("qint8/add", g, graph_add(g, SY_OP_QADD, in, 2, &a, NULL), w_add, 4);
    /* MAX_POOL 2x2: 7, clamped to 5 by the activation */
    g = fresh(&a);
    int8_t mp[4] = {-5, 3, 7, -128};
    x = i8(g, sy_shape_of(4, (int64_t)1, (int64_t)2, (int64_t)2, (int64_t)1), mp);
    a.q.ksize[0] = a.q.ksize[1] = 2, a.q.stride[0] = a.q.stride[1] = 2, a.q.act_max = 5;
    int8_t w_mp[1] = {5};
    run("qint8/max_pool", g, graph_add(g, SY_OP_QMAX_POOL2D, &x, 1, &a, NULL), w_mp, 1);
    /* AVERAGE_POOL 2x2 SAME stride 2 over a 3x2 image: the last window holds one row (two taps) */
    g = fresh(&a);
    int8_t ap[6] = {-1, -2, 1, 2, 5, -7};
    x = i8(g, sy_shape_of(4, (int64_t)1, (int64_t)3, (int64_t)2, (int64_t)1), ap);
    a.q.ksize[0] = a.q.ksize[1] = 2, a.q.stride[0] = a.q.stride[1] = 2, a.q.padding = SY_PAD_SAME;
    int8_t w_ap[2] = {0 /* 0 / 4 */, -1 /* (-2 - 1) / 2, truncated */};
    run("qint8/avg_pool_same", g, graph_add(g, SY_OP_QAVG_POOL2D, &x, 1, &a, NULL), w_ap, 2);
    /* MEAN over H, W: scales 1 -> 0.5, so 2 x the mean 2.5 = 5 */
    g = fresh(&a);
    int8_t mn[4] = {1, 2, 3, 4};
    x = i8(g, sy_shape_of(4, (int64_t)1, (int64_t)2, (int64_t)2, (int64_t)1), mn);
    a.q.axes = 6, a.q.x_scale = 1, a.q.y_scale = 0.5f;
    sy_q_multiplier(2.0, &a.q.mult[0], &shift);
    a.q.shift[0] = shift;
    sy_shape ms = sy_shape_of(2, (int64_t)1, (int64_t)1);
    int8_t w_mean[1] = {5};
    run("qint8/mean", g, graph_add(g, SY_OP_QMEAN, &x, 1, &a, &ms), w_mean, 1);
    /* SOFTMAX (output 1/256, zero point -128): equal inputs 0.5 -> 0; a sure class saturates at 127 */
    g = fresh(&a);
    int8_t sm[4] = {3, 3, 127, -128};
    x = i8(g, sy_shape_of(2, (int64_t)2, (int64_t)2), sm);
    a.q.x_scale = 1, a.q.beta = 1, a.q.y_scale = 1.0f / 256, a.q.y_zp = -128;
    int8_t w_sm[4] = {0, 0, 127, -128};
    run("qint8/softmax", g, graph_add(g, SY_OP_QSOFTMAX, &x, 1, &a, NULL), w_sm, 4);
    /* PAD by one pixel: the output's zero point (-3) around 7 */
    g = fresh(&a);
    int8_t pv = 7;
    x = i8(g, sy_shape_of(4, (int64_t)1, (int64_t)1, (int64_t)1, (int64_t)1), &pv);
    a.q.y_zp = -3, a.q.pad_before[1] = a.q.pad_before[2] = 1;
    sy_shape ps = sy_shape_of(4, (int64_t)1, (int64_t)3, (int64_t)3, (int64_t)1);
    int8_t w_pad[9] = {-3, -3, -3, -3, 7, -3, -3, -3, -3};
    run("qint8/pad", g, graph_add(g, SY_OP_QPAD, &x, 1, &a, &ps), w_pad, 9);
    /* CONV_2D 1x1 (channel 0: x, channel 1: -x; the conv clamped at -9) -> MAX_POOL 2x2 SAME over a 3x4 ramp 0..11
     * (clamped at 10): on ref and cpu the fusion pass makes them one qconv2d_pool (compiler/fusion.c) */
    g = fresh(&a);
    int8_t ramp12[12], pm[2] = {1, -1};
    for (int i = 0; i < 12; i++) ramp12[i] = (int8_t)i;
    in[0] = i8(g, sy_shape_of(4, (int64_t)1, (int64_t)3, (int64_t)4, (int64_t)1), ramp12);
    in[1] = i8(g, sy_shape_of(4, (int64_t)2, (int64_t)1, (int64_t)1, (int64_t)1), pm);
    in[2] = graph_constant(g, "bias", SY_I32, sy_shape_of(1, (int64_t)2), bias);
    in[3] = mults(g, 2, (double[]){1.0, 1.0});
    a.q.stride[0] = a.q.stride[1] = 1, a.q.padding = SY_PAD_SAME, a.q.act_min = -9;
    sy_node cv = graph_add(g, SY_OP_QCONV2D, in, 4, &a, NULL);
    memset(&a, 0, sizeof a);
    a.q.ksize[0] = a.q.ksize[1] = 2, a.q.stride[0] = a.q.stride[1] = 2, a.q.padding = SY_PAD_SAME;
    a.q.act_min = -128, a.q.act_max = 10;
    int8_t w_cp[8] = {5, 0, 7, -2, 9, -8, 10, -9};
    run("qint8/conv2d_max_pool_fused", g, graph_add(g, SY_OP_QMAX_POOL2D, &cv, 1, &a, NULL), w_cp, 8);
    hybrid_rows();
    sy_op ops[] = {SY_OP_QCONV2D_POOL, SY_OP_CONSTANT, SY_OP_QUANTIZE, SY_OP_DEQUANTIZE, SY_OP_QCONV2D, SY_OP_QFULLY_CONNECTED, SY_OP_QADD,
                   SY_OP_QMAX_POOL2D, SY_OP_QAVG_POOL2D, SY_OP_QMEAN, SY_OP_QSOFTMAX, SY_OP_QPAD,
                   SY_OP_HFULLY_CONNECTED, SY_OP_HLSTM};
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) covered[ops[i]] = true;
    (void)check_report; /* test_ops reports */
    *checks = check_count;
    return check_failures; /* check.h's counters are this file's own */
}
