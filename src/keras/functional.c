/*
 * functional.c - Functional models: inputs, layers called on tensors, and
 * the graph of those calls that every model -- Sequential included -- is
 * run, saved and summarised from.
 *
 * A model's graph is a list of nodes (keras_internal.h): each a model
 * input or one call of a layer on earlier nodes. A "tensor" of the C API
 * (sy_model_input, sy_model_call) is a node's index, since every layer
 * here has one output. Weights belong to the layer, not the call: a layer
 * is built -- its output shape inferred, its weights created -- at its
 * first call, and a later call must give inputs of the same shapes (a
 * Dense layer's kernel fixes its input width); the calls share the
 * weights, as Keras's do. A Sequential model is the chain case: its nodes
 * are made again from its layer list (model_chain_nodes) whenever a layer
 * is added, so the graph builder, summary and saving have one path.
 *
 * sy_model_set_outputs ends a Functional model as Keras's Model(inputs,
 * outputs) does (its _map_graph_network, keras/src/engine/functional.py):
 * it walks the graph from the outputs depth first, refuses an output that
 * needs a tensor no input leads to ("Graph disconnected") and a layer name
 * used twice, gives each node its depth (the longest path to an output)
 * and orders the layers by decreasing depth, ties by the order the walk
 * met them -- Keras's model.layers, the order of the model's JSON, its
 * summary and its weights. The layers are stored in that order from then
 * on. A cycle cannot be built through the C API (a call's inputs exist
 * before it); the JSON reader refuses one by name (config_read.c).
 */
#include "keras_internal.h"

#include <string.h>

sy_shape model_output_shape(const sy_model *m) {
    sy_shape none = {0};
    if (m->n_outputs > 0) return m->nodes[m->outputs[0]].shape;
    return m->n_layers && m->built ? m->layers[m->n_layers - 1].out_shape : none;
}

const model_layer *model_first_layer(const sy_model *m) {
    if (!m->functional) return m->n_layers ? &m->layers[0] : NULL;
    for (int64_t i = 0; i < m->n_nodes; i++) {
        const model_node *n = &m->nodes[i];
        if (n->layer >= 0 && n->n_in > 0 && m->edges[n->in_off] == m->inputs[0].node) return &m->layers[n->layer];
    }
    return NULL;
}

static sy_status grow_nodes(sy_model *m, int n_edges) {
    if (SY_GROW(m->nodes, m->cap_nodes, m->n_nodes + 1) || SY_GROW(m->edges, m->cap_edges, m->n_edges + n_edges))
        return sy_error(SY_ERR_OUT_OF_MEMORY, "model '%s': out of memory", m->name);
    return SY_OK;
}

sy_status model_chain_nodes(sy_model *m) {
    m->n_nodes = m->n_edges = 0;
    m->n_outputs = 0;
    if (!m->built) return SY_OK;
    m->n_inputs = 1;
    m->inputs[0].shape = m->input_shape;
    m->inputs[0].node = 0;
    sy_status st = grow_nodes(m, 0);
    if (st) return st;
    m->nodes[m->n_nodes++] = (model_node){.layer = -1, .input = 0, .shape = m->input_shape};
    for (int64_t i = 0; i < m->n_layers; i++) {
        if ((st = grow_nodes(m, 1))) return st;
        m->edges[m->n_edges] = (int32_t)i; /* node i is the call before layer i's */
        m->nodes[m->n_nodes++] = (model_node){.layer = (int32_t)i, .in_off = (int32_t)m->n_edges++, .n_in = 1,
                                              .shape = m->layers[i].out_shape};
        m->layers[i].calls = 1;
    }
    m->outputs[0] = (int32_t)m->n_nodes - 1;
    m->n_outputs = 1;
    return SY_OK;
}

/* ---- the C API ------------------------------------------------------------------- */

sy_status sy_model_new_functional(const char *name, sy_model **out) {
    sy_status st = sy_model_new(name && *name ? name : "model", out);
    if (!st) (*out)->functional = true;
    return st;
}

static sy_status check_functional(sy_model *m, const char *what) {
    if (!m->functional)
        return sy_error(SY_ERR_STATE, "%s: model '%s' is Sequential; make a Functional model with "
                        "sy_model_new_functional", what, m->name);
    if (m->n_outputs > 0)
        return sy_error(SY_ERR_STATE, "%s: model '%s' is finished (its outputs are set)", what, m->name);
    return SY_OK;
}

