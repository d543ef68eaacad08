/*
 * tflite_fb.cc - the C++ half of the TFLite reader: the only code in
 * systolic that touches flatbuffers. It runs flatbuffers' Verifier over
 * the whole file (TensorFlow's schema, src/io/tflite/schema.fbs, compiled
 * by flatc at build time into tflite_schema_generated.h) before reading a
 * single field, then copies the first subgraph into the plain C structs of
 * tflite.h, checking what the schema cannot say: every tensor, buffer and
 * operator-code index in range, shapes non-negative and their sizes
 * representable, a constant's bytes exactly its shape's.
 *
 * The Verifier answers yes or no. To say where a file is damaged, a failed
 * verification is followed by a walk (diagnose) that verifies the model's
 * parts one by one in the order the Verifier does -- the root table, then
 * each vector and each table in it -- and names the first part that fails
 * with its byte offset: "subgraph 0, tensor 12 (table at byte 4424)".
 * Each step there only reads what the steps before it verified.
 *
 * Nothing here throws: flatbuffers' read accessors do not, and every
 * allocation goes through sy_malloc, whose NULL is checked.
 */
#include "tflite.h"

#include "tflite_schema_generated.h"

#include <cstdarg>
#include <cstdio>
#include <cstring>

extern "C" void *sy_malloc(size_t size);
extern "C" void *sy_calloc(size_t count, size_t size);

