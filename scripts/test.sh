#!/usr/bin/env bash
# scripts/test.sh: THE test command of Spillway (CI runs it through .ci/run).
#
# On a fresh Debian machine (root, Go in /usr/local/go) it installs what the
# tests need, then runs every check and fails on the first problem:
#   gofmt -l, go vet, staticcheck, go build, the deployment files
#   (deploy/deploytest), go test -race, and the memory measurements that
#   -race skips.
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
	stop_emulators
}
trap on_exit EXIT
# A signal ends the script through exit, so the EXIT trap stops the emulators.
trap 'exit 130' INT
trap 'exit 143' TERM

as_root() {
	if [ "$(id -u)" -eq 0 ]; then "$@"; else sudo "$@"; fi
}

# ---------------------------------------------------------------- installs --

# install_apt_tools: kcat (librdkafka's CLI, a non-Go Kafka client for tests),
# zstd (an independent decompressor to check output files), and Debian's
# python3-snappy (Google's libsnappy, to read snappy framed files back) and
# python3-avro with its snappy and zstandard codecs (an independent Avro
# reader); it must be Debian's /usr/bin/python3 that imports them.
install_apt_tools() {
	local missing=()
	command -v kcat >/dev/null 2>&1 || missing+=(kcat)
	command -v zstd >/dev/null 2>&1 || missing+=(zstd)
	local mod
	for mod in snappy:python3-snappy avro:python3-avro zstandard:python3-zstandard; do
		/usr/bin/python3 -c "import ${mod%%:*}" >/dev/null 2>&1 || missing+=("${mod#*:}")
	done
	if [ "${#missing[@]}" -eq 0 ]; then
		echo "kcat, zstd, python3-snappy and python3-avro already installed"
		return 0
	fi
	echo "installing: ${missing[*]}"
	as_root apt-get update -qq
	as_root apt-get install -y -qq --no-install-recommends "${missing[@]}"
	command -v kcat >/dev/null && command -v zstd >/dev/null \
		&& /usr/bin/python3 -c "import avro.datafile, snappy, zstandard"
}

