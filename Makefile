# systolic - a thin wrapper over CMake (binary dir build/).
#
#   make          build the library and build/systolic
#   make test     build and run the tests (ctest), CI's learning tests among them; list the skipped ones
#   make test-long  the long tests: tutorials to their published accuracy, all 24 keras.applications
#   make asan     the tests under AddressSanitizer + UBSan (build-asan/), no learning tests
#   make tsan     the tests under ThreadSanitizer (build-tsan/), no learning tests
#   make bench    build and run the benchmarks
#   make fuzz     run the libFuzzer targets, FUZZ_SECONDS each (clang, build-fuzz/)
#   make skipped  list the tests each build skipped and why (last in CI's command, so its log ends with it)
#   make deps     install the Debian packages the build needs, and .venv/ (TensorFlow 2.15.1) for the interop tests
#   make bench-deps  install what the side-by-side benchmarks need (PyTorch; TensorFlow in .gl/)
#   make format   clang-format the sources

BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
# Warnings are errors here (and so in CI); plain cmake builds default to off.
CONFIG = -DCMAKE_BUILD_TYPE=Release -DSY_WERROR=ON $(CMAKE_FLAGS)

# protobuf-c for tf.train.Example and TensorBoard's events; libhdf5 for
# Keras's .h5 files; flatbuffers (the C++ library and flatc) for .tflite files; python3-venv for the interop
# tests' readers; clang and its runtime (libFuzzer) for make fuzz, which CI runs; Open MPI (its library and
# mpirun) for training across processes (--tpu mpi, issue 20) and the tests that launch several ranks.
DEBIAN_PACKAGES = build-essential cmake pkg-config libdnnl-dev zlib1g-dev libcurl4-openssl-dev libjansson-dev libprotobuf-c-dev protobuf-c-compiler libhdf5-dev libpng-dev libjpeg62-turbo-dev libflatbuffers-dev flatbuffers-compiler python3 python3-venv clang libclang-rt-14-dev libopenmpi-dev openmpi-bin
# The interop tests (label interop) read systolic's files with the real
# tools from this venv: TensorFlow's TFRecord reader and tf.keras (2.15.1,
# Keras 2, the version the fixtures were made with), TensorBoard's event
# reader, h5py. pip runs only when a distribution is missing or at another
# version (about 600 MB, a few minutes, once), so a second make deps costs a
# fraction of a second. .gl/ (make bench-deps) stays apart: it is the
# benchmarks' and fixture scripts' TensorFlow, and CI never makes it.
PYTHON_PACKAGES = tensorflow-cpu==2.15.1 tensorboard h5py
# For the side-by-side benchmarks (make bench-deps). python3-torch alone
# pulls in the reference BLAS (libblas3, about 3 GFLOP/s here), which
# would make PyTorch a straw man; OpenBLAS (OpenMP, as PyTorch's own
# threads) takes its place through Debian's alternatives.
BENCH_PACKAGES = python3-torch python3-venv libopenblas0-openmp

.PHONY: all configure test test-long asan tsan fuzz skipped bench deps bench-deps format clean

all: configure
	cmake --build $(BUILD) -j $(JOBS)

configure:
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) $(CONFIG)

# The tests, and CI's learning tests (label ci_learning: README's tutorial
# command, one IMDB epoch), each alone; then the list of skipped tests and
# why (tests/skipped_tests.py), which fails where an interop test skipped
# though .venv has TensorFlow. Sanitizer builds leave the learning out.
CTEST = ctest --output-on-failure -j $(JOBS) --output-junit Testing/junit.xml
SKIPPED = python3 tests/skipped_tests.py --venv .venv
test: all
	@$(CTEST) --test-dir $(BUILD) -LE long; rc=$$?; $(SKIPPED) $(BUILD) || rc=1; exit $$rc

# The learning tests: tutorials trained to their published accuracy.
test-long: all
	ctest --test-dir $(BUILD) --output-on-failure -L long

asan:
	@test -f build-asan/CMakeCache.txt || cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSY_WERROR=ON -DSY_SANITIZE=ON $(CMAKE_FLAGS)
	cmake --build build-asan -j $(JOBS)
	@ASAN_OPTIONS=detect_leaks=1:exitcode=86 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=86 $(CTEST) --test-dir build-asan -LE 'long|ci_learning|heavy'; \
	  rc=$$?; $(SKIPPED) build-asan || rc=1; exit $$rc

