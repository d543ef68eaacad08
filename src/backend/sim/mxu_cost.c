/*
 * mxu_cost.c - the cycles of a matrix product on weight-stationary systolic
 * arrays: the pure formula under the emulated TPU's clock (issue 16).
 *
 * A weight-stationary R x C array holds an R x C tile of the K x N operand
 * (the weights: R rows of the contraction, C output columns) in its cells.
 * The M rows of the other operand enter from the left edge, skewed by one
 * cycle per array row; each cell multiplies the value passing through by
 * its weight and adds it to the partial sum flowing down; the C sums leave
 * the bottom edge, skewed by one cycle per column. One tile -- a "fold" --
 * therefore costs
 *
 *   R            cycles to shift the weights in, one array row per cycle,
 *   M            cycles to stream the rows through,
 *   R + C - 2    cycles of fill and drain: the last row enters R - 1 cycles
 *                after the first reaches the first array row, and its sums
 *                leave C - 1 cycles after the first column's,
 *
 * 2R + C + M - 2 in all, and a product has ceil(K / R) * ceil(N / C) folds,
 * run one after another (their partial sums over K accumulate outside the
 * array). This is SCALE-Sim's weight-stationary compute model, counted
 * from its source (scale-sim-v2, scalesim/compute/systolic_compute_ws.py:
 * each fold's filter demand is R weight rows then R + C + T - 2 rows for
 * the inputs to stream and the sums to drain; the memory system reports
 * the cycle of the last output served, numbered from 0, hence the -1).
 * With no memory stalls it reproduces SCALE-Sim's golden reports exactly
 * (tests/test_cost.c).
 *
 * A TensorCore has several such arrays (TPU v3: 2 MXUs, v4: 4): the folds
 * are shared out among them, and when a product has fewer folds than there
 * are arrays, the arrays holding the same fold each take a share of the M
 * rows.
 *
 * A TPU's MXU double-buffers its weights: it holds one tile and shifts the
 * next one in while the rows stream through the first (Jouppi et al., "In-
 * Datacenter Performance Analysis of a Tensor Processing Unit", ISCA 2017,
 * section 2: a second tile of weights "for double-buffering, to hide the
 * 256 cycles it takes to shift a tile in"), and the rows of consecutive
 * folds follow one another through the array without draining it between
 * them. Then only the first fold's load and the last fold's fill and drain
 * show, and a fold with fewer rows than the array has rows waits for its
 * successor's weights:
 *
 *   R + (folds_per_array - 1) * max(M, R) + M + R + C - 2 - 1
 *
 * which for one fold is the formula above.
 */
#include "../backend_internal.h"
#include "systolic/profile.h"

static int64_t ceil_div(int64_t a, int64_t b) {
    return (a + b - 1) / b;
}

int64_t sy_mxu_folds(int64_t k, int64_t n, int64_t rows, int64_t cols) {
    if (k < 1 || n < 1 || rows < 1 || cols < 1) return 0;
    return ceil_div(k, rows) * ceil_div(n, cols);
}

int64_t sy_mxu_ws_cycles(int64_t m, int64_t k, int64_t n, int64_t rows, int64_t cols,
                         int64_t arrays, bool double_buffered) {
    if (m < 1 || arrays < 1) return 0;
    int64_t folds = sy_mxu_folds(k, n, rows, cols);
    if (folds == 0) return 0;
    int64_t per_array = ceil_div(folds, arrays), rows_streamed = m;
    if (folds < arrays)
        rows_streamed =
            ceil_div(m, arrays / folds); /* arrays / folds arrays share each fold's rows */
    if (double_buffered)
        return rows + (per_array - 1) * (rows_streamed > rows ? rows_streamed : rows) +
               rows_streamed + rows + cols - 3;
    return per_array * (2 * rows + cols + rows_streamed - 2) - 1;
}
