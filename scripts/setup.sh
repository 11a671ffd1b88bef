#!/usr/bin/env bash
# Installs the Debian 12 packages gpuplane needs to build and test. Idempotent: quiet and fast
# when everything is already there. Must run as root (or with sudo available).
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config git
  libboost-dev libssl-dev libsodium-dev nlohmann-json3-dev libsqlite3-dev sqlite3
  libspdlog-dev libfmt-dev libcli11-dev libyaml-cpp-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  curl procps
  # net: the network isolation test (tests/network, LABELS net) runs the real nft and ip in
  # network namespaces, and ping; CI runs as root, so `make test` always installs them.
  nftables iproute2 iputils-ping
  # postgres: the PostgreSQL store (libpq) and the throwaway clusters its tests start with
  # initdb/pg_ctl (tests/support/pg_cluster.sh); no system service is used.
  postgresql-15 libpq-dev
  # fuzz: libFuzzer targets (fuzz/, scripts/fuzz.sh, `make fuzz` and `make test-fuzz`) need
  # clang 16 (clang 14 cannot compile std::expected with libstdc++ 12) and its runtime libraries.
  clang-16 libclang-rt-16-dev
  # static checks (`make test-static`): clang-tidy 16; clang-16 runs the thread-safety analysis.
  clang-tidy-16
)
# Extra groups can be requested: SETUP_EXTRA="postgres browser" scripts/setup.sh
for extra in ${SETUP_EXTRA:-}; do
  case "$extra" in
    postgres) ;;  # always installed now
    browser) PKGS+=(chromium nodejs npm) ;;
    net) ;;  # always installed now (kept so SETUP_EXTRA=net keeps working)
  esac
done

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done" >&2
