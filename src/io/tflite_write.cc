/*
 * tflite_write.cc - the C++ half of the TFLite writer (issue 18): the plain
 * C model of tflite.h (an io_tflite, as the reader fills it or as the
 * quantizer builds it) encoded as a TFLite flatbuffer with flatbuffers'
 * FlatBufferBuilder and the Create* helpers flatc generates from
 * TensorFlow's schema (src/io/tflite/schema.fbs) -- never by hand. It is
 * the reader's inverse: io_tflite_decode(io_tflite_encode(m)) gives m back,
 * field for field (tests/test_tflite_write.c checks it on the converter's
 * own files).
 *
 * The layout follows what TensorFlow 2.15's converter writes, so that
 * tf.lite.Interpreter and other tools see a familiar file: buffer 0 empty,
 * then one buffer per tensor (empty for activations), constant data 16-byte
 * aligned; operator codes with both builtin_code and deprecated_builtin_code
 * (127, PLACEHOLDER_FOR_GREATER_OP_CODES, past 127); each builtin's options
 * table from io_tflite_op's fields; a "serving_default" SignatureDef naming
 * the inputs and outputs (what get_signature_runner wants) and the
 * "min_runtime_version" metadata entry, when the caller gives names.
 *
 * flatbuffers' builder grows with operator new; under -fno-exceptions an
 * allocation that fails ends the process, as any std::vector's would. The
 * sizes here are a model's (megabytes), far from that.
 */
#include "tflite.h"

#include "tflite_schema_generated.h"

#include <cstdio>
#include <cstring>
#include <vector>

extern "C" void *sy_malloc(size_t size);