namespace {

int fail(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int fail(char *err, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
    return -1;
}

char *copy_string(const flatbuffers::String *s) {
    size_t n = s ? s->size() : 0;
    char *c = static_cast<char *>(sy_malloc(n + 1));
    if (!c) return nullptr;
    if (n) memcpy(c, s->data(), n);
    c[n] = 0;
    return c;
}

long offset_of(const io_tflite *m, const void *p) {
    return static_cast<long>(static_cast<const uint8_t *>(p) - m->bytes);
}

/* Which part of a file that failed verification is damaged: the first one,
 * in the Verifier's own order, that fails on its own. */
/* The generated tables inherit flatbuffers::Table privately; the walk needs its checks. */
template <typename T> const flatbuffers::Table *table(const T *t) {
    return reinterpret_cast<const flatbuffers::Table *>(t);
}

/* Whether element i of a verified vector of tables points inside the file: checked before the element's
 * address is formed, so that a wild offset never makes a pointer past the buffer. */
template <typename T>
bool slot_in_file(const io_tflite *m, const flatbuffers::Vector<flatbuffers::Offset<T>> *vec,
                  flatbuffers::uoffset_t i, long *at) {
    const uint8_t *slot = reinterpret_cast<const uint8_t *>(vec->Data()) + i * sizeof(flatbuffers::uoffset_t);
    *at = offset_of(m, slot);
    return static_cast<size_t>(*at) + flatbuffers::ReadScalar<flatbuffers::uoffset_t>(slot) < m->size;
}

template <typename T>
int check_tables(const io_tflite *m, flatbuffers::Verifier &v,
                 const flatbuffers::Vector<flatbuffers::Offset<T>> *vec, const char *what,
                 const char *where, char *err, size_t n) {
    if (!vec) return 0;
    for (flatbuffers::uoffset_t i = 0; i < vec->size(); i++) {
        long at;
        if (!slot_in_file(m, vec, i, &at))
            return fail(err, n, "%s%s %u: its offset at byte %ld points past the end of the file (%zu bytes)", where,
                        what, i, at, m->size);
        const T *t = vec->Get(i);
        if (!t->Verify(v))
            return fail(err, n, "%s%s %u (table at byte %ld) is damaged: an offset, length or field out of bounds",
                        where, what, i, offset_of(m, t));
    }
    return 0;
}

int diagnose(const io_tflite *m, char *err, size_t n) {
    const uint8_t *b = m->bytes;
    flatbuffers::uoffset_t root = flatbuffers::ReadScalar<flatbuffers::uoffset_t>(b);
    if (root >= m->size || root < 8)
        return fail(err, n, "the root table offset at byte 0 (%u) points outside the file (%zu bytes)", root, m->size);
    flatbuffers::Verifier v(b, m->size);
    const tflite::Model *model = tflite::GetModel(b);
    /* The root table alone: its vtable and its scalar fields. */
    {
        flatbuffers::Verifier v0(b, m->size);
        if (!table(model)->VerifyTableStart(v0))
            return fail(err, n, "the model table at byte %u (or its vtable) lies outside the file (%zu bytes)", root,
                        m->size);
    }
    table(model)->VerifyTableStart(v);
    if (!table(model)->VerifyOffset(v, tflite::Model::VT_OPERATOR_CODES) || !v.VerifyVector(model->operator_codes()))
        return fail(err, n, "the model's operator-code vector (model table at byte %u) is out of bounds", root);
    if (check_tables(m, v, model->operator_codes(), "operator code", "", err, n)) return -1;
    if (!table(model)->VerifyOffset(v, tflite::Model::VT_SUBGRAPHS) || !v.VerifyVector(model->subgraphs()))
        return fail(err, n, "the model's subgraph vector (model table at byte %u) is out of bounds", root);
    if (const auto *sgs = model->subgraphs()) {
        for (flatbuffers::uoffset_t s = 0; s < sgs->size(); s++) {
            long at;
            if (!slot_in_file(m, sgs, s, &at))
                return fail(err, n, "subgraph %u: its offset at byte %ld points past the end of the file (%zu bytes)",
                            s, at, m->size);
            const tflite::SubGraph *sg = sgs->Get(s);
            char where[48];
            snprintf(where, sizeof where, "subgraph %u, ", s);
            flatbuffers::Verifier vs(b, m->size);
            if (!table(sg)->VerifyTableStart(vs))
                return fail(err, n, "subgraph %u (table at byte %ld) lies outside the file", s, offset_of(m, sg));
            if (!table(sg)->VerifyOffset(vs, tflite::SubGraph::VT_TENSORS) || !vs.VerifyVector(sg->tensors()))
                return fail(err, n, "subgraph %u's tensor vector is out of bounds", s);
            if (check_tables(m, vs, sg->tensors(), "tensor", where, err, n)) return -1;
            if (!table(sg)->VerifyOffset(vs, tflite::SubGraph::VT_OPERATORS) || !vs.VerifyVector(sg->operators()))
                return fail(err, n, "subgraph %u's operator vector is out of bounds", s);
            if (check_tables(m, vs, sg->operators(), "operator", where, err, n)) return -1;
            if (!sg->Verify(vs))
                return fail(err, n, "subgraph %u (table at byte %ld): its inputs, outputs or name are out of bounds", s,
                            offset_of(m, sg));
        }
    }
    if (!table(model)->VerifyOffset(v, tflite::Model::VT_BUFFERS) || !v.VerifyVector(model->buffers()))
        return fail(err, n, "the model's buffer vector (model table at byte %u) is out of bounds", root);
    if (check_tables(m, v, model->buffers(), "buffer", "", err, n)) return -1;
    return fail(err, n, "the model's description, metadata or signatures (model table at byte %u) are out of bounds",
                root);
}

int32_t builtin_of(const tflite::OperatorCode *c) {
    /* TFLite's GetBuiltinCode: codes past 127 live only in the newer int32 field */
    int32_t a = c->deprecated_builtin_code(), b = static_cast<int32_t>(c->builtin_code());
    return a > b ? a : b;
}

int read_quant(io_tflite_tensor *t, const tflite::QuantizationParameters *q, const char *where, char *err,
               size_t n) {
    if (!q || !q->scale() || q->scale()->size() == 0) return 0;
    const auto *scale = q->scale();
    const auto *zp = q->zero_point();
    uint32_t count = scale->size();
    if (!zp || zp->size() != count)
        return fail(err, n, "%s has %u quantization scales but %u zero points", where, count, zp ? zp->size() : 0);
    if (count > 1 && (q->quantized_dimension() < 0 || q->quantized_dimension() >= t->rank ||
                      static_cast<uint32_t>(t->shape[q->quantized_dimension()]) != count))
        return fail(err, n, "%s has %u per-channel scales along dimension %d of a rank-%d shape", where, count,
                    q->quantized_dimension(), t->rank);
    t->scale = static_cast<float *>(sy_malloc(count * sizeof(float)));
    t->zero_point = static_cast<int64_t *>(sy_malloc(count * sizeof(int64_t)));
    if (!t->scale || !t->zero_point) return fail(err, n, "out of memory");
    for (uint32_t i = 0; i < count; i++) {
        t->scale[i] = scale->Get(i);
        /* the Verifier checks a vector's length word for 4-byte alignment only: a damaged file can put the int64
         * zero points at 4 mod 8, where Get's load is undefined (UBSan, fuzz_tflite); bytes, then the value */
        int64_t z;
        memcpy(&z, zp->Data() + static_cast<size_t>(i) * sizeof z, sizeof z);
        t->zero_point[i] = flatbuffers::EndianScalar(z);
    }
    t->quant_count = static_cast<int32_t>(count);
    t->quant_dim = q->quantized_dimension();
    return 0;
}

int read_tensor(io_tflite *m, const tflite::Model *model, const tflite::Tensor *ft, int32_t i, char *err,
                size_t n) {
    io_tflite_tensor *t = &m->tensors[i];
    t->name = copy_string(ft->name());
    if (!t->name) return fail(err, n, "out of memory");
    char where[160];
    snprintf(where, sizeof where, "tensor %d '%.100s'", i, t->name);
    t->type = static_cast<int32_t>(ft->type());
    t->is_variable = ft->is_variable();
    const auto *shape = ft->shape();
    t->rank = shape ? static_cast<int32_t>(shape->size()) : 0;
    if (t->rank > IO_TFLITE_MAX_RANK)
        return fail(err, n, "%s has rank %d; at most %d is read", where, t->rank, IO_TFLITE_MAX_RANK);
    uint64_t count = 1;
    for (int32_t d = 0; d < t->rank; d++) {
        t->shape[d] = shape->Get(static_cast<flatbuffers::uoffset_t>(d));
        if (t->shape[d] < 0) return fail(err, n, "%s has dimension %d of %d", where, d, t->shape[d]);
        count *= static_cast<uint64_t>(t->shape[d]);
        if (count > (uint64_t)1 << 40) return fail(err, n, "%s has more than 2^40 elements", where);
    }
    if (read_quant(t, ft->quantization(), where, err, n)) return -1;
    const auto *buffers = model->buffers();
    uint32_t bi = ft->buffer();
    if (!buffers || bi >= buffers->size())
        return fail(err, n, "%s names buffer %u; the file has %u", where, bi, buffers ? buffers->size() : 0);
    const tflite::Buffer *buf = buffers->Get(bi);
    if (buf->offset() > 1)
        return fail(err, n, "%s keeps its data outside the flatbuffer (a model over 2 GB); not supported", where);
    const auto *data = buf->data();
    if (data && data->size() > 0) {
        size_t elem = io_tflite_type_size(t->type);
        if (elem == 0)
            return fail(err, n, "%s is a constant of type %s, which is not read", where, io_tflite_type_name(t->type));
        if (static_cast<uint64_t>(data->size()) != count * elem)
            return fail(err, n, "%s (%s, %llu elements) has %u bytes of data (buffer %u at byte %ld); its shape takes %llu",
                        where, io_tflite_type_name(t->type), static_cast<unsigned long long>(count), data->size(), bi,
                        offset_of(m, data->data()), static_cast<unsigned long long>(count * elem));
        t->data = data->data();
        t->data_size = data->size();
    }
    return 0;
}

int copy_indices(const flatbuffers::Vector<int32_t> *v, int32_t **out, int32_t *count, int32_t n_tensors,
                 bool optional, const char *where, char *err, size_t n) {
    *count = v ? static_cast<int32_t>(v->size()) : 0;
    *out = static_cast<int32_t *>(sy_calloc(*count ? *count : 1, sizeof(int32_t)));
    if (!*out) return fail(err, n, "out of memory");
    for (int32_t i = 0; i < *count; i++) {
        int32_t x = v->Get(static_cast<flatbuffers::uoffset_t>(i));
        if (x >= n_tensors || x < (optional ? -1 : 0))
            return fail(err, n, "%s names tensor %d; the subgraph has %d", where, x, n_tensors);
        (*out)[i] = x;
    }
    return 0;
}

void read_options(io_tflite_op *o, const tflite::Operator *fo) {
    o->dilation_w = o->dilation_h = 1;
    o->stride_w = o->stride_h = 1;
    o->beta = 1.0f;
    if (const auto *c = fo->builtin_options_as_Conv2DOptions()) {
        o->padding = c->padding();
        o->stride_w = c->stride_w();
        o->stride_h = c->stride_h();
        o->dilation_w = c->dilation_w_factor();
        o->dilation_h = c->dilation_h_factor();
        o->activation = c->fused_activation_function();
    } else if (const auto *d = fo->builtin_options_as_DepthwiseConv2DOptions()) {
        o->padding = d->padding();
        o->stride_w = d->stride_w();
        o->stride_h = d->stride_h();
        o->depth_multiplier = d->depth_multiplier();
        o->dilation_w = d->dilation_w_factor();
        o->dilation_h = d->dilation_h_factor();
        o->activation = d->fused_activation_function();
    } else if (const auto *p = fo->builtin_options_as_Pool2DOptions()) {
        o->padding = p->padding();
        o->stride_w = p->stride_w();
        o->stride_h = p->stride_h();
        o->filter_w = p->filter_width();
        o->filter_h = p->filter_height();
        o->activation = p->fused_activation_function();
    } else if (const auto *f = fo->builtin_options_as_FullyConnectedOptions()) {
        o->activation = f->fused_activation_function();
        o->weights_format = f->weights_format();
        o->keep_dims = f->keep_num_dims();
        o->asymmetric_quantize_inputs = f->asymmetric_quantize_inputs();
    } else if (const auto *l = fo->builtin_options_as_UnidirectionalSequenceLSTMOptions()) {
        o->activation = l->fused_activation_function();
        o->cell_clip = l->cell_clip();
        o->proj_clip = l->proj_clip();
        o->time_major = l->time_major();
        o->asymmetric_quantize_inputs = l->asymmetric_quantize_inputs();
    } else if (const auto *g = fo->builtin_options_as_GatherOptions()) {
        o->axis = g->axis();
        o->batch_dims = g->batch_dims();
    } else if (const auto *ss = fo->builtin_options_as_StridedSliceOptions()) {
        o->begin_mask = ss->begin_mask();
        o->end_mask = ss->end_mask();
        o->ellipsis_mask = ss->ellipsis_mask();
        o->new_axis_mask = ss->new_axis_mask();
        o->shrink_axis_mask = ss->shrink_axis_mask();
        o->offset = ss->offset();
    } else if (const auto *a = fo->builtin_options_as_AddOptions()) {
        o->activation = a->fused_activation_function();
    } else if (const auto *r = fo->builtin_options_as_ReducerOptions()) {
        o->keep_dims = r->keep_dims();
    } else if (const auto *s = fo->builtin_options_as_SoftmaxOptions()) {
        o->beta = s->beta();
    }
}

} // namespace

extern "C" const char *io_tflite_op_name(int32_t builtin) {
    if (builtin < tflite::BuiltinOperator_MIN || builtin > tflite::BuiltinOperator_MAX) return nullptr;
    const char *s = tflite::EnumNameBuiltinOperator(static_cast<tflite::BuiltinOperator>(builtin));
    return s && *s ? s : nullptr;
}

extern "C" int io_tflite_decode(io_tflite *m, char *err, size_t n) {
    if (m->size < 8)
        return fail(err, n, "truncated: %zu bytes, shorter than a flatbuffer's 8-byte header", m->size);
    if (m->size >= FLATBUFFERS_MAX_BUFFER_SIZE)
        return fail(err, n, "%zu bytes: larger than a flatbuffer can be (2 GB)", m->size);
    if (!tflite::ModelBufferHasIdentifier(m->bytes))
        return fail(err, n, "not a TFLite model: bytes 4-7 are not the identifier \"TFL3\"");
    flatbuffers::Verifier v(m->bytes, m->size);
    if (!tflite::VerifyModelBuffer(v)) return diagnose(m, err, n);

    const tflite::Model *model = tflite::GetModel(m->bytes);
    m->version = model->version();
    const auto *sgs = model->subgraphs();
    m->n_subgraphs = sgs ? static_cast<int32_t>(sgs->size()) : 0;
    if (m->n_subgraphs == 0) return fail(err, n, "the model has no subgraph");
    const tflite::SubGraph *sg = sgs->Get(0);
    const auto *tensors = sg->tensors();
    m->n_tensors = tensors ? static_cast<int32_t>(tensors->size()) : 0;
    m->tensors = static_cast<io_tflite_tensor *>(sy_calloc(m->n_tensors ? m->n_tensors : 1, sizeof(io_tflite_tensor)));
    if (!m->tensors) return fail(err, n, "out of memory");
    for (int32_t i = 0; i < m->n_tensors; i++)
        if (read_tensor(m, model, tensors->Get(static_cast<flatbuffers::uoffset_t>(i)), i, err, n)) return -1;
    if (copy_indices(sg->inputs(), &m->inputs, &m->n_inputs, m->n_tensors, false, "the subgraph's inputs", err, n) ||
        copy_indices(sg->outputs(), &m->outputs, &m->n_outputs, m->n_tensors, false, "the subgraph's outputs", err, n))
        return -1;

    const auto *codes = model->operator_codes();
    const auto *ops = sg->operators();
    m->n_ops = ops ? static_cast<int32_t>(ops->size()) : 0;
    m->ops = static_cast<io_tflite_op *>(sy_calloc(m->n_ops ? m->n_ops : 1, sizeof(io_tflite_op)));
    if (!m->ops) return fail(err, n, "out of memory");
    for (int32_t i = 0; i < m->n_ops; i++) {
        const tflite::Operator *fo = ops->Get(static_cast<flatbuffers::uoffset_t>(i));
        io_tflite_op *o = &m->ops[i];
        char where[64];
        snprintf(where, sizeof where, "operator %d", i);
        if (!codes || fo->opcode_index() >= codes->size())
            return fail(err, n, "%s names operator code %u; the file has %u", where, fo->opcode_index(),
                        codes ? codes->size() : 0);
        const tflite::OperatorCode *code = codes->Get(fo->opcode_index());
        o->builtin = builtin_of(code);
        o->version = code->version();
        if (o->builtin == tflite::BuiltinOperator_CUSTOM) {
            o->custom_code = copy_string(code->custom_code());
            if (!o->custom_code) return fail(err, n, "out of memory");
        }
        if (copy_indices(fo->inputs(), &o->inputs, &o->n_inputs, m->n_tensors, true, where, err, n) ||
            copy_indices(fo->outputs(), &o->outputs, &o->n_outputs, m->n_tensors, false, where, err, n))
            return -1;
        read_options(o, fo);
    }
    return 0;
}
