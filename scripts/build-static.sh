#!/bin/sh
# scripts/build-static.sh OUT [VERSION]: the release build of spillway, and
# the one place it is written down. The Dockerfile's build stage runs it, and
# deploy/deploytest runs it too and checks what it makes: a static binary
# (no cgo, no ELF interpreter, no shared libraries) that runs in a distroless
# or scratch image, with no build paths in it and VERSION in `spillway
# version`.
#
# POSIX sh, not bash: the build image needs nothing but Go.
set -eu
out="${1:?usage: scripts/build-static.sh OUT [VERSION]}"
version="${2:-dev}"
cd "$(dirname "$0")/.."
CGO_ENABLED=0 exec go build -trimpath -ldflags "-s -w -X main.version=$version" -o "$out" ./cmd/spillway
