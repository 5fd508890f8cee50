#!/usr/bin/env bash
# Installs the Debian packages the build, the tests and the benchmarks need.
# Idempotent: installs only what is missing; needs root for apt-get (sudo is used when present).
# Usage: scripts/deps.sh [build|test|bench]   (each level includes the ones before it)
set -euo pipefail
# `make -j` may start two levels at once: the second waits, then finds nothing missing.
exec 9>"${TMPDIR:-/tmp}/marketplace-deps.lock"
flock 9
level=${1:-build}
build_pkgs="build-essential pkg-config libmicrohttpd-dev libjansson-dev libsqlite3-dev libpq-dev
  libcurl4-openssl-dev libjwt-dev libssl-dev libcrypt-dev libmagic-dev libmagic-mgc libtesseract-dev
  libleptonica-dev tesseract-ocr-eng libpoppler-glib-dev libcairo2-dev zlib1g-dev libvips-dev
  postgresql-client"
test_pkgs="libcmocka-dev postgresql pgbouncer python3-pytest python3-pytest-xdist python3-requests python3-jsonschema imagemagick fonts-dejavu-core ghostscript
  curl jq clang-14 libfuzzer-14-dev libclang-rt-14-dev chromium"
bench_pkgs="wrk nginx-light iproute2"
pkgs=$build_pkgs
# Node.js and npm (Redoc's bundle is built into the binary; the client and linter tests; the
# Node peer of bench/peer.sh): the
# machine's own when present (they may come from another repository than Debian's)
command -v node >/dev/null && command -v npm >/dev/null || pkgs="$pkgs nodejs npm"
[ "$level" = test ] || [ "$level" = bench ] && pkgs="$pkgs $test_pkgs"
[ "$level" = bench ] && pkgs="$pkgs $bench_pkgs"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "deps: installing$missing" >&2
SUDO=""
if [ "$(id -u)" != 0 ]; then
  command -v sudo >/dev/null || { echo "deps: need root to install:$missing" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing >&2
