/*
 * tpu1_program.h - TPU v1 program files (issue 18): the instruction
 * encoding, the file that carries a program with its weight image, host
 * buffers and activation tables, a writer, a loader that refuses anything
 * malformed, and a disassembler. The program in memory is the sim
 * backend's (backend/sim/tpu1.h); docs/design/tpu-v1.md gives the format.
 */
#ifndef SY_IO_TPU1_PROGRAM_H
#define SY_IO_TPU1_PROGRAM_H

#include <stdio.h>

#include "../backend/sim/tpu1.h"

#define IO_TPU1_MAGIC "SYTPU1\0\0"
#define IO_TPU1_VERSION 1u
#define IO_TPU1_HEADER_BYTES 96

/* Bytes of an instruction of opcode op: MatrixMultiply and Convolve 12 (the
 * paper's), 0 for an unknown opcode. */
size_t io_tpu1_insn_size(uint8_t op);
/* The paper's name of an opcode ("MatrixMultiply"), "?" for others. */
const char *io_tpu1_op_name(uint8_t op);
/* Encode one instruction into out (io_tpu1_insn_size(in->op) bytes). */
void io_tpu1_encode_insn(const sy_tpu1_insn *in, uint8_t *out);

/* The file's bytes for p, in a new sy_malloc'd buffer. */
sy_status io_tpu1_encode(const sy_tpu1_prog *p, uint8_t **buf, size_t *n);
/* Decode and check bytes[0, n): SY_ERR_CORRUPT naming `what`, the byte
 * offset and what was wrong (truncation, a bad opcode, an address or length
 * past the unified buffer, the accumulators, DDR3 or host memory, a weight
 * tile taken before it was read); SY_ERR_UNSUPPORTED, with both sizes, for
 * a program needing more unified buffer than the TPU v1's 24 MiB. */
sy_status io_tpu1_parse(const uint8_t *bytes, size_t n, const char *what, sy_tpu1_prog **out);
sy_status io_tpu1_read(const char *path, sy_tpu1_prog **out);
/* Write p atomically (io_write_file_atomic) after checking it as the loader would. */
sy_status io_tpu1_write(const char *path, const sy_tpu1_prog *p);
/* The program as text, an instruction a line with its byte offset. */
void io_tpu1_disassemble(const sy_tpu1_prog *p, FILE *out);

#endif
