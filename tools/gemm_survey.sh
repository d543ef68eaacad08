#!/bin/sh
# Build tools/gemm_survey.c against each SGEMM Debian ships and run it on 1
# and on all cores. Needs libopenblas-dev, libblis-dev, libdnnl-dev.
# Results: docs/design/gemm.md.
set -eu
cd "$(dirname "$0")"
out=${TMPDIR:-/tmp}/gemm_survey
mkdir -p "$out"
ob=/usr/lib/x86_64-linux-gnu/openblas-pthread
blis=/usr/lib/x86_64-linux-gnu/blis-openmp
cc -O2 gemm_survey.c -o "$out/openblas" -I/usr/include/x86_64-linux-gnu/openblas-pthread -L$ob -lopenblas -Wl,-rpath,$ob
cc -O2 gemm_survey.c -o "$out/blis" -I/usr/include/blis -L$blis -lblis -Wl,-rpath,$blis
cc -O2 -DUSE_DNNL gemm_survey.c -o "$out/onednn" -ldnnl -fopenmp
n=$(nproc)
for t in 1 "$n"; do
  echo "== OpenBLAS (its own CPU detection), $t thread(s)"; OPENBLAS_NUM_THREADS=$t "$out/openblas"
  if grep -qw avx512f /proc/cpuinfo; then
    echo "== OpenBLAS forced to SkylakeX (AVX-512) kernels, $t thread(s)"; OPENBLAS_CORETYPE=SkylakeX OPENBLAS_NUM_THREADS=$t "$out/openblas"
  fi
  echo "== BLIS, $t thread(s)"; BLIS_NUM_THREADS=$t OMP_NUM_THREADS=$t "$out/blis"
  echo "== oneDNN dnnl_sgemm, $t thread(s)"; "$out/onednn" "$t"
done
