/*
 * tflite.h - TensorFlow Lite model files (.tflite), read: the plain C view
 * of a verified TFLite flatbuffer that the rest of systolic sees. The
 * reader (tflite.c, over tflite_fb.cc) knows nothing of models: it gives
 * the first subgraph's tensors (shape, TFLite type, constant bytes,
 * quantization), its operators (builtin code, tensor indices, the options
 * of the builtins that have them) and its inputs and outputs, all copied
 * out of the flatbuffer. docs/design/tflite.md says how and why. The
 * writer (tflite_write.cc, issue 18) is its inverse: an io_tflite encoded
 * as a flatbuffer.
 *
 * This header is plain C with nothing of core_internal.h, so that the C++
 * half (tflite_fb.cc, the only code that touches flatbuffers) includes it
 * too.
 */
#ifndef SY_IO_TFLITE_H
#define SY_IO_TFLITE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* TFLite's TensorType values (schema.fbs), the ones the reader names. */
enum {
    IO_TFLITE_FLOAT32 = 0,
    IO_TFLITE_INT32 = 2,
    IO_TFLITE_UINT8 = 3,
    IO_TFLITE_INT64 = 4,
    IO_TFLITE_INT16 = 7,
    IO_TFLITE_INT8 = 9,
};

/* TFLite's BuiltinOperator codes (schema.fbs) that systolic reads or writes: one list for the reader's
 * users (lite_model.c, lite_hybrid.c, tpu1_tflite.c) and the writers (quantize.c, quantize_dynamic.c). */
enum {
    IO_TFLITE_OP_ADD = 0,
    IO_TFLITE_OP_AVERAGE_POOL_2D = 1,
    IO_TFLITE_OP_CONV_2D = 3,
    IO_TFLITE_OP_DEPTHWISE_CONV_2D = 4,
    IO_TFLITE_OP_DEQUANTIZE = 6,
    IO_TFLITE_OP_FULLY_CONNECTED = 9,
    IO_TFLITE_OP_LOGISTIC = 14,
    IO_TFLITE_OP_MAX_POOL_2D = 17,
    IO_TFLITE_OP_RELU = 19,
    IO_TFLITE_OP_RELU6 = 21,
    IO_TFLITE_OP_RESHAPE = 22,
    IO_TFLITE_OP_SOFTMAX = 25,
    IO_TFLITE_OP_TANH = 28,
    IO_TFLITE_OP_PAD = 34,
    IO_TFLITE_OP_GATHER = 36,
    IO_TFLITE_OP_MEAN = 40,
    IO_TFLITE_OP_UNIDIRECTIONAL_SEQUENCE_LSTM = 44,
    IO_TFLITE_OP_STRIDED_SLICE = 45,
    IO_TFLITE_OP_CAST = 53,
    IO_TFLITE_OP_QUANTIZE = 114,
};

#define IO_TFLITE_MAX_RANK 8

typedef struct io_tflite_tensor {
    char *name;                        /* "" when the file has none */
    int32_t type;                      /* TensorType */
    int32_t rank;                      /* <= IO_TFLITE_MAX_RANK */
    int32_t shape[IO_TFLITE_MAX_RANK]; /* every entry >= 0 */
    const uint8_t *data;               /* constant contents (into the file's bytes), NULL for activations */
    size_t data_size;                  /* bytes of data: the shape's elements times the type's size */
    int32_t quant_count;               /* 0: not quantized; 1: per tensor; > 1: per channel along quant_dim */
    float *scale;                      /* (quant_count) */
    int64_t *zero_point;               /* (quant_count) */
    int32_t quant_dim;
    int32_t is_variable;               /* a state the interpreter keeps between runs (an LSTM's h and c) */
} io_tflite_tensor;

