/*
 * sequence_layers.h - what the sequence layers' files share (issue 17):
 * the 1D layers run as their 2D counterparts on a (batch, 1, steps,
 * channels) view of a (batch, steps, channels) tensor, which a reshape
 * gives for nothing, and Keras writes their sizes as one-element lists
 * ("kernel_size": [3]).
 */
#ifndef SY_KERAS_SEQUENCE_LAYERS_H
#define SY_KERAS_SEQUENCE_LAYERS_H

#include "../keras_config.h"

/* A 1D size argument: n or [n], positive; absent: def (or an error when required). */
sy_status rd_single(const rd *r, const char *key, bool required, int32_t def, int32_t *out);
/* [n], as Keras writes a 1D size. */
void jw_single(jw *w, int32_t n);
/* "(None, steps, channels)" refused unless in has rank 2. */
sy_status seq_check_rank2(const char *name, const char *cls, const sy_shape *in);
/* x (B, T, C) seen as (B, 1, T, C), and back. */
sy_node seq_as_2d(sy_graph *g, sy_node x);
sy_node seq_from_2d(sy_graph *g, sy_node x);

#endif
