# systolic - a thin wrapper over CMake (binary dir build/).
#
#   make          build the library and build/systolic
#   make test     build and run the unit tests (ctest)
#   make asan     the unit tests under AddressSanitizer + UBSan (build-asan/)
#   make bench    build and run the benchmarks
#   make deps     install the Debian packages the build needs
#   make bench-deps  install what the side-by-side benchmarks need (PyTorch)
#   make format   clang-format the sources

BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_FLAGS ?=
# Warnings are errors here (and so in CI); plain cmake builds default to off.
CONFIG = -DCMAKE_BUILD_TYPE=Release -DSY_WERROR=ON $(CMAKE_FLAGS)

DEBIAN_PACKAGES = build-essential cmake pkg-config libdnnl-dev zlib1g-dev libcurl4-openssl-dev python3
# For the side-by-side benchmarks (make bench-deps).
BENCH_PACKAGES = python3-torch

.PHONY: all configure test asan bench deps bench-deps format clean

all: configure
	cmake --build $(BUILD) -j $(JOBS)

configure:
	@test -f $(BUILD)/CMakeCache.txt || cmake -S . -B $(BUILD) $(CONFIG)

test: all
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) -LE long

asan:
	@test -f build-asan/CMakeCache.txt || cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSY_WERROR=ON -DSY_SANITIZE=ON $(CMAKE_FLAGS)
	cmake --build build-asan -j $(JOBS)
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --test-dir build-asan --output-on-failure -j $(JOBS) -LE long

# Kernels side by side with PyTorch when python3-torch is installed.
bench: all
	@if /usr/bin/python3 -c 'import torch' 2>/dev/null; then \
	  /usr/bin/python3 bench/compare_kernels.py --build $(BUILD); \
	else $(BUILD)/bench/bench_kernels; fi

deps:
	@$(MAKE) --no-print-directory install-packages PACKAGES="$(DEBIAN_PACKAGES)"

bench-deps:
	@$(MAKE) --no-print-directory install-packages PACKAGES="$(BENCH_PACKAGES)"

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
	rm -rf $(BUILD) build-asan