/* The options systolic reads, whatever the op; absent ones keep TFLite's defaults. */
typedef struct io_tflite_op {
    int32_t builtin;     /* BuiltinOperator; -1 for a custom op */
    char *custom_code;   /* a custom op's name, else NULL */
    int32_t version;
    int32_t n_inputs, n_outputs;
    int32_t *inputs;     /* tensor indices, -1 for an omitted optional input */
    int32_t *outputs;
    int32_t padding;     /* 0 SAME, 1 VALID */
    int32_t stride_w, stride_h, dilation_w, dilation_h, filter_w, filter_h, depth_multiplier;
    int32_t activation;  /* ActivationFunctionType: 0 NONE, 1 RELU, 2 RELU_N1_TO_1, 3 RELU6 */
    int32_t keep_dims;   /* MEAN (ReducerOptions); FULLY_CONNECTED's keep_num_dims */
    int32_t weights_format; /* FULLY_CONNECTED: 0 DEFAULT */
    float beta;          /* SOFTMAX */
    /* issue 18, dynamic-range quantization */
    int32_t asymmetric_quantize_inputs; /* FULLY_CONNECTED, UNIDIRECTIONAL_SEQUENCE_LSTM: hybrid rows quantized
                                           with a zero point */
    int32_t time_major;                 /* UNIDIRECTIONAL_SEQUENCE_LSTM: (T, B, I) rather than (B, T, I) */
    float cell_clip, proj_clip;         /* UNIDIRECTIONAL_SEQUENCE_LSTM: 0 for none */
    int32_t axis, batch_dims;           /* GATHER */
    int32_t begin_mask, end_mask, ellipsis_mask, new_axis_mask, shrink_axis_mask, offset; /* STRIDED_SLICE */
} io_tflite_op;

typedef struct io_tflite {
    char *path;             /* the name errors give */
    uint8_t *bytes;         /* the whole file; tensors' data point into it */
    size_t size;
    uint32_t version;       /* the schema version the file says (3) */
    int32_t n_subgraphs;    /* the reader reads the first, the model */
    int32_t n_tensors, n_ops, n_inputs, n_outputs;
    io_tflite_tensor *tensors;
    io_tflite_op *ops;      /* in execution order */
    int32_t *inputs, *outputs;
} io_tflite;

/* "CONV_2D" for 3, ..., the schema's name of a builtin operator; NULL for a code it does not list. */
const char *io_tflite_op_name(int32_t builtin);
/* "int8", "float32", ... for a TensorType; "type N" (static buffer) for others. */
const char *io_tflite_type_name(int32_t type);
/* Bytes of one element of a TensorType, 0 for types without a fixed size. */
size_t io_tflite_type_size(int32_t type);

/* The C++ half (tflite_fb.cc): verify bytes[0, size) as a TFLite flatbuffer
 * with flatbuffers' Verifier and copy the first subgraph into m (whose path,
 * bytes and size the caller set; everything it allocates goes through
 * sy_malloc, freed by io_tflite_free). Returns 0, or -1 with a message in
 * err (what was wrong and at which byte offset) and m partly filled. */
int io_tflite_decode(io_tflite *m, char *err, size_t err_size);

/* ---- writing (tflite_write.cc, issue 18) ----
 * What the writer adds to an io_tflite's contents. */
typedef struct io_tflite_write_options {
    const char *description;               /* the model's description; NULL: "systolic" */
    const char *const *input_names;        /* with output_names: a "serving_default" SignatureDef */
    const char *const *output_names;       /*   naming each input and output (NULL: none) */
    int dynamic_batch;                     /* activations' shape_signature with -1 for the batch axis */
    int min_runtime_version;               /* the "min_runtime_version" metadata entry, as TF writes it */
} io_tflite_write_options;

/* The C++ half of the writer: m (tensors' data where set, quantization,
 * operators with their options, inputs and outputs) encoded with
 * flatbuffers' FlatBufferBuilder as TFLite's schema lays it out, into a new
 * sy_malloc'd buffer *out of *size bytes; io_tflite_decode reads the same m
 * back. wo may be NULL. Returns 0, or -1 with a message in err (an index out
 * of range, a per-channel count that is not its dimension's). */
int io_tflite_encode(const io_tflite *m, const io_tflite_write_options *wo, uint8_t **out, size_t *size, char *err,
                     size_t err_size);

#ifdef __cplusplus
}
#endif

#endif
