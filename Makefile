# Makefile — a thin wrapper over CMake: `make demo` and `make test` set the machine up,
# build into build/ in Release, then run the demo or every test through ctest.
BUILD ?= build
JOBS ?= $(shell nproc 2>/dev/null || echo 2)
MAKEFLAGS += --no-print-directory

.PHONY: all setup configure build demo test gpu-kit clean

all: build

setup:
	@bash scripts/setup.sh

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

# .gpu-kit/: what a GPU machine without LLVM, OpenBLAS, flex and bison needs to build coil
# (scripts/reduced-build.sh there): the generated parser and lexer, the GPT-2 corpus and
# CPU reference results, which come from build/coil, hence the build first.
gpu-kit: build
	COIL=$(BUILD)/coil bash scripts/gpu-kit.sh .gpu-kit

clean:
	rm -rf $(BUILD)
