#!/usr/bin/env bash
# Installs the Debian 12 packages gpuplane needs to build and test. Idempotent: quiet and fast
# when everything is already there. Must run as root (or with sudo available).
set -euo pipefail

PKGS=(
  build-essential cmake ninja-build pkg-config git
  # lld: links the test binaries five times faster than GNU ld (CMakeLists.txt).
  lld
  libboost-dev libssl-dev libsodium-dev nlohmann-json3-dev libsqlite3-dev sqlite3
  libspdlog-dev libfmt-dev libcli11-dev libyaml-cpp-dev
  # malloc: the server and its benchmarks use jemalloc (glibc's arenas spent a third of a read's
  # CPU in malloc and free under 64 connections; docs/benchmarks.md).
  libjemalloc-dev
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
  # vm: GPU virtual machines (src/vm) talk to libvirt through its C API and read domain XML with
  # libxml2; the tests validate rendered domains with virt-xml-validate (libvirt-clients, which
  # runs xmllint) and run the lifecycle on libvirt's built-in test driver (no hypervisor). The
  # agent builds each VM's cloud-init seed ISO with xorriso and its boot disk with qemu-img.
  libvirt-dev libvirt-clients libxml2-dev libxml2-utils xorriso qemu-utils
  # jobs: the node agent runs tenants' job members with podman on runc (crun 1.8 refuses these
  # machines' hybrid cgroup layout); the tests build their image from busybox-static and serve
  # it from a registry of their own on 127.0.0.1 (docker-registry, run by the test, not as a
  # service).
  podman runc busybox-static docker-registry
  # node: the npm dev dependencies in package.json (oidc-provider, for the real OpenID provider
  # the OIDC tests start: tests/support/oidc_provider.mjs; vite and typescript, which build and
  # type-check the web console in web/; playwright-core, which drives the browser in
  # tests/e2e/console_test.mjs, and axe-core, which checks its pages' accessibility there);
  # installed with `npm ci` below.
  nodejs npm
  # metrics: promtool checks /metrics, the alert rules and their unit tests, and the metrics
  # test starts a real Prometheus on 127.0.0.1 that scrapes a server with the demo fleet and
  # runs every dashboard query (tests/observe; the package's own service is not used).
  prometheus
  # browser: the console's end-to-end test runs Debian's Chromium (playwright-core brings no
  # browser of its own and downloads none).
  chromium
)
# Extra groups can be requested: SETUP_EXTRA="postgres browser" scripts/setup.sh
for extra in ${SETUP_EXTRA:-}; do
  case "$extra" in
    postgres) ;;  # always installed now
    browser) ;;  # always installed now (chromium, nodejs and npm)
    net) ;;  # always installed now (kept so SETUP_EXTRA=net keeps working)
  esac
done

missing=()
for p in "${PKGS[@]}"; do
  case "$p" in
    # A node and npm already on PATH count (e.g. NodeSource's nodejs, which bundles npm and
    # conflicts with Debian's npm package, so Debian's must not be installed next to it).
    nodejs) command -v node >/dev/null && continue ;;
    npm) command -v npm >/dev/null && continue ;;
  esac
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq >/dev/null
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  # The package starts a registry of its own on port 5000 where it can: the tests run theirs.
  if [[ " ${missing[*]} " == *" docker-registry "* ]]; then
    $SUDO systemctl disable --now docker-registry >/dev/null 2>&1 \
      || $SUDO service docker-registry stop >/dev/null 2>&1 || true
  fi
  echo "setup: done" >&2
fi

# npm dev dependencies (package.json, pinned by package-lock.json) into node_modules/, when
# it is missing or older than the lock file (npm ci stamps node_modules/.package-lock.json).
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ ! -f "$ROOT/node_modules/.package-lock.json" ] \
    || [ "$ROOT/package-lock.json" -nt "$ROOT/node_modules/.package-lock.json" ]; then
  echo "setup: npm ci (node_modules from package-lock.json)" >&2
  (cd "$ROOT" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
  echo "setup: npm ci done" >&2
fi
# oidc-provider 9 uses URL.parse and crypto.hash: Node 20.18 or later (Debian 12's own nodejs
# is 18, too old; NodeSource's 20 or 22 works). Warn rather than fail: only the OIDC tests need it.
if ! node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 20 || (a === 20 && b >= 18) ? 0 : 1)'; then
  echo "setup: warning: node $(node --version) is older than 20.18; tests/support/oidc_provider.mjs (oidc-provider 9) needs 20.18 or later" >&2
fi