sy_status sy_model_input(sy_model *m, sy_shape shape, const char *name, const char *dtype, int32_t *out) {
    *out = -1;
    sy_status st = check_functional(m, "Input");
    if (st) return st;
    char buf[SY_SHAPE_STR_MAX];
    if (shape.rank < 1 || shape.rank >= SY_MAX_RANK)
        return sy_error(SY_ERR_SHAPE, "Input: shape %s must have 1 to %d dimensions (without the batch axis)",
                        sy_shape_format(&shape, buf, sizeof buf), SY_MAX_RANK - 1);
    for (int i = 0; i < shape.rank; i++)
        if (shape.dims[i] <= 0)
            return sy_error(SY_ERR_SHAPE, "Input: shape %s must have positive dimensions (systolic compiles static "
                            "shapes)", sy_shape_format(&shape, buf, sizeof buf));
    if (m->n_inputs >= MODEL_MAX_IO)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "Input: model '%s' has %d inputs already, the most it can have",
                        m->name, MODEL_MAX_IO);
    static const char *const dtypes[] = {"float32", "int32", "int64", "uint8", "float16", "float64"};
    bool known = !dtype;
    for (size_t i = 0; dtype && i < sizeof dtypes / sizeof dtypes[0]; i++) known |= strcmp(dtype, dtypes[i]) == 0;
    if (!known)
        return sy_error(SY_ERR_UNSUPPORTED, "Input: dtype '%s' is not supported (float32, int32, int64, uint8, "
                        "float16, float64)", dtype);
    model_input *in = &m->inputs[m->n_inputs];
    memset(in, 0, sizeof *in);
    if (name && *name) {
        if (strlen(name) >= LAYER_NAME_MAX)
            return sy_error(SY_ERR_INVALID_ARGUMENT, "Input: name '%s': names are at most %d characters",
                            name, LAYER_NAME_MAX - 1);
        snprintf(in->name, sizeof in->name, "%s", name);
    } else {
        /* Keras counts input_1, input_2, ... per session; here per model */
        for (int k = m->n_inputs + 1;; k++) {
            snprintf(in->name, sizeof in->name, "input_%d", k);
            bool taken = false;
            for (int j = 0; j < m->n_inputs; j++) taken |= strcmp(m->inputs[j].name, in->name) == 0;
            if (!taken) break;
        }
    }
    if (dtype && strcmp(dtype, "float32") != 0) snprintf(in->dtype, sizeof in->dtype, "%s", dtype);
    in->shape = shape;
    if ((st = grow_nodes(m, 0))) return st;
    in->node = (int32_t)m->n_nodes;
    m->nodes[m->n_nodes++] = (model_node){.layer = -1, .input = m->n_inputs, .shape = shape};
    if (m->n_inputs++ == 0) {
        m->input_shape = shape;
        m->built = true;
    }
    *out = in->node;
    return SY_OK;
}

sy_status sy_model_call(sy_model *m, const sy_layer *layer, const int32_t *inputs, int n, int32_t *out) {
    *out = -1;
    sy_status st = check_functional(m, "call");
    if (st) return st;
    int32_t index;
    if ((st = model_new_layer(m, layer, &index))) return st;
    if ((st = model_call(m, index, inputs, n, out))) m->n_layers--; /* as it was: the layer never existed */
    return st;
}

sy_status sy_model_call_again(sy_model *m, const char *layer_name, const int32_t *inputs, int n, int32_t *out) {
    *out = -1;
    sy_status st = check_functional(m, "call");
    if (st) return st;
    for (int64_t i = 0; layer_name && i < m->n_layers; i++)
        if (strcmp(m->layers[i].name, layer_name) == 0) return model_call(m, (int32_t)i, inputs, n, out);
    return sy_error(SY_ERR_NOT_FOUND, "call: model '%s' has no layer named '%s'", m->name,
                    layer_name ? layer_name : "(null)");
}

/* ---- finishing: Keras's _map_graph_network ------------------------------------------- */

typedef struct walk {
    const sy_model *m;
    uint8_t *state;       /* per node: 0 new, 1 in progress, 2 finished */
    int32_t *layer_index; /* per layer: order first met, -1 none; inputs after layers */
    int32_t n_met;
    int32_t *finished;    /* nodes in the order they finished (Keras's nodes_in_decreasing_depth reversed... as built) */
    int32_t n_finished;
} walk;

/* The key of a node's layer in the walk's tables: layers, then inputs. */
static int32_t slot_of(const sy_model *m, const model_node *n) {
    return n->layer >= 0 ? n->layer : (int32_t)m->n_layers + n->input;
}

