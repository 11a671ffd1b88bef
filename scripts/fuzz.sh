#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang 16, ASan+UBSan) in build-fuzz and runs each one
# for SECONDS on a scratch copy of its seed corpus (fuzz/corpus/<target>/), then prints one
# line per target: executions, exec/s, coverage (libFuzzer's cov: edges and ft: features) and
# PASS/FAIL. Exits non-zero when any target finds a crash, leak, timeout or sanitizer report;
# the line names the file libFuzzer wrote with the input (a new regression case).
#
#   scripts/fuzz.sh [SECONDS] [TARGET...]      (default 60 s per target, every target)
#   env: FUZZ_BUILD (build-fuzz), FUZZ_JOBS (nproc), FUZZ_OUT (scratch folder; a fresh temp
#        folder by default, kept when something failed)
set -euo pipefail

cd "$(dirname "$0")/.."
SECONDS_PER_TARGET=${1:-60}
shift || true
BUILD=${FUZZ_BUILD:-build-fuzz}
JOBS=${FUZZ_JOBS:-$(nproc)}
ALL_TARGETS=(json http_target cloudevents openb_csv inventory k8s_nodes admission
  agent_assignment api_bodies csr api jwt)
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=("${ALL_TARGETS[@]}")

case "$SECONDS_PER_TARGET" in
  '' | *[!0-9]* | 0) echo "fuzz: SECONDS must be a whole number >= 1, not '$SECONDS_PER_TARGET'" >&2; exit 2 ;;
esac
for t in "${TARGETS[@]}"; do
  [ -d "fuzz/corpus/$t" ] || { echo "fuzz: unknown target '$t' (no fuzz/corpus/$t)" >&2; exit 2; }
done

tty=false
[ -t 1 ] && tty=true
say() { if $tty; then echo "$@"; fi; }

# Configure (once) and build only the fuzz targets and what they link.
if [ ! -f "$BUILD/build.ninja" ]; then
  command -v clang++-16 >/dev/null || {
    echo "fuzz: clang++-16 not found (scripts/setup.sh installs clang-16 libclang-rt-16-dev)" >&2
    exit 2
  }
  say "fuzz: configuring $BUILD"
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  CC=clang-16 CXX=clang++-16 cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGP_FUZZ=ON -DGP_WERROR=OFF "${launcher[@]}" >/dev/null
fi
say "fuzz: building the fuzz targets in $BUILD"
# Only the targets asked for, and what they link.
if ! build_log=$(ninja -C "$BUILD" -j"$JOBS" "${TARGETS[@]/#/fuzz_}" 2>&1); then
  echo "$build_log" | tail -40 >&2
  echo "fuzz: build failed" >&2
  exit 2
fi

OUT=${FUZZ_OUT:-$(mktemp -d -t gp-fuzz.XXXXXX)}
mkdir -p "$OUT"
failed=0
printf '%-18s %12s %9s %7s %7s  %s\n' target executions exec/s cov ft result
for t in "${TARGETS[@]}"; do
  bin="$BUILD/fuzz/fuzz_$t"
  work="$OUT/$t"
  rm -rf "$work"
  mkdir -p "$work/corpus" "$work/artifacts"
  cp -r "fuzz/corpus/$t/." "$work/corpus/"
  say "fuzz: $t for ${SECONDS_PER_TARGET}s"
  rc=0
  # -max_total_time bounds the run; -timeout flags one input running over 10 s; crashes,
  # leaks and sanitizer reports stop the run and leave the input in artifacts/.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ASAN_SYMBOLIZER_PATH=${ASAN_SYMBOLIZER_PATH:-$(command -v llvm-symbolizer-16 llvm-symbolizer | head -1)} \
    "$bin" "$work/corpus" -max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1 \
    -rss_limit_mb=2048 -timeout=10 -max_len=65536 -artifact_prefix="$work/artifacts/" \
    >"$work/log" 2>&1 || rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log" | tail -1)
  last=$(grep -E '(#[0-9]+).*cov: [0-9]+' "$work/log" | tail -1 || true)
  cov=$(sed -n 's/.*cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  artifact=$(find "$work/artifacts" -type f | head -1)
  if [ "$rc" -eq 0 ] && [ -z "$artifact" ]; then
    result=PASS
  else
    result="FAIL (exit $rc${artifact:+, input: $artifact}; log: $work/log)"
    failed=1
  fi
  printf '%-18s %12s %9s %7s %7s  %s\n' "$t" "${execs:-?}" "${speed:-?}" "${cov:-?}" "${ft:-?}" \
    "$result"
  if [ "$result" != PASS ]; then
    grep -E 'ERROR: |SUMMARY: |runtime error|==ERROR|#[0-9]+ 0x' "$work/log" | head -30 >&2 || true
  fi
done

if [ "$failed" -ne 0 ]; then
  echo "fuzz: FAILED; inputs and logs kept in $OUT" >&2
  exit 1
fi
[ -n "${FUZZ_OUT:-}" ] || rm -rf "$OUT"
