#!/usr/bin/env bash
# Device check for NVML discovery (src/agent/nvml.*) on a machine with an NVIDIA GPU: runs
# tests/device/discover_main.cpp, cross-checks its JSON against nvidia-smi, and asserts that
# the GPU state gpuplane must never touch (MIG mode, GPU instances, persistence, compute mode,
# application clocks) is identical before and after. Nothing here changes GPU state.
#
#   tests/device/discover.sh                   build with g++ on this machine, then run
#   tests/device/discover.sh --prebuilt PATH   run a binary built elsewhere (see --build-only)
#   tests/device/discover.sh --build-only OUT  build OUT only (no GPU needed), to carry over
#
# Building needs g++ (C++23) and the fmt, nlohmann-json and OpenSSL headers; fmt is compiled
# header-only, libcrypto and libstdc++ linked statically, so the binary needs only glibc
# (2.34 or newer when built on glibc >= 2.34), libgcc_s.so.1 and the driver's libnvidia-ml.so.1. GP_BUILD_JOBS (default 1) compiles in parallel;
# GP_EXTRA_SOURCES adds sources (e.g. a stand-in for src/fleet/inventory.cpp).
#
# Results: the JSON on stdout and, when $OUT is set, $OUT/discover.json, $OUT/state-before.txt,
# $OUT/state-after.txt. Exit: 0 pass; 1 the binary reported a failure; 2 NVML unavailable;
# 3 GPU state changed; 4 disagreement with nvidia-smi; 5 cannot build or run.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
MODE=build-and-run
BINARY=""
case "${1:-}" in
  --prebuilt) MODE=run; BINARY="${2:?--prebuilt needs a path}" ;;
  --build-only) MODE=build; BINARY="${2:?--build-only needs an output path}" ;;
  "") ;;
  *) echo "usage: $0 [--prebuilt PATH | --build-only OUT]" >&2; exit 5 ;;
esac

say() { echo "discover.sh: $*" >&2; }

