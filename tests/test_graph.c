/*
 * test_graph.c - building graphs: shape inference, and shape errors found at
 * build time that name the op (with its scope) and both shapes.
 */
#include "check.h"
#include "systolic.h"

#include <string.h>

#define HAS(...) has_all(sy_graph_error(g), (const char *[]){__VA_ARGS__, NULL})

static bool has_all(const char *msg, const char **parts) {
    for (; *parts; parts++)
        if (!strstr(msg, *parts)) {
            fprintf(stderr, "  missing '%s' in: %s\n", *parts, msg);
            return false;
        }
    return true;
}

static sy_shape shp(int rank, int64_t a, int64_t b, int64_t c, int64_t d) {
    int64_t dims[4] = {a, b, c, d};
    return sy_shape_from(rank, dims);
}

static void test_inference(void) {
    sy_graph *g;
    sy_graph_new(&g);
    sy_node x = sy_graph_input(g, "x", SY_F32, shp(4, 128, 28, 28, 1));
    sy_node k = sy_graph_param(g, "k", SY_F32, shp(4, 3, 3, 1, 64), sy_init_zeros());
    sy_node c = sy_graph_conv2d(g, x, k, 1, 1, SY_PADDING_VALID);
    sy_node p = sy_graph_max_pool2d(g, c, 2, 2, 2, 2, SY_PADDING_VALID);
    sy_node s = sy_graph_conv2d(g, x, k, 2, 2, SY_PADDING_SAME);
    sy_node f = sy_graph_reshape(g, p, shp(2, 128, 13 * 13 * 64, 0, 0));
    sy_node w = sy_graph_param(g, "w", SY_F32, shp(2, 10816, 10, 0, 0), sy_init_zeros());
    sy_node d = sy_graph_matmul(g, f, w, false, false);
    sy_node b = sy_graph_add(g, sy_graph_input(g, "a", SY_F32, shp(3, 4, 1, 3, 0)), sy_graph_input(g, "b", SY_F32, shp(2, 2, 3, 0, 0)));
    int32_t axes[1] = {1};
    sy_node r = sy_graph_reduce_mean(g, b, axes, 1, true);
    sy_node e = sy_graph_gather(g, sy_graph_param(g, "emb", SY_F32, shp(2, 15000, 32, 0, 0), sy_init_zeros()),
                                sy_graph_input(g, "ids", SY_I32, shp(2, 64, 250, 0, 0)));
    CHECK(sy_graph_status(g) == SY_OK, "%s", sy_graph_error(g));
    char buf[SY_SHAPE_STR_MAX];
    struct {
        sy_node n;
        const char *expect;
    } cases[] = {{c, "(128, 26, 26, 64)"}, {p, "(128, 13, 13, 64)"}, {s, "(128, 14, 14, 64)"}, {d, "(128, 10)"},
                 {b, "(4, 2, 3)"},         {r, "(4, 1, 3)"},         {e, "(64, 250, 32)"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sy_shape sh = sy_graph_shape(g, cases[i].n);
        CHECK(strcmp(sy_shape_format(&sh, buf, sizeof buf), cases[i].expect) == 0, "%s: %s, expected %s",
              sy_graph_op_name(g, cases[i].n), buf, cases[i].expect);
    }
    sy_graph_free(g);
}

static void test_shape_errors(void) {
    sy_graph *g;

    sy_graph_new(&g);
    sy_node x = sy_graph_input(g, "x", SY_F32, shp(2, 128, 10816, 0, 0));
    sy_graph_push_scope(g, "dense_1");
    sy_node w = sy_graph_param(g, "kernel", SY_F32, shp(2, 10815, 10, 0, 0), sy_init_zeros());
    sy_node y = sy_graph_matmul(g, x, w, false, false);
    sy_graph_pop_scope(g);
    CHECK(y == SY_NONE && sy_graph_status(g) == SY_ERR_SHAPE, "matmul mismatch accepted");
    CHECK(HAS("matmul", "dense_1/matmul", "(128, 10816)", "(10815, 10)", "10816", "10815"), "matmul message");
    CHECK(strcmp(sy_last_error(), sy_graph_error(g)) == 0, "sy_last_error carries it too");
    /* sticky: later calls do nothing and keep the first error */
    CHECK(sy_graph_relu(g, x) == SY_NONE && strstr(sy_graph_error(g), "dense_1/matmul"), "errors are sticky");
    sy_graph_free(g);

    sy_graph_new(&g);
    sy_node img = sy_graph_input(g, "img", SY_F32, shp(4, 8, 28, 28, 3));
    sy_graph_push_scope(g, "conv2d");
    sy_node k = sy_graph_param(g, "kernel", SY_F32, shp(4, 3, 3, 1, 64), sy_init_zeros());
    sy_graph_conv2d(g, img, k, 1, 1, SY_PADDING_VALID);
    CHECK(HAS("conv2d (conv2d/conv2d)", "(8, 28, 28, 3)", "3 channels", "(3, 3, 1, 64)", "expects 1"), "conv channels");
    sy_graph_free(g);

    sy_graph_new(&g);
    sy_node small = sy_graph_input(g, "s", SY_F32, shp(4, 1, 2, 2, 1));
    sy_graph_max_pool2d(g, small, 3, 3, 1, 1, SY_PADDING_VALID);
    CHECK(HAS("max_pool2d", "3x3 window", "(1, 2, 2, 1)"), "pool window larger than input");
    sy_graph_free(g);

    sy_graph_new(&g);
    sy_graph_add(g, sy_graph_input(g, "a", SY_F32, shp(2, 4, 3, 0, 0)), sy_graph_input(g, "b", SY_F32, shp(2, 4, 2, 0, 0)));
    CHECK(HAS("add", "cannot broadcast", "(4, 3)", "(4, 2)"), "broadcast");
    sy_graph_free(g);

    sy_graph_new(&g);
    sy_graph_reshape(g, sy_graph_input(g, "a", SY_F32, shp(2, 4, 3, 0, 0)), shp(2, 5, 3, 0, 0));
    CHECK(HAS("reshape", "(4, 3)", "12 elements", "(5, 3)", "15 elements"), "reshape");
    sy_graph_free(g);

    sy_graph_new(&g);
    sy_node logits = sy_graph_input(g, "logits", SY_F32, shp(2, 32, 10, 0, 0));
    sy_graph_sparse_categorical_crossentropy(g, logits, sy_graph_input(g, "labels", SY_I32, shp(1, 31, 0, 0, 0)), true);
    CHECK(HAS("sparse_softmax_cross_entropy", "labels (31,)", "(32, 10)"), "label shape");
    sy_graph_free(g);

    sy_graph_new(&g);
    sy_graph_sparse_categorical_crossentropy(g, sy_graph_input(g, "p", SY_F32, shp(2, 32, 10, 0, 0)),
                                             sy_graph_input(g, "labels", SY_F32, shp(1, 32, 0, 0, 0)), false);
    CHECK(HAS("labels are float32", "int32"), "label dtype");
    sy_graph_free(g);

    sy_graph_new(&g);
    sy_node xs[2] = {sy_graph_input(g, "a", SY_F32, shp(2, 4, 3, 0, 0)), sy_graph_input(g, "b", SY_F32, shp(2, 5, 2, 0, 0))};
    sy_graph_concat(g, xs, 2, 1);
    CHECK(HAS("concat", "(5, 2)", "(4, 3)", "axis 1"), "concat");
    sy_graph_free(g);

    sy_graph_new(&g);
    sy_graph_param(g, "w", SY_F32, shp(1, 3, 0, 0, 0), sy_init_zeros());
    sy_graph_param(g, "w", SY_F32, shp(1, 3, 0, 0, 0), sy_init_zeros());
    CHECK(HAS("'w' is already used"), "duplicate names");
    sy_graph_free(g);

    sy_graph_new(&g);
    sy_graph_input(g, "bad", SY_F32, shp(2, 4, 0, 0, 0));
    CHECK(HAS("input 'bad'", "(4, 0)", "not positive"), "zero dimension");
    sy_graph_free(g);

    sy_graph_new(&g);
    sy_graph_dropout(g, sy_graph_input(g, "a", SY_F32, shp(1, 4, 0, 0, 0)), 1.5f, 1);
    CHECK(HAS("dropout", "rate 1.5"), "dropout rate");
    sy_graph_free(g);

    sy_graph_new(&g);
    sy_graph_relu(g, 12345);
    CHECK(HAS("relu", "not a node"), "dangling node id");
    sy_graph_free(g);
}

int main(void) {
    test_inference();
    test_shape_errors();
    return check_report("test_graph");
}
