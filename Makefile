# gpuplane: `make run` and `make test` do everything on a fresh Debian 12 machine (as root).
BUILD      ?= build
ASAN_BUILD ?= build-asan
TSAN_BUILD ?= build-tsan
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 60
TEST_FUZZ_SECONDS ?= 5
JOBS       ?= $(shell nproc)
# Which suites the release tree builds (GP_TESTS, tests/CMakeLists.txt): all of them, except
# under `make test`, whose sanitizer stages run every suite but those only a release tree runs.
GP_TESTS   ?= all
CMAKE_ARGS ?=
# One line as each stage starts, so a CI log shows where the time goes (docs/development.md).
STAGE = @echo "== $@ $$(date -u +%H:%M:%S) UTC"

.PHONY: all setup configure build run test test-release test-static test-asan asan-build test-tsan test-fuzz fuzz tidy thread-safety bench format clean

all: build

setup:
	@scripts/setup.sh

# The console (web/dist) and the release build's configuration, which `build` and `run` share.
configure: setup
	@scripts/build_console.sh
	@cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGP_TESTS=$(GP_TESTS) $(CMAKE_ARGS) >/dev/null

build: configure
	$(STAGE)
	@ninja -C $(BUILD) -j$(JOBS)

# Only what it runs: the console and the gpuplane binary (`make test` builds the tests and
# benchmarks). Ninja shows its progress on a terminal.
run: configure
	@ninja -C $(BUILD) -n gpuplane | grep -q '^\[' && \
	  echo "building the gpuplane binary (a first build takes about 3 minutes on 2 cores)" || true
	@ninja -C $(BUILD) -j$(JOBS) gpuplane
	@scripts/run.sh $(BUILD)/src/gpuplane

# Every test: the release build, then the unit and integration suites under ASan+UBSan, the
# threaded suites under TSan, then a short run of every fuzz target (built in the ASan tree).
# Each suite runs once where it checks most: the release tree here builds and runs only what no
# sanitizer tree runs (PostgreSQL, the jobs in containers, `make run`, the browser).
test: GP_TESTS = release-only
test: test-release test-static test-asan test-tsan test-fuzz
	$(STAGE)

# With GP_TESTS=release-only (`make test`), the tests only a release tree runs (RELEASE_ONLY):
# the sanitizer stages run the rest.
test-release: build
	$(STAGE)
	@ctest --test-dir $(BUILD) --output-on-failure -j$(JOBS) --timeout 300 \
	  $(if $(filter release-only,$(GP_TESTS)),-R '$(RELEASE_ONLY)')

# Static checks over the release build's compile commands (docs/static-analysis.md): clang-tidy
# with .clang-tidy and clang's thread-safety analysis, both in one parse of each file (`tidy`;
# `thread-safety` alone is the quicker check while editing). Any finding fails.
test-static: tidy

thread-safety: build
	$(STAGE)
	@CHECK_JOBS=$(JOBS) scripts/clang_checks.py --thread-safety $(BUILD)

tidy: build
	$(STAGE)
	@CHECK_JOBS=$(JOBS) scripts/clang_checks.py --tidy $(BUILD)

# One clang build serves the sanitizer tests and the fuzz targets (GP_FUZZ: ASan, UBSan and
# libFuzzer's coverage on every file), so `make test` compiles the tree three times, not four.
# The suites that mostly wait on podman, nft and timed grace periods (SLOW_UNDER_SANITIZERS) run
# in the release build alone: their C++ paths are run under the sanitizers by the other JobsTest
# cases, and their sleeping would add minutes to every sanitizer stage.
SLOW_UNDER_SANITIZERS = ^(Job(Network|Dns|Registry)Test\.|JobsTest\.(APreempted|CancelSends)|JobFencingTest\.)
# What no sanitizer tree runs: those suites, the PostgreSQL repeats, `make run` and the browser.
RELEASE_ONLY = $(SLOW_UNDER_SANITIZERS)|^(MakeRun|Console)\.|\.postgres$$

test-asan: asan-build
	$(STAGE)
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j$(JOBS) --timeout 600 -E '$(SLOW_UNDER_SANITIZERS)'

asan-build: setup
	$(STAGE)
	@scripts/build_console.sh
	@grep -qs 'CMAKE_CXX_COMPILER:.*clang' $(ASAN_BUILD)/CMakeCache.txt || rm -rf $(ASAN_BUILD)
	@CC=clang-16 CXX=clang++-16 cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DGP_FUZZ=ON -DGP_BENCH=OFF $(CMAKE_ARGS) >/dev/null
	@ninja -C $(ASAN_BUILD) -j$(JOBS)

# ThreadSanitizer over the suites that run threads (tests/CMakeLists.txt names them): the store,
# audit, rate limiter, the API server in-process and the real binary. Any report fails the test
# (children inherit TSAN_OPTIONS, so a race in a spawned server fails it too).
test-tsan: setup
	$(STAGE)
	@scripts/build_console.sh
	@cmake -S . -B $(TSAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGP_TSAN=ON -DGP_BENCH=OFF $(CMAKE_ARGS) >/dev/null
	@ninja -C $(TSAN_BUILD) -j$(JOBS)
	@# The agent's threads are raced by the JobsTest cases not in SLOW_UNDER_SANITIZERS.
	@TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:suppressions=$(CURDIR)/tests/support/tsan.supp \
	  ctest --test-dir $(TSAN_BUILD) --output-on-failure -j$(JOBS) --timeout 600 -E '$(SLOW_UNDER_SANITIZERS)'

# libFuzzer targets (docs/fuzzing.md): a bounded run in `make test` of the targets the ASan build
# made (Debug), a longer one in `make fuzz` of its own optimised build.
test-fuzz: asan-build
	$(STAGE)
	@FUZZ_BUILD=$(ASAN_BUILD) FUZZ_JOBS=$(JOBS) scripts/fuzz.sh $(TEST_FUZZ_SECONDS)

fuzz: setup
	@FUZZ_BUILD=$(FUZZ_BUILD) FUZZ_JOBS=$(JOBS) scripts/fuzz.sh $(FUZZ_SECONDS)

bench: build
	@for b in $(BUILD)/bench/bench_*; do [ -x "$$b" ] && "$$b"; done; true

format:
	@git ls-files '*.cpp' '*.h' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(TSAN_BUILD) $(FUZZ_BUILD)