# install_prometheus: Debian's prometheus package, for promtool (check and
# unit-test deploy/prometheus/alerts.yaml) and a real Prometheus that
# scrapes a running Spillway (deploy/deploytest/prometheus_test.go). The
# package's service is not started: the tests run their own, on loopback.
install_prometheus() {
	if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
		echo "prometheus and promtool already installed"
		return 0
	fi
	echo "installing: prometheus"
	as_root apt-get update -qq
	as_root apt-get install -y -qq --no-install-recommends prometheus
	promtool --version >/dev/null && prometheus --version >/dev/null
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

# ------------------------------------------------------------ emulators --
# The storage tests run against emulators that nobody here wrote (see shared
# TESTING.md). They are installed once into .cache (git-ignored) and rebuilt
# only when a pin or the Go version changes.

VERSITYGW_VERSION="v1.8.0"
FAKE_GCS_SERVER_VERSION="v1.56.1"
AZURITE_VERSION="3.37.0"

# go_bin_current BIN MODULE VERSION: BIN exists, was built from MODULE at
# VERSION, and by this Go.
go_bin_current() {
	local bin="$1" mod="$2" version="$3"
	[ -x "$bin" ] || return 1
	go version -m "$bin" 2>/dev/null | grep -Eq "^[[:space:]]+mod[[:space:]]+$mod[[:space:]]+$version([[:space:]]|\$)" || return 1
	[ "$(go version -m "$bin" | head -n1 | awk '{print $2}')" = "$(go env GOVERSION)" ]
}

# install_versitygw: the S3 emulator (Apache-2.0); a cold build takes minutes.
install_versitygw() {
	if go_bin_current "$CACHE_BIN/versitygw" github.com/versity/versitygw "$VERSITYGW_VERSION"; then
		echo "versitygw $VERSITYGW_VERSION already installed"
		return 0
	fi
	mkdir -p "$CACHE_BIN"
	GOBIN="$CACHE_BIN" go install "github.com/versity/versitygw/cmd/versitygw@$VERSITYGW_VERSION"
}

# install_fake_gcs_server: the GCS emulator, as a separate program rather
# than the in-process fakestorage package, so that the client and the server
# share no code.
install_fake_gcs_server() {
	if go_bin_current "$CACHE_BIN/fake-gcs-server" github.com/fsouza/fake-gcs-server "$FAKE_GCS_SERVER_VERSION"; then
		echo "fake-gcs-server $FAKE_GCS_SERVER_VERSION already installed"
		return 0
	fi
	mkdir -p "$CACHE_BIN"
	GOBIN="$CACHE_BIN" go install "github.com/fsouza/fake-gcs-server@$FAKE_GCS_SERVER_VERSION"
}

# install_azurite: the Azure Blob emulator, from npm into .cache/azurite. It
# runs on Node 20 despite npm's engine warning.
install_azurite() {
	local dir="$REPO/.cache/azurite"
	# Node trusts only its own CA bundle; where the network inspects TLS,
	# the machine's store holds the CA that npm needs.
	if [ -z "${NODE_EXTRA_CA_CERTS:-}" ] && [ -r /etc/ssl/certs/ca-certificates.crt ]; then
		export NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
	fi
	if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
		echo "installing: nodejs npm"
		as_root apt-get update -qq
		as_root apt-get install -y -qq --no-install-recommends nodejs npm
	fi
	if [ -x "$dir/node_modules/.bin/azurite-blob" ] &&
		[ "$(node -p "require('$dir/node_modules/azurite/package.json').version" 2>/dev/null)" = "$AZURITE_VERSION" ]; then
		echo "azurite $AZURITE_VERSION already installed"
		return 0
	fi
	mkdir -p "$dir"
	npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "azurite@$AZURITE_VERSION"
	[ -x "$dir/node_modules/.bin/azurite-blob" ]
}

# install_duckdb: DuckDB's node package (prebuilt binaries, about 70 MB),
# into .cache/duckdb, for the tests that read output files back with a
# reader nobody here wrote (outside.NewDuckDB). Pinned; reinstalled when the
# pin changes. Needs node and npm, which install_azurite provides.
DUCKDB_NODE_API_VERSION="1.5.6-r.1"
install_duckdb() {
	local dir="$REPO/.cache/duckdb"
	if [ -z "${NODE_EXTRA_CA_CERTS:-}" ] && [ -r /etc/ssl/certs/ca-certificates.crt ]; then
		export NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
	fi
	if [ "$(node -p "require('$dir/node_modules/@duckdb/node-api/package.json').version" 2>/dev/null)" = "$DUCKDB_NODE_API_VERSION" ]; then
		echo "@duckdb/node-api $DUCKDB_NODE_API_VERSION already installed"
		return 0
	fi
	mkdir -p "$dir"
	npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "@duckdb/node-api@$DUCKDB_NODE_API_VERSION"
	# The native binding loads and answers a query, with no network.
	node -e "
const { DuckDBInstance } = require('$dir/node_modules/@duckdb/node-api');
DuckDBInstance.create(':memory:', { autoinstall_known_extensions: 'false' })
  .then((db) => db.connect()).then((c) => c.runAndReadAll('select 42 as x'))
  .then((r) => { if (r.getRowsJson()[0][0] !== 42) process.exit(1); })
  .catch((e) => { console.error(e); process.exit(1); });"
}

# install_browser: Debian's chromium and the playwright-core npm package
# (the driver only, no bundled browser) into .cache/playwright, for the
# status page's browser test (internal/runner/browser_test.go). Pinned;
# reinstalled when the pin changes. The browser runs headless with its
# network features off: this machine's network is closed.
PLAYWRIGHT_CORE_VERSION="1.65.2"
install_browser() {
	if ! [ -x /usr/bin/chromium ]; then
		echo "installing: chromium"
		as_root apt-get update -qq
		as_root apt-get install -y -qq --no-install-recommends chromium
	fi
	/usr/bin/chromium --version
	local dir="$REPO/.cache/playwright"
	if [ -z "${NODE_EXTRA_CA_CERTS:-}" ] && [ -r /etc/ssl/certs/ca-certificates.crt ]; then
		export NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt
	fi
	if [ "$(node -p "require('$dir/node_modules/playwright-core/package.json').version" 2>/dev/null)" = "$PLAYWRIGHT_CORE_VERSION" ]; then
		echo "playwright-core $PLAYWRIGHT_CORE_VERSION already installed"
		return 0
	fi
	mkdir -p "$dir"
	npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "playwright-core@$PLAYWRIGHT_CORE_VERSION"
	node -e "require('$dir/node_modules/playwright-core')"
}

EMULATOR_DIR=""
EMULATOR_PIDS=()

# free_port PREFERRED: PREFERRED if nothing listens there, else a port near
# it that is free (another checkout may be running its own emulators).
free_port() {
	local p
	for p in $(seq "$1" $(($1 + 50))); do
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return 0
		fi
	done
	die "no free port near $1"
}

# start_emulator NAME PORT CMD...: start CMD in the background, logging to
# the temp dir, and wait until it accepts connections on PORT.
start_emulator() {
	local name="$1" port="$2"; shift 2
	local logf="$EMULATOR_DIR/$name.log"
	"$@" >"$logf" 2>&1 &
	local pid=$!
	EMULATOR_PIDS+=("$pid")
	local deadline=$((SECONDS + 60))
	until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
		if ! kill -0 "$pid" 2>/dev/null; then
			cat "$logf" >&2
			die "$name exited before it listened on 127.0.0.1:$port"
		fi
		[ "$SECONDS" -lt "$deadline" ] || { cat "$logf" >&2; die "$name did not listen on 127.0.0.1:$port within 60s"; }
		sleep 0.2
	done
	kill -0 "$pid" 2>/dev/null || die "$name exited; is 127.0.0.1:$port taken?"
	echo "$name: pid $pid, 127.0.0.1:$port, log $logf"
}

# start_emulators: S3, GCS and Azure emulators on loopback ports, with their
# data in a temp dir, and the environment the storage tests read.
start_emulators() {
	EMULATOR_DIR="$(mktemp -d "${TMPDIR:-/tmp}/spillway-emulators.XXXXXX")"
	mkdir -p "$EMULATOR_DIR/s3" "$EMULATOR_DIR/azurite"

	local s3_port gcs_port azure_port
	export AWS_ACCESS_KEY_ID="spillway-test"
	export AWS_SECRET_ACCESS_KEY="spillway-test-secret"
	export AWS_REGION="us-east-1"
	export AWS_EC2_METADATA_DISABLED=true
	s3_port="$(free_port 7070)"
	start_emulator versitygw "$s3_port" \
		"$CACHE_BIN/versitygw" --access "$AWS_ACCESS_KEY_ID" --secret "$AWS_SECRET_ACCESS_KEY" \
		--region "$AWS_REGION" --port "127.0.0.1:$s3_port" --quiet posix "$EMULATOR_DIR/s3"
	export SPILLWAY_TEST_S3_ENDPOINT="http://127.0.0.1:$s3_port"

	# STORAGE_EMULATOR_HOST must equal -public-host exactly, or every read
	# fails with "object doesn't exist".
	gcs_port="$(free_port 4443)"
	start_emulator fake-gcs-server "$gcs_port" \
		"$CACHE_BIN/fake-gcs-server" -scheme http -host 127.0.0.1 -port "$gcs_port" \
		-public-host "127.0.0.1:$gcs_port" -external-url "http://127.0.0.1:$gcs_port" \
		-backend memory -log-level warn
	export STORAGE_EMULATOR_HOST="127.0.0.1:$gcs_port"

	# Azurite's well-known development account (public, not a secret).
	# --disableTelemetry: it would otherwise send usage data off the machine.
	# A 1 s keep-alive lets the tests wait out the SDK's idle connections
	# (private to the SDK) before goleak looks.
	azure_port="$(free_port 10000)"
	start_emulator azurite "$azure_port" \
		"$REPO/.cache/azurite/node_modules/.bin/azurite-blob" --blobHost 127.0.0.1 --blobPort "$azure_port" \
		--location "$EMULATOR_DIR/azurite" --skipApiVersionCheck --loose --silent --disableTelemetry \
		--blobKeepAliveTimeout 1
	export SPILLWAY_TEST_AZURE_CONNECTION_STRING="DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==;BlobEndpoint=http://127.0.0.1:$azure_port/devstoreaccount1;"
}

# stop_emulators: kill what start_emulators started (by pid) and remove
# their data. Runs from the EXIT trap, so it must not fail.
stop_emulators() {
	local pid
	for pid in "${EMULATOR_PIDS[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	for pid in "${EMULATOR_PIDS[@]}"; do
		wait "$pid" 2>/dev/null || true
	done
	EMULATOR_PIDS=()
	if [ -n "$EMULATOR_DIR" ]; then
		rm -rf "$EMULATOR_DIR"
		EMULATOR_DIR=""
	fi
}

# setup_memory_cgroup: the bounded-memory tests (internal/e2e) start
# spillway in a memory cgroup of its own with a hard limit, and fail here
# (SPILLWAY_TEST_REQUIRE_TOOLS=1) where they can't create one. As root:
# - cgroup v2: a cgroup that holds processes can't enable controllers for
#   its children, and the tests' own does, so this makes an empty cgroup
#   with +memory for its children and exports it as
#   SPILLWAY_TEST_CGROUP_PARENT. The root cgroup is exempt from that rule,
#   so +memory can be enabled there first.
# - cgroup v1: the tests create their cgroups below their own in the memory
#   hierarchy, which root can write once the controller is mounted.
# It checks the result by creating and removing a child, and says what is
# missing; the tests' own failure then repeats it.
CGROUP_V2_PARENT="/sys/fs/cgroup/spillway-test"
setup_memory_cgroup() {
	if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
		grep -qw memory /sys/fs/cgroup/cgroup.controllers ||
			die "cgroup v2 without the memory controller (/sys/fs/cgroup/cgroup.controllers): boot with it enabled"
		if ! grep -qw memory /sys/fs/cgroup/cgroup.subtree_control; then
			as_root sh -c 'echo +memory > /sys/fs/cgroup/cgroup.subtree_control' ||
				die "cannot enable the memory controller in /sys/fs/cgroup/cgroup.subtree_control: in a container, /sys/fs/cgroup must be writable"
		fi
		as_root mkdir -p "$CGROUP_V2_PARENT"
		as_root sh -c "echo +memory > '$CGROUP_V2_PARENT/cgroup.subtree_control'" ||
			die "cannot enable the memory controller below $CGROUP_V2_PARENT"
		export SPILLWAY_TEST_CGROUP_PARENT="$CGROUP_V2_PARENT"
		probe_memory_cgroup "$CGROUP_V2_PARENT" memory.max
		return 0
	fi
	local rel
	rel="$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup)"
	if [ -z "$rel" ] || [ ! -d /sys/fs/cgroup/memory ]; then
		as_root mkdir -p /sys/fs/cgroup/memory
		as_root mount -t cgroup -o memory cgroup /sys/fs/cgroup/memory ||
			die "no cgroup v1 memory controller at /sys/fs/cgroup/memory, and mounting it failed"
		rel="$(awk -F: '$2 ~ /(^|,)memory(,|$)/ {print $3}' /proc/self/cgroup)"
	fi
	probe_memory_cgroup "/sys/fs/cgroup/memory$rel" memory.limit_in_bytes
}

# probe_memory_cgroup PARENT LIMITFILE: a child of PARENT can be created and
# limited, as the tests will.
probe_memory_cgroup() {
	local probe="$1/spillway-probe-$$"
	mkdir "$probe" || die "cannot create a memory cgroup in $1: the bounded-memory tests need one (run as root)"
	if ! echo $((64 << 20)) >"$probe/$2"; then
		rmdir "$probe"
		die "cannot set $2 in a memory cgroup under $1"
	fi
	rmdir "$probe"
	echo "memory cgroups can be created in $1"
}

install_tools() {
	command -v go >/dev/null 2>&1 || die "go not found (expected in /usr/local/go/bin)"
	go version
	install_apt_tools
	install_prometheus
	install_staticcheck
	install_versitygw
	install_fake_gcs_server
	install_azurite
	install_duckdb
	install_browser
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

# check_deploy: deploy/deploytest is a Go module of its own, so that the
# Kubernetes API types and kustomize stay out of go.mod. Its tests build the
# release binary as the Dockerfile does (scripts/build-static.sh, a build of
# its own: -trimpath, no cgo) and check the Dockerfile and deploy/kubernetes
# against it, and runs promtool and a Prometheus on deploy/prometheus. The
# timeout leaves room for that build, cold, on a busy machine.
check_deploy() {
	(cd deploy/deploytest && go vet ./... && staticcheck ./... && go test -count=1 -timeout 30m ./...)
}

# run_tests: go test -race on every package, the longest first. go test
# runs -p packages at once (one per core) and starts them in the order
# given; ./... would start internal/e2e (the longest, about 9 minutes on 2
# cores) after most others, so the run took e2e's time on top of theirs.
# Listed first, e2e and runner start at once, and the short packages fill
# the other core beside e2e. -parallel 4 (runner's TestMain sets it too):
# the parallel tests of e2e and runner mostly wait (producers' pauses, slow
# or stalled storage, group joins, session timeouts; runner used 16% of a
# core at -parallel 2), so four at a time fill the cores in less wall time
# for the same CPU.
SLOW_PACKAGES=(./internal/e2e ./internal/runner ./internal/storage ./cmd/spillway ./internal/sink)
run_tests() {
	local mod pkgs=() p
	mod="$(go list -m)"
	local slow=" "
	for p in "${SLOW_PACKAGES[@]}"; do slow+="$mod/${p#./} "; done
	while IFS= read -r p; do
		[[ "$slow" == *" $p "* ]] || pkgs+=("$p")
	done < <(go list ./...)
	go test -race -count=1 -parallel 4 -timeout 40m "${SLOW_PACKAGES[@]}" "${pkgs[@]}"
}

# check_memory_figures: the format tests that measure memory and allocations
# skip under -race (the detector changes both), so the -race run never
# re-measures the constants the byte budget is built on. This runs them
# without it, selected by name so that they are found wherever in
# internal/format they live, and fails if one skips or none ran.
MEMORY_TESTS='Memory|Alloc|LargeValueIsNotCopied|BigRecordCost'
check_memory_figures() {
	local out
	out="$(go test -count=1 -v -run "$MEMORY_TESTS" ./internal/format/... 2>&1)" || { echo "$out"; return 1; }
	if grep -q -- '--- SKIP' <<<"$out"; then
		echo "$out"
		echo "a memory measurement skipped without -race; it must run in CI"
		return 1
	fi
	local ran
	ran="$(grep -c -- '^--- PASS' <<<"$out" || true)"
	if [ "$ran" -eq 0 ]; then
		echo "$out"
		echo "no test in ./internal/format/... matches -run '$MEMORY_TESTS'"
		return 1
	fi
	grep -E -- '^(--- PASS|ok )' <<<"$out"
}

main() {
	local start=$SECONDS
	step "install tools" install_tools
	step "gofmt" check_gofmt
	step "go vet" go vet ./...
	step "staticcheck" staticcheck ./...
	step "go build" go build ./...
	step "deploy checks" check_deploy
	step "start emulators" start_emulators
	step "memory cgroup" setup_memory_cgroup
	step "go test -race" run_tests
	step "memory figures (no -race)" check_memory_figures
	log "all checks passed ($((SECONDS - start))s)"
}

# serve_emulators: for developing storage tests. It installs the tools, starts
# the emulators, writes their environment to .cache/emulators.env (source it
# in another shell), and keeps them up until interrupted.
serve_emulators() {
	install_tools
	start_emulators
	local envf="$REPO/.cache/emulators.env"
	{
		for v in AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY AWS_REGION AWS_EC2_METADATA_DISABLED \
			SPILLWAY_TEST_S3_ENDPOINT STORAGE_EMULATOR_HOST SPILLWAY_TEST_AZURE_CONNECTION_STRING; do
			printf 'export %s=%q\n' "$v" "${!v}"
		done
	} >"$envf"
	log "emulators up; source $envf (Ctrl-C or SIGTERM stops them)"
	# wait, not a foreground sleep: bash runs the INT/TERM trap (which stops
	# the emulators) only once the foreground command ends.
	while :; do
		sleep 3600 &
		wait $!
	done
}

case "${1:-}" in
"") main ;;
emulators) serve_emulators ;;
*) die "usage: $0 [emulators]" ;;
esac
