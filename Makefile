# gpuplane: `make run` and `make test` do everything on a fresh Debian 12 machine (as root).
BUILD      ?= build
ASAN_BUILD ?= build-asan
JOBS       ?= $(shell nproc)
CMAKE_ARGS ?=

.PHONY: all setup build run test test-release test-asan bench format clean

all: build

setup:
	@scripts/setup.sh

build: setup
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS) >/dev/null
	@ninja -C $(BUILD) -j$(JOBS)

run: build
	@scripts/run.sh $(BUILD)/src/gpuplane

# Every test: the release build, then the unit and integration suites under ASan+UBSan.
test: test-release test-asan

test-release: build
	@ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS) --timeout 300

test-asan: setup
	@cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGP_SANITIZE=ON $(CMAKE_ARGS) >/dev/null
	@ninja -C $(ASAN_BUILD) -j$(JOBS)
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j$(JOBS) --timeout 600

bench: build
	@for b in $(BUILD)/bench/bench_*; do [ -x "$$b" ] && "$$b"; done; true

format:
	@git ls-files '*.cpp' '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