build() {
  local out="$1"
  local missing=""
  for tool in g++ cmake; do
    command -v "$tool" >/dev/null 2>&1 || missing+=" $tool"
  done
  if ! command -v g++ >/dev/null 2>&1; then
    say "g++ is not installed here (missing:$missing). Build on a development machine with"
    say "  tests/device/discover.sh --build-only /tmp/gp-discover"
    say "and run it here with: tests/device/discover.sh --prebuilt /tmp/gp-discover"
    return 5
  fi
  [ -n "$missing" ] && say "note: missing$missing (not needed: this build uses g++ directly)"
  local headers_missing=""
  for h in fmt/format.h nlohmann/json.hpp openssl/evp.h; do
    echo "#include <$h>" | g++ -std=gnu++23 -x c++ -fsyntax-only - >/dev/null 2>&1 ||
      headers_missing+=" <$h>"
  done
  if [ -n "$headers_missing" ]; then
    say "cannot build here: missing development headers$headers_missing"
    say "(Debian: libfmt-dev nlohmann-json3-dev libssl-dev). Use --build-only elsewhere and"
    say "--prebuilt here."
    return 5
  fi

  # Only what discover_main needs: the NVML layer, the inventory types and their JSON, the
  # vocabulary (GPU modes, the MIG catalog and geometry), and the common error/JSON helpers (json.cpp validates UTF-8 with crypto.cpp, hence OpenSSL).
  local sources=("$ROOT/tests/device/discover_main.cpp" "$ROOT/src/agent/nvml.cpp")
  local f
  for f in fleet/inventory.cpp vocab/classes.cpp vocab/units.cpp vocab/mig_catalog.cpp \
      vocab/mig_geometry.cpp common/errors.cpp common/json.cpp common/crypto.cpp; do
    if [ ! -f "$ROOT/src/$f" ]; then
      say "src/$f is not in this tree; set GP_EXTRA_SOURCES to a file that stands in for it"
      [ -n "${GP_EXTRA_SOURCES:-}" ] || return 5
      continue
    fi
    sources+=("$ROOT/src/$f")
  done
  # shellcheck disable=SC2206
  [ -n "${GP_EXTRA_SOURCES:-}" ] && sources+=(${GP_EXTRA_SOURCES})

  local crypto="-lcrypto"
  local libdir
  libdir="$(dirname "$(g++ -print-file-name=libcrypto.a)")"
  if [ -f "$libdir/libcrypto.a" ]; then
    crypto="-Wl,-Bstatic -lcrypto -Wl,-Bdynamic"
  else
    say "note: no libcrypto.a; the binary will need libcrypto.so.3 at run time"
  fi

  local objdir
  objdir="$(mktemp -d "${TMPDIR:-/tmp}/gp-discover-build.XXXXXX")"
  local flags=(-std=gnu++23 -O2 -g0 -DFMT_HEADER_ONLY -I"$ROOT/src" -ffunction-sections
               -fdata-sections -Wall -Wextra -Wno-missing-field-initializers)
  say "compiling ${#sources[@]} sources (GP_BUILD_JOBS=${GP_BUILD_JOBS:-1})"
  # shellcheck disable=SC2016  # $0 and $@ belong to the inner sh
  if ! printf '%s\n' "${sources[@]}" |
      xargs -P "${GP_BUILD_JOBS:-1}" -I{} sh -c \
        'g++ "$@" -c "$0" -o "'"$objdir"'/$(echo "$0" | tr / _).o"' {} "${flags[@]}"; then
    say "compilation failed"
    rm -rf "$objdir"
    return 5
  fi
  # shellcheck disable=SC2086
  # libgcc stays dynamic: GCC 12's static unwinder would demand glibc 2.35 (_dl_find_object).
  if ! g++ -o "$out" "$objdir"/*.o -static-libstdc++ -Wl,--gc-sections \
      $crypto -ldl -pthread; then
    say "link failed"
    rm -rf "$objdir"
    return 5
  fi
  rm -rf "$objdir"
  say "built $out; it needs:"
  (ldd "$out" 2>/dev/null || true) | sed 's/^/  /' >&2
  local glibc
  glibc="$(objdump -T "$out" 2>/dev/null | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1)"
  [ -n "$glibc" ] && say "newest glibc symbol version required: $glibc"
  return 0
}

# The state discovery must leave alone. Each command's output (or its error) is recorded, so a
# command that fails the same way before and after still compares equal.
gpu_state() {
  echo "## nvidia-smi -L"
  nvidia-smi -L 2>&1
  echo "## nvidia-smi --query-gpu=mig.mode.current --format=csv"
  nvidia-smi --query-gpu=mig.mode.current --format=csv 2>&1
  echo "## mig mode, persistence, compute mode, application clocks"
  nvidia-smi --query-gpu=index,uuid,pci.bus_id,mig.mode.current,mig.mode.pending,persistence_mode,compute_mode,clocks.applications.graphics,clocks.applications.memory --format=csv 2>&1
  echo "## nvidia-smi mig -lgi"
  nvidia-smi mig -lgi 2>&1
  echo "## nvidia-smi mig -lci"
  nvidia-smi mig -lci 2>&1
}

if [ "$MODE" = build ]; then
  build "$BINARY"
  exit $?
fi

if ! command -v nvidia-smi >/dev/null 2>&1; then
  say "nvidia-smi not found: this is not a machine with an NVIDIA driver"
  exit 5
fi

OUTDIR="${OUT:-}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/gp-discover.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
if [ "$MODE" = build-and-run ]; then
  BINARY="$WORK/discover"
  build "$BINARY" || exit 5
fi
[ -x "$BINARY" ] || { say "$BINARY is not an executable"; exit 5; }

gpu_state >"$WORK/state-before.txt"
echo "===== GPU state before" >&2
cat "$WORK/state-before.txt" >&2

timeout 300 "$BINARY" >"$WORK/discover.json" 2>"$WORK/discover.stderr"
STATUS=$?

gpu_state >"$WORK/state-after.txt"
echo "===== discover (exit $STATUS)" >&2
cat "$WORK/discover.json"
[ -s "$WORK/discover.stderr" ] && { echo "===== discover stderr" >&2; cat "$WORK/discover.stderr" >&2; }

if [ -n "$OUTDIR" ]; then
  mkdir -p "$OUTDIR"
  cp "$WORK/discover.json" "$WORK/discover.stderr" "$WORK/state-before.txt" \
    "$WORK/state-after.txt" "$OUTDIR/"
fi

RESULT=0
if ! diff -u "$WORK/state-before.txt" "$WORK/state-after.txt" >"$WORK/state.diff"; then
  echo "===== FAIL: GPU state changed during discovery" >&2
  cat "$WORK/state.diff" >&2
  RESULT=3
else
  echo "===== GPU state unchanged" >&2
fi

# Cross-check with nvidia-smi: same GPUs (UUID, bus id, memory total, MIG mode).
nvidia-smi --query-gpu=uuid,pci.bus_id,memory.total,mig.mode.current --format=csv,noheader,nounits \
  >"$WORK/smi.csv" 2>&1 || true
# And the telemetry, read right after the binary's samples: figures that drift (power,
# temperature, memory) are compared within bounds, counters (ECC) exactly.
nvidia-smi --query-gpu=uuid,power.draw,temperature.gpu,memory.used,ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total,clocks.sm \
  --format=csv,noheader,nounits >"$WORK/smi-telemetry.csv" 2>&1 || true
[ -n "$OUTDIR" ] && cp "$WORK/smi.csv" "$WORK/smi-telemetry.csv" "$OUTDIR/"
if [ "$STATUS" -ne 2 ] && command -v python3 >/dev/null 2>&1; then
  if ! python3 - "$WORK/discover.json" "$WORK/smi.csv" "$WORK/smi-telemetry.csv" <<'EOF'
import json, sys
doc = json.load(open(sys.argv[1]))
ours = {g["uuid"]: g for g in doc.get("summary", [])}
problems = []
smi = [l.split(", ") for l in open(sys.argv[2]).read().splitlines() if l.strip()]
for row in smi:
    if len(row) < 4:
        problems.append(f"unreadable nvidia-smi row {row}")
        continue
    uuid, bus, mem_mib, mig = (x.strip() for x in row[:4])
    g = ours.get(uuid)
    if g is None:
        problems.append(f"{uuid} missing from discover()")
        continue
    if g["pci_bus_id"] != bus:
        problems.append(f"{uuid}: bus id {g['pci_bus_id']} vs nvidia-smi {bus}")
    try:
        ours_mib = g["memory_bytes"] / 2**20
        if abs(ours_mib - float(mem_mib)) > 0.01 * float(mem_mib) + 1:
            problems.append(f"{uuid}: memory {ours_mib:.0f} MiB vs nvidia-smi {mem_mib} MiB")
    except ValueError:
        pass
    if mig in ("Enabled", "Disabled") and g["mig_enabled"] != (mig == "Enabled"):
        problems.append(f"{uuid}: MIG enabled {g['mig_enabled']} vs nvidia-smi {mig}")
samples = {s["gpu_uuid"]: s for s in doc.get("samples_after_1s", []) if not s["mig_instance"]}
def number(text):
    try:
        return float(text)
    except ValueError:
        return None  # "[N/A]", "[Not Supported]"
for row in (l.split(", ") for l in open(sys.argv[3]).read().splitlines() if l.strip()):
    if len(row) < 7 or row[0] not in samples:
        problems.append(f"unreadable or unknown nvidia-smi telemetry row {row}")
        continue
    s = samples[row[0]]
    watts, celsius, used_mib, sbe, dbe, sm_mhz = (number(x.strip()) for x in row[1:7])
    mine = {"W": s["power_mw"] / 1000, "C": s["temperature_c"], "MiB": s["mem_used_bytes"] / 2**20,
            "SBE": s["ecc_corrected"], "DBE": s["ecc_uncorrected"], "SM MHz": s["sm_clock_mhz"]}
    print(f"telemetry {row[0]}: ours {mine}; nvidia-smi W={watts} C={celsius} MiB={used_mib} "
          f"SBE={sbe} DBE={dbe} SM MHz={sm_mhz}", file=sys.stderr)
    bounds = [("W", watts, max(0.3 * (watts or 0), 30)), ("C", celsius, 5),
              ("MiB", used_mib, 64), ("SBE", sbe, 0), ("DBE", dbe, 0)]
    for name, theirs, slack in bounds:
        if theirs is not None and abs(mine[name] - theirs) > slack:
            problems.append(f"{row[0]}: {name} {mine[name]} vs nvidia-smi {theirs}")
if doc.get("summary") is not None and len(ours) != len(smi):
    problems.append(f"discover() found {len(ours)} GPUs, nvidia-smi {len(smi)}")
for p in problems:
    print("MISMATCH:", p, file=sys.stderr)
print(f"nvidia-smi cross-check: {len(smi)} GPUs, {len(problems)} mismatches", file=sys.stderr)
sys.exit(1 if problems else 0)
EOF
  then
    [ "$RESULT" -eq 0 ] && RESULT=4
  fi
elif [ "$STATUS" -ne 2 ]; then
  # Without python3: every UUID and bus id nvidia-smi lists must appear in the JSON.
  while IFS=', ' read -r uuid bus _; do
    grep -q "\"$uuid\"" "$WORK/discover.json" || { say "MISMATCH: $uuid missing"; RESULT=4; }
    grep -q "\"$bus\"" "$WORK/discover.json" || { say "MISMATCH: bus $bus missing"; RESULT=4; }
  done <"$WORK/smi.csv"
fi

if [ "$RESULT" -eq 0 ] && [ "$STATUS" -ne 0 ]; then RESULT="$STATUS"; fi
[ "$STATUS" -gt 2 ] && RESULT=5  # timeout or crash
echo "===== discover.sh: exit $RESULT" >&2
exit "$RESULT"