namespace {

/* A refusal's message in err; -1. (A macro, not tflite_fb.cc's varargs function again.) */
#define refuse(err, n, ...) (snprintf((err), (n), __VA_ARGS__), -1)

using flatbuffers::FlatBufferBuilder;
using flatbuffers::Offset;

tflite::ActivationFunctionType act(int32_t a) { return static_cast<tflite::ActivationFunctionType>(a); }
tflite::Padding pad(int32_t p) { return static_cast<tflite::Padding>(p); }

/* The options table of op o, as the reader reads it back (read_options in tflite_fb.cc), and its type. */
Offset<void> options(FlatBufferBuilder &b, const io_tflite_op *o, tflite::BuiltinOptions *type) {
    *type = tflite::BuiltinOptions_NONE;
    switch (o->builtin) {
    case tflite::BuiltinOperator_CONV_2D:
        *type = tflite::BuiltinOptions_Conv2DOptions;
        return tflite::CreateConv2DOptions(b, pad(o->padding), o->stride_w, o->stride_h, act(o->activation),
                                           o->dilation_w, o->dilation_h)
            .Union();
    case tflite::BuiltinOperator_DEPTHWISE_CONV_2D:
        *type = tflite::BuiltinOptions_DepthwiseConv2DOptions;
        return tflite::CreateDepthwiseConv2DOptions(b, pad(o->padding), o->stride_w, o->stride_h, o->depth_multiplier,
                                                    act(o->activation), o->dilation_w, o->dilation_h)
            .Union();
    case tflite::BuiltinOperator_AVERAGE_POOL_2D:
    case tflite::BuiltinOperator_MAX_POOL_2D:
    case tflite::BuiltinOperator_L2_POOL_2D:
        *type = tflite::BuiltinOptions_Pool2DOptions;
        return tflite::CreatePool2DOptions(b, pad(o->padding), o->stride_w, o->stride_h, o->filter_w, o->filter_h,
                                           act(o->activation))
            .Union();
    case tflite::BuiltinOperator_FULLY_CONNECTED:
        *type = tflite::BuiltinOptions_FullyConnectedOptions;
        return tflite::CreateFullyConnectedOptions(
                   b, act(o->activation), static_cast<tflite::FullyConnectedOptionsWeightsFormat>(o->weights_format),
                   o->keep_dims != 0, o->asymmetric_quantize_inputs != 0)
            .Union();
    case tflite::BuiltinOperator_UNIDIRECTIONAL_SEQUENCE_LSTM:
        *type = tflite::BuiltinOptions_UnidirectionalSequenceLSTMOptions;
        return tflite::CreateUnidirectionalSequenceLSTMOptions(b, act(o->activation), o->cell_clip, o->proj_clip,
                                                                o->time_major != 0, o->asymmetric_quantize_inputs != 0)
            .Union();
    case tflite::BuiltinOperator_GATHER:
        *type = tflite::BuiltinOptions_GatherOptions;
        return tflite::CreateGatherOptions(b, o->axis, o->batch_dims).Union();
    case tflite::BuiltinOperator_STRIDED_SLICE:
        *type = tflite::BuiltinOptions_StridedSliceOptions;
        return tflite::CreateStridedSliceOptions(b, o->begin_mask, o->end_mask, o->ellipsis_mask, o->new_axis_mask,
                                                 o->shrink_axis_mask, o->offset != 0)
            .Union();
    case tflite::BuiltinOperator_ADD:
        *type = tflite::BuiltinOptions_AddOptions;
        return tflite::CreateAddOptions(b, act(o->activation)).Union();
    case tflite::BuiltinOperator_MEAN:
    case tflite::BuiltinOperator_SUM:
    case tflite::BuiltinOperator_REDUCE_MAX:
    case tflite::BuiltinOperator_REDUCE_MIN:
    case tflite::BuiltinOperator_REDUCE_PROD:
        *type = tflite::BuiltinOptions_ReducerOptions;
        return tflite::CreateReducerOptions(b, o->keep_dims != 0).Union();
    case tflite::BuiltinOperator_SOFTMAX:
        *type = tflite::BuiltinOptions_SoftmaxOptions;
        return tflite::CreateSoftmaxOptions(b, o->beta).Union();
    case tflite::BuiltinOperator_PAD:
        *type = tflite::BuiltinOptions_PadOptions;
        return tflite::CreatePadOptions(b).Union();
    default: return 0;
    }
}

int check_indices(const int32_t *v, int32_t count, int32_t n_tensors, bool optional, const char *where, char *err,
                  size_t n) {
    for (int32_t i = 0; i < count; i++)
        if (v[i] >= n_tensors || v[i] < (optional ? -1 : 0))
            return refuse(err, n, "%s names tensor %d; the model has %d", where, v[i], n_tensors);
    return 0;
}

/* TensorFlow pads min_runtime_version to 16 bytes, so that a later rewrite of the version fits in place. */
const char k_min_runtime[16] = "1.14.0";

} // namespace