static void walk_node(walk *w, int32_t id) {
    const sy_model *m = w->m;
    if (w->state[id] == 2) return;
    const model_node *n = &m->nodes[id];
    int32_t slot = slot_of(m, n);
    if (w->layer_index[slot] < 0) w->layer_index[slot] = w->n_met++;
    w->state[id] = 1;
    for (int i = 0; i < n->n_in; i++) walk_node(w, m->edges[n->in_off + i]);
    w->state[id] = 2;
    w->finished[w->n_finished++] = id;
}

static char *node_label(const sy_model *m, int32_t id, char *buf, size_t size) {
    const model_node *n = &m->nodes[id];
    snprintf(buf, size, "%s", n->layer >= 0 ? m->layers[n->layer].name : m->inputs[n->input].name);
    return buf;
}

sy_status functional_finish(sy_model *m) {
    int64_t slots = m->n_layers + m->n_inputs;
    walk w = {.m = m};
    w.state = sy_calloc((size_t)m->n_nodes + 1, 1);
    w.layer_index = sy_calloc((size_t)slots + 1, sizeof *w.layer_index);
    w.finished = sy_calloc((size_t)m->n_nodes + 1, sizeof *w.finished);
    int32_t *node_depth = sy_calloc((size_t)m->n_nodes + 1, sizeof *node_depth);
    int32_t *slot_depth = sy_calloc((size_t)slots + 1, sizeof *slot_depth);
    int32_t *order = sy_calloc((size_t)slots + 1, sizeof *order);
    bool *seen_depth = sy_calloc((size_t)slots + 1, sizeof *seen_depth);
    sy_status st = SY_OK;
    if (!w.state || !w.layer_index || !w.finished || !node_depth || !slot_depth || !order || !seen_depth) {
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "model '%s': out of memory", m->name);
        goto done;
    }
    for (int64_t i = 0; i < slots; i++) w.layer_index[i] = -1;
    for (int i = 0; i < m->n_outputs; i++) walk_node(&w, m->outputs[i]);
    /* depths: from the outputs back, each node at least one deeper than
     * what it feeds, and a layer as deep as its deepest node */
    for (int32_t k = w.n_finished - 1; k >= 0; k--) {
        int32_t id = w.finished[k];
        const model_node *n = &m->nodes[id];
        int32_t slot = slot_of(m, n), depth = node_depth[id];
        if (seen_depth[slot] && slot_depth[slot] > depth) depth = slot_depth[slot];
        slot_depth[slot] = depth;
        seen_depth[slot] = true;
        node_depth[id] = depth;
        for (int i = 0; i < n->n_in; i++) {
            int32_t dep = m->edges[n->in_off + i];
            if (node_depth[dep] < depth + 1) node_depth[dep] = depth + 1;
        }
    }
    /* inputs the outputs do not need: depth 0, first among equals */
    for (int i = 0; i < m->n_inputs; i++) {
        int32_t slot = (int32_t)m->n_layers + i;
        if (!seen_depth[slot]) seen_depth[slot] = true, slot_depth[slot] = 0, w.layer_index[slot] = -1;
    }
    /* a layer none of the outputs needs is not part of the model (Keras
     * drops it too); its weights would be orphans, so it is refused */
    for (int64_t i = 0; i < m->n_layers; i++)
        if (!seen_depth[i]) {
            st = sy_error(SY_ERR_INVALID_ARGUMENT, "model '%s': layer '%s' does not lead to any output", m->name,
                          m->layers[i].name);
            goto done;
        }
    /* Graph disconnected: a tensor no input of the model leads to */
    for (int32_t k = 0; k < w.n_finished; k++) {
        const model_node *n = &m->nodes[w.finished[k]];
        if (n->layer >= 0 || n->n_in) continue;
        bool is_model_input = false;
        for (int i = 0; i < m->n_inputs; i++) is_model_input |= m->inputs[i].node == w.finished[k];
        if (!is_model_input) {
            char a[LAYER_NAME_MAX];
            st = sy_error(SY_ERR_INVALID_ARGUMENT, "model '%s': graph disconnected: cannot obtain the value of "
                          "input '%s', which is not one of the model's inputs", m->name,
                          node_label(m, w.finished[k], a, sizeof a));
            goto done;
        }
    }
    /* Keras's order: by decreasing depth, then by the walk's order */
    int32_t n_order = 0;
    int32_t max_depth = 0;
    for (int64_t s = 0; s < slots; s++)
        if (slot_depth[s] > max_depth) max_depth = slot_depth[s];
    for (int32_t d = max_depth; d >= 0; d--) {
        int32_t first = n_order;
        for (int64_t s = 0; s < slots; s++)
            if (slot_depth[s] == d) order[n_order++] = (int32_t)s;
        for (int32_t a = first + 1; a < n_order; a++) /* insertion sort by layer_index (stable) */
            for (int32_t b = a; b > first && w.layer_index[order[b - 1]] > w.layer_index[order[b]]; b--) {
                int32_t t = order[b];
                order[b] = order[b - 1];
                order[b - 1] = t;
            }
    }
    /* unique names, InputLayers included */
    for (int32_t a = 0; a < n_order; a++)
        for (int32_t b = a + 1; b < n_order; b++) {
            const char *na = order[a] < m->n_layers ? m->layers[order[a]].name : m->inputs[order[a] - m->n_layers].name;
            const char *nb = order[b] < m->n_layers ? m->layers[order[b]].name : m->inputs[order[b] - m->n_layers].name;
            if (strcmp(na, nb) == 0) {
                st = sy_error(SY_ERR_INVALID_ARGUMENT, "model '%s': the name \"%s\" is used 2 times in the model; "
                              "all layer names should be unique", m->name, na);
                goto done;
            }
        }
    /* store the layers in that order, renumbering the nodes' layers */
    model_layer *sorted = sy_calloc((size_t)m->n_layers + 1, sizeof *sorted);
    int32_t *renum = sy_calloc((size_t)m->n_layers + 1, sizeof *renum);
    int32_t *final_order = sy_calloc((size_t)n_order + 1, sizeof *final_order);
    if (!sorted || !renum || !final_order) {
        sy_free(sorted), sy_free(renum), sy_free(final_order);
        st = sy_error(SY_ERR_OUT_OF_MEMORY, "model '%s': out of memory", m->name);
        goto done;
    }
    int32_t next = 0;
    for (int32_t k = 0; k < n_order; k++) {
        if (order[k] < m->n_layers) {
            renum[order[k]] = next;
            sorted[next] = m->layers[order[k]];
            final_order[k] = next++;
        } else {
            final_order[k] = -1 - (order[k] - (int32_t)m->n_layers);
        }
    }
    memcpy(m->layers, sorted, (size_t)m->n_layers * sizeof *sorted);
    for (int64_t i = 0; i < m->n_layers; i++) m->layers[i].cfg.name = m->layers[i].name;
    for (int64_t i = 0; i < m->n_nodes; i++)
        if (m->nodes[i].layer >= 0) m->nodes[i].layer = renum[m->nodes[i].layer];
    sy_free(sorted);
    sy_free(renum);
    sy_free(m->order);
    m->order = final_order;
    m->n_order = n_order;
