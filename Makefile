# Makefile — a thin wrapper over CMake: `make demo` and `make test` set the machine up,
# build into build/ in Release, then run the demo or every test through ctest.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
MAKEFLAGS += --no-print-directory

.PHONY: all setup setup-fuzz configure build demo test test-asan test-fuzz gpu-kit clean

all: build

setup:
	@bash scripts/setup.sh

setup-fuzz:
	@bash scripts/setup.sh --fuzz

configure: setup
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release

build: configure
	cmake --build $(BUILD) -j $(JOBS)

# The demo, the main job: the seed's production MLP (26.3M parameters, 24 blocks of
# Linear, LayerNorm, GELU, Dropout at width 1024) checked, compiled for this CPU and run at
# batch 128, then timed: compile time, time per batch, throughput, GFLOP/s.
demo: build
	$(BUILD)/coil check examples/mlp.coil --dim B=128
	$(BUILD)/coil run examples/mlp.coil --dim B=128 --seed 1
	$(BUILD)/coil bench examples/mlp.coil --batch 128 --runs 20

test: build
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The sanitizer job (CI runs it after `make test`): the same suite built into build-asan by
# the same compiler with ASan + UBSan, leaks checked and any finding fatal; then each
# libFuzzer harness of tests/fuzz for FUZZ_SECONDS, built by clang-19 into build-fuzz
# (only the harnesses; without clang-19 and libFuzzer each fuzz/ test says it is skipped).
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_CC ?= $(shell command -v clang-19 2>/dev/null || echo cc)
FUZZ_SECONDS ?= 20
test-asan: setup
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCOIL_SANITIZE=ON
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS)

test-fuzz: setup-fuzz
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=$(FUZZ_CC) \
	    -DCOIL_FUZZ=ON -DCOIL_LIT=OFF -DCOIL_FUZZ_SECONDS=$(FUZZ_SECONDS)
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz
	@rc=0; ctest --test-dir $(FUZZ_BUILD) -L fuzz --output-on-failure -j $(JOBS) || rc=$$?; \
	grep -h '^fuzz_[a-z]*: .* executions' $(FUZZ_BUILD)/Testing/Temporary/LastTest.log || true; \
	exit $$rc

# .gpu-kit/: what a GPU machine without LLVM, OpenBLAS, flex and bison needs to build coil
# (scripts/reduced-build.sh there): the generated parser and lexer, the GPT-2 corpus and
# CPU reference results, which come from build/coil, hence the build first.
gpu-kit: build
	COIL=$(BUILD)/coil bash scripts/gpu-kit.sh .gpu-kit

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
