/*
 * losses.c - what compile() says about its loss beyond building it: the
 * warning tf.keras gives when a crossentropy loss is told from_logits=True
 * but the model's output is a softmax's (a sigmoid's, for binary).
 *
 * tf.keras 2.15 (backend._get_logits) computes such a loss from the
 * activation's logits whatever from_logits says, so the loss is right
 * either way; but with from_logits=True the user most likely meant a linear
 * output, and Keras says so with a UserWarning. Python shows a warning
 * once per place in the code; here it is logged once per compile(), the
 * first time a plan with the loss is built (m->logits_warned is reset by
 * compile), not once per plan: fit builds a training and an evaluation plan.
 * With several outputs each output's loss is looked at; the first such
 * output gives the warning.
 */
#include "keras_internal.h"

void keras_loss_warn_logits(sy_model *m, int32_t j, const sy_graph *g, sy_node pred) {
    const model_head *h = &m->heads[j];
    if (!h->from_logits || m->logits_warned) return;
    bool binary = h->loss == KERAS_LOSS_BINARY_CE;
    if (h->loss != KERAS_LOSS_SPARSE_CATEGORICAL_CE && h->loss != KERAS_LOSS_CATEGORICAL_CE && !binary) return;
    if (!sy_graph_is_activation_output(g, pred, binary)) return;
    m->logits_warned = true;
    const char *fn = h->loss == KERAS_LOSS_SPARSE_CATEGORICAL_CE ? "sparse_categorical_crossentropy"
                     : binary                                    ? "binary_crossentropy"
                                                                 : "categorical_crossentropy";
    /* Keras's text, word for word (op types as TensorFlow names them) */
    sy_log(SY_LOG_WARNING,
           "\"`%s` received `from_logits=True`, but the `output` argument was produced by a %s activation and thus "
           "does not represent logits. Was this intended?\"",
           fn, binary ? "Sigmoid" : "Softmax");
}
