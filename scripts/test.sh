#!/usr/bin/env bash
# scripts/test.sh: THE test command of Spillway (CI runs it through .ci/run).
#
# On a fresh Debian machine (root, Go in /usr/local/go) it installs what the
# tests need, then runs every check and fails on the first problem:
#   gofmt -l, go vet, staticcheck, go build, go test -race.
# Installs are idempotent and skipped when already there, so a warm run only
# pays for the checks. Go tools are cached in .cache/bin (git-ignored).
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$REPO"

CACHE_BIN="$REPO/.cache/bin"
STATICCHECK_VERSION="v0.8.2"

export PATH="/usr/local/go/bin:$CACHE_BIN:$PATH"
export DEBIAN_FRONTEND=noninteractive
# Tests must never probe the off-machine EC2 metadata address.
export AWS_EC2_METADATA_DISABLED=true
# Tests that need kcat (or later an emulator) fail instead of skipping here,
# since this script installs them.
export SPILLWAY_TEST_REQUIRE_TOOLS=1

log() { printf '==> %s\n' "$*"; }
die() { printf 'FAIL: %s\n' "$*" >&2; exit 1; }

# step NAME CMD...: run one step and print its time. A failing command stops
# the script through set -e (never call a step inside `if` or `||`, which
# would turn set -e off); the EXIT trap then names the step.
CURRENT_STEP=""
step() {
	CURRENT_STEP="$1"; shift
	local start=$SECONDS
	log "$CURRENT_STEP"
	"$@"
	log "$CURRENT_STEP: ok ($((SECONDS - start))s)"
	CURRENT_STEP=""
}
on_exit() {
	local rc=$?
	if [ "$rc" -ne 0 ] && [ -n "$CURRENT_STEP" ]; then
		printf 'FAIL: step "%s" (exit %d)\n' "$CURRENT_STEP" "$rc" >&2
	fi
}
trap on_exit EXIT

as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# ---------------------------------------------------------------- installs --

# install_apt_tools: kcat (librdkafka's CLI, a non-Go Kafka client for tests)
# and zstd (an independent decompressor to check output files).
install_apt_tools() {
	local missing=()
	command -v kcat >/dev/null 2>&1 || missing+=(kcat)
	command -v zstd >/dev/null 2>&1 || missing+=(zstd)
	if [ "${#missing[@]}" -eq 0 ]; then
		echo "kcat and zstd already installed"
		return 0
	fi
	echo "installing: ${missing[*]}"
	as_root apt-get update -qq
	as_root apt-get install -y -qq --no-install-recommends "${missing[@]}"
	command -v kcat >/dev/null && command -v zstd >/dev/null
}

# install_staticcheck: pinned, built by this Go into .cache/bin; rebuilt when
# the pinned version or the Go version changes.
install_staticcheck() {
	local bin="$CACHE_BIN/staticcheck"
	if [ -x "$bin" ] && go version -m "$bin" 2>/dev/null | grep -q "honnef.co/go/tools[[:space:]]*$STATICCHECK_VERSION" \
		&& [ "$(go version -m "$bin" | head -n1 | awk '{print $2}')" = "$(go env GOVERSION)" ]; then
		echo "staticcheck $STATICCHECK_VERSION already installed"
		return 0
	fi
	mkdir -p "$CACHE_BIN"
	GOBIN="$CACHE_BIN" go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
}

# install_versitygw: S3 emulator (see shared TESTING.md). Not installed yet:
# add `GOBIN="$CACHE_BIN" go install github.com/versity/versitygw/cmd/versitygw@VERSION`
# (about 65 s, so guard it like install_staticcheck) when the S3 tests need it.
install_versitygw() {
	:
}

# install_fake_gcs_server: GCS emulator. Not installed yet; the in-process
# fakestorage package may be enough. If a process is needed:
# `GOBIN="$CACHE_BIN" go install github.com/fsouza/fake-gcs-server@VERSION`.
install_fake_gcs_server() {
	:
}

# install_azurite: Azure Blob emulator. Not installed yet: Node + npm from
# Debian, then `npm install --prefix "$REPO/.cache/azurite" azurite@3.37.0`
# (run azurite-blob with --skipApiVersionCheck --loose).
install_azurite() {
	:
}

install_tools() {
	command -v go >/dev/null 2>&1 || die "go not found (expected in /usr/local/go/bin)"
	go version
	install_apt_tools
	install_staticcheck
	install_versitygw
	install_fake_gcs_server
	install_azurite
}

# ------------------------------------------------------------------ checks --

check_gofmt() {
	local files unformatted
	files="$(find . -type f -name '*.go' -not -path './.*' -not -path '*/testdata/*' -not -path './vendor/*')"
	[ -n "$files" ] || return 0
	# shellcheck disable=SC2086 # word splitting of the file list is wanted
	unformatted="$(gofmt -l $files)"
	if [ -n "$unformatted" ]; then
		echo "gofmt -l lists files that are not formatted (run gofmt -w):"
		echo "$unformatted"
		return 1
	fi
}

run_tests() {
	go test -race -count=1 -timeout 40m ./...
}

main() {
	local start=$SECONDS
	step "install tools" install_tools
	step "gofmt" check_gofmt
	step "go vet" go vet ./...
	step "staticcheck" staticcheck ./...
	step "go build" go build ./...
	step "go test -race" run_tests
	log "all checks passed ($((SECONDS - start))s)"
}

main "$@"