# The unit tests under ThreadSanitizer (build-tsan/): the replicas, the
# pool and the barriers. halt_on_error makes a reported race fail the test.
tsan:
	@test -f build-tsan/CMakeCache.txt || cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSY_WERROR=ON -DSY_TSAN=ON $(CMAKE_FLAGS)
	cmake --build build-tsan -j $(JOBS)
	@TSAN_OPTIONS=halt_on_error=1 $(CTEST) --test-dir build-tsan -LE 'long|ci_learning|heavy'; \
	  rc=$$?; $(SKIPPED) build-tsan || rc=1; exit $$rc

# The parsers under libFuzzer with ASan+UBSan. New inputs go to
# build-fuzz/corpus/<target>; tests/fuzz/corpus/<target> holds the seeds.
# A crash leaves build-fuzz/<target>-crash-*: add it to the seeds once fixed.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS = fuzz_tflite fuzz_tpu1 fuzz_idx fuzz_npy fuzz_tar fuzz_word_index fuzz_cifar fuzz_tfrecord fuzz_example fuzz_model_json fuzz_checkpoint fuzz_h5 fuzz_png fuzz_jpeg fuzz_record_spec
fuzz:
	@test -f build-fuzz/CMakeCache.txt || CC=clang CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSY_FUZZ=ON -DSY_BUILD_TESTS=OFF $(CMAKE_FLAGS)
	cmake --build build-fuzz -j $(JOBS) --target $(FUZZ_TARGETS)
	@for t in $(FUZZ_TARGETS); do \
	  mkdir -p build-fuzz/corpus/$$t || exit 1; \
	  echo "fuzz: $$t for $(FUZZ_SECONDS) s"; \
	  build-fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -malloc_limit_mb=256 -print_final_stats=1 \
	    -artifact_prefix=build-fuzz/$$t- build-fuzz/corpus/$$t tests/fuzz/corpus/$$t || exit 1; \
	done

# The tests each build that ran skipped, and why: what test, asan and tsan
# print after their runs, again together, so that CI's log ends with it; an
# interop test skipped though .venv has TensorFlow fails here too.
skipped:
	@$(SKIPPED) $(wildcard $(BUILD) build-asan build-tsan)

# Kernels beside PyTorch, then the tutorial models (Fashion-MNIST CNN, IMDB
# LSTM: training, prediction, a whole IMDB epoch) beside TensorFlow (.gl/
# venv) and PyTorch, where make bench-deps installed them; then the input
# pipeline (training fed by it against in-memory tensors; it alone, beside
# tf.data).
bench: all
	@if /usr/bin/python3 -c 'import torch' 2>/dev/null; then \
	  /usr/bin/python3 bench/compare_kernels.py --build $(BUILD); \
	else $(BUILD)/bench/bench_kernels; fi
	/usr/bin/python3 bench/compare_models.py --build $(BUILD)
	@dir=$$(mktemp -d) && $(BUILD)/bench/bench_pipeline --dir $$dir && \
	  if .gl/bin/python -c 'import tensorflow' 2>/dev/null; then .gl/bin/python bench/tf_pipeline.py $$dir; fi; \
	  rc=$$?; rm -rf $$dir; exit $$rc

deps:
	@$(MAKE) --no-print-directory install-packages PACKAGES="$(DEBIAN_PACKAGES)"
	@test -x .venv/bin/python || python3 -m venv .venv
	@.venv/bin/python -c 'import importlib.metadata as m, sys; sys.exit(not all(m.distribution(n) and v in ("", m.version(n)) for n, _, v in (a.partition("==") for a in sys.argv[1:])))' \
	  $(PYTHON_PACKAGES) 2>/dev/null || .venv/bin/pip install -q $(PYTHON_PACKAGES)

bench-deps:
	@$(MAKE) --no-print-directory install-packages PACKAGES="$(BENCH_PACKAGES)"
	@test -x .gl/bin/python || python3 -m venv .gl
	@.gl/bin/python -c 'import tensorflow' 2>/dev/null || .gl/bin/pip install -q tensorflow-cpu==2.15.1

install-packages:
	@missing=$$(for p in $(PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || echo $$p; done); \
	if [ -n "$$missing" ]; then \
	  echo "installing:$$missing"; \
	  if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing; \
	else echo "all of $(PACKAGES) installed"; fi

format:
	clang-format -i $$(git ls-files '*.c' '*.h' '*.inc')

clean:
	rm -rf $(BUILD) build-asan build-tsan build-fuzz