done:
    sy_free(w.state), sy_free(w.layer_index), sy_free(w.finished);
    sy_free(node_depth), sy_free(slot_depth), sy_free(order), sy_free(seen_depth);
    return st;
}

sy_status sy_model_set_outputs(sy_model *m, const int32_t *outputs, int n) {
    sy_status st = check_functional(m, "Model");
    if (st) return st;
    if (n < 1 || n > MODEL_MAX_IO || !outputs)
        return sy_error(SY_ERR_INVALID_ARGUMENT, "Model: %d outputs given; a model has 1 to %d", n, MODEL_MAX_IO);
    if (m->n_inputs == 0) return sy_error(SY_ERR_INVALID_ARGUMENT, "Model: model '%s' has no inputs", m->name);
    for (int i = 0; i < n; i++)
        if (outputs[i] < 0 || outputs[i] >= m->n_nodes)
            return sy_error(SY_ERR_INVALID_ARGUMENT, "Model: output %d is %d, not a tensor of model '%s'", i,
                            outputs[i], m->name);
    memcpy(m->outputs, outputs, (size_t)n * sizeof *outputs);
    m->n_outputs = n;
    if ((st = functional_finish(m))) m->n_outputs = 0;
    return st;
}

int32_t sy_model_input_count(const sy_model *m) { return m->n_inputs; }
int32_t sy_model_output_count(const sy_model *m) { return m->n_outputs; }

/* ---- summary ------------------------------------------------------------------------- */

bool functional_sequential_like(const sy_model *m) {
    if (!m->functional) return true;
    if (m->n_inputs != 1 || m->n_outputs != 1) return false;
    for (int64_t i = 0; i < m->n_nodes; i++) {
        const model_node *n = &m->nodes[i];
        if (n->n_in > 1 || (n->layer >= 0 && m->layers[n->layer].calls > 1)) return false;
    }
    /* a chain: every node but the output feeds exactly one other */
    for (int64_t i = 0; i < m->n_nodes; i++) {
        int uses = 0;
        for (int64_t e = 0; e < m->n_edges; e++) uses += m->edges[e] == i;
        if (uses != (i == m->outputs[0] ? 0 : 1)) return false;
    }
    return true;
}