extern "C" int io_tflite_encode(const io_tflite *m, const io_tflite_write_options *wo, uint8_t **out, size_t *size,
                                char *err, size_t n) {
    *out = nullptr;
    *size = 0;
    /* what the reader would refuse is refused here, before a byte is built */
    for (int32_t i = 0; i < m->n_tensors; i++) {
        const io_tflite_tensor *t = &m->tensors[i];
        if (t->rank < 0 || t->rank > IO_TFLITE_MAX_RANK)
            return refuse(err, n, "tensor %d '%s' has rank %d", i, t->name ? t->name : "", t->rank);
        if (t->quant_count > 1 && (t->quant_dim < 0 || t->quant_dim >= t->rank || t->shape[t->quant_dim] != t->quant_count))
            return refuse(err, n, "tensor %d '%s' has %d per-channel scales along dimension %d", i, t->name ? t->name : "",
                        t->quant_count, t->quant_dim);
        if (t->data && t->data_size % (io_tflite_type_size(t->type) ? io_tflite_type_size(t->type) : 1))
            return refuse(err, n, "tensor %d '%s': %zu bytes of data are no whole number of %s", i, t->name ? t->name : "",
                        t->data_size, io_tflite_type_name(t->type));
    }
    if (check_indices(m->inputs, m->n_inputs, m->n_tensors, false, "the subgraph's inputs", err, n) ||
        check_indices(m->outputs, m->n_outputs, m->n_tensors, false, "the subgraph's outputs", err, n))
        return -1;
    for (int32_t i = 0; i < m->n_ops; i++) {
        char where[48];
        snprintf(where, sizeof where, "operator %d", i);
        if (check_indices(m->ops[i].inputs, m->ops[i].n_inputs, m->n_tensors, true, where, err, n) ||
            check_indices(m->ops[i].outputs, m->ops[i].n_outputs, m->n_tensors, false, where, err, n))
            return -1;
    }

    FlatBufferBuilder b(1024);
    /* buffers: 0 empty (TFLite's convention), then tensor i's in buffer i + 1 */
    std::vector<Offset<tflite::Buffer>> buffers;
    buffers.push_back(tflite::CreateBuffer(b));
    for (int32_t i = 0; i < m->n_tensors; i++) {
        const io_tflite_tensor *t = &m->tensors[i];
        if (t->data && t->data_size) {
            b.ForceVectorAlignment(t->data_size, 1, 16); /* as TFLite's converter: SIMD loads straight from the file */
            buffers.push_back(tflite::CreateBuffer(b, b.CreateVector(t->data, t->data_size)));
        } else {
            buffers.push_back(tflite::CreateBuffer(b));
        }
    }
    bool meta = wo && wo->min_runtime_version;
    uint32_t meta_buffer = static_cast<uint32_t>(buffers.size());
    if (meta)
        buffers.push_back(tflite::CreateBuffer(
            b, b.CreateVector(reinterpret_cast<const uint8_t *>(k_min_runtime), sizeof k_min_runtime)));

    std::vector<Offset<tflite::Tensor>> tensors;
    for (int32_t i = 0; i < m->n_tensors; i++) {
        const io_tflite_tensor *t = &m->tensors[i];
        auto shape = b.CreateVector(t->shape, static_cast<size_t>(t->rank));
        Offset<flatbuffers::Vector<int32_t>> signature = 0;
        if (wo && wo->dynamic_batch && !t->data && t->rank > 0) { /* the batch axis any size, as the converter's -1 */
            int32_t s[IO_TFLITE_MAX_RANK];
            memcpy(s, t->shape, sizeof s);
            s[0] = -1;
            signature = b.CreateVector(s, static_cast<size_t>(t->rank));
        }
        Offset<tflite::QuantizationParameters> q = 0;
        if (t->quant_count > 0) {
            auto scale = b.CreateVector(t->scale, static_cast<size_t>(t->quant_count));
            auto zp = b.CreateVector(t->zero_point, static_cast<size_t>(t->quant_count));
            q = tflite::CreateQuantizationParameters(b, 0, 0, scale, zp, tflite::QuantizationDetails_NONE, 0,
                                                     t->quant_dim);
        }
        auto name = b.CreateString(t->name ? t->name : "");
        uint32_t buf = static_cast<uint32_t>(i + 1);
        tensors.push_back(tflite::CreateTensor(b, shape, static_cast<tflite::TensorType>(t->type), buf, name, q,
                                               t->is_variable != 0, 0, signature));
    }

    /* operator codes: one per distinct (builtin, custom code, version), in order of first use */
    std::vector<Offset<tflite::OperatorCode>> codes;
    std::vector<int32_t> code_of(static_cast<size_t>(m->n_ops));
    std::vector<const io_tflite_op *> firsts;
    for (int32_t i = 0; i < m->n_ops; i++) {
        const io_tflite_op *o = &m->ops[i];
        int32_t k = 0;
        for (; k < static_cast<int32_t>(firsts.size()); k++) {
            const io_tflite_op *f = firsts[static_cast<size_t>(k)];
            if (f->builtin == o->builtin && f->version == o->version &&
                !strcmp(f->custom_code ? f->custom_code : "", o->custom_code ? o->custom_code : ""))
                break;
        }
        code_of[static_cast<size_t>(i)] = k;
        if (k < static_cast<int32_t>(firsts.size())) continue;
        firsts.push_back(o);
        int32_t code = o->builtin < 0 ? tflite::BuiltinOperator_CUSTOM : o->builtin;
        auto custom = o->custom_code ? b.CreateString(o->custom_code) : 0;
        /* TF 2.15: the int8 field holds the code up to 127, PLACEHOLDER_FOR_GREATER_OP_CODES (127) past it */
        int8_t deprecated = static_cast<int8_t>(code < 127 ? code : 127);
        codes.push_back(tflite::CreateOperatorCode(b, deprecated, custom, o->version ? o->version : 1,
                                                   static_cast<tflite::BuiltinOperator>(code)));
    }
    std::vector<Offset<tflite::Operator>> ops;
    for (int32_t i = 0; i < m->n_ops; i++) {
        const io_tflite_op *o = &m->ops[i];
        auto in = b.CreateVector(o->inputs, static_cast<size_t>(o->n_inputs));
        auto outs = b.CreateVector(o->outputs, static_cast<size_t>(o->n_outputs));
        tflite::BuiltinOptions type;
        auto opt = options(b, o, &type);
        ops.push_back(tflite::CreateOperator(b, static_cast<uint32_t>(code_of[static_cast<size_t>(i)]), in, outs, type,
                                             opt));
    }
    auto sg = tflite::CreateSubGraph(b, b.CreateVector(tensors),
                                     b.CreateVector(m->inputs, static_cast<size_t>(m->n_inputs)),
                                     b.CreateVector(m->outputs, static_cast<size_t>(m->n_outputs)), b.CreateVector(ops),
                                     b.CreateString("main"));

    Offset<flatbuffers::Vector<Offset<tflite::SignatureDef>>> sigs = 0;
    if (wo && wo->input_names && wo->output_names) {
        std::vector<Offset<tflite::TensorMap>> ins, outs;
        for (int32_t i = 0; i < m->n_inputs; i++)
            ins.push_back(tflite::CreateTensorMap(b, b.CreateString(wo->input_names[i]),
                                                  static_cast<uint32_t>(m->inputs[i])));
        for (int32_t i = 0; i < m->n_outputs; i++)
            outs.push_back(tflite::CreateTensorMap(b, b.CreateString(wo->output_names[i]),
                                                   static_cast<uint32_t>(m->outputs[i])));
        std::vector<Offset<tflite::SignatureDef>> defs;
        defs.push_back(tflite::CreateSignatureDef(b, b.CreateVector(ins), b.CreateVector(outs),
                                                  b.CreateString("serving_default"), 0));
        sigs = b.CreateVector(defs);
    }
    Offset<flatbuffers::Vector<Offset<tflite::Metadata>>> metadata = 0;
    if (meta) {
        std::vector<Offset<tflite::Metadata>> md;
        md.push_back(tflite::CreateMetadata(b, b.CreateString("min_runtime_version"), meta_buffer));
        metadata = b.CreateVector(md);
    }
    auto desc = b.CreateString(wo && wo->description ? wo->description : "systolic");
    auto model = tflite::CreateModel(b, 3, b.CreateVector(codes), b.CreateVector(&sg, 1), desc, b.CreateVector(buffers), 0,
                                     metadata, sigs);
    tflite::FinishModelBuffer(b, model);

    size_t len = b.GetSize();
    uint8_t *copy = static_cast<uint8_t *>(sy_malloc(len ? len : 1));
    if (!copy) return refuse(err, n, "out of memory");
    memcpy(copy, b.GetBufferPointer(), len);
    *out = copy;
    *size = len;
    return 0;
}
