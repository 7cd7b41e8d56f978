# Spillway's container image: a static binary on distroless, run as a
# non-root user. Build it with
#
#   docker build --build-arg VERSION=$(git describe --tags --always) -t spillway .
#
# deploy/deploytest checks this file (the base images, the user, the port)
# and runs the build stage's command, scripts/build-static.sh, to prove it
# makes a static binary.

# The Go of go.mod's go line: deploy/deploytest checks they are the same.
ARG GO_VERSION=1.26.8

FROM golang:${GO_VERSION}-trixie AS build
WORKDIR /src
# Modules first, in a layer of their own, so that a change to the source
# does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN ./scripts/build-static.sh /out/spillway "$VERSION"

# static: CA certificates (TLS to the brokers and the stores) and /tmp,
# no libc, no shell. Time zones are built into the binary. nonroot is uid
# and gid 65532.
FROM gcr.io/distroless/static-debian13:nonroot
COPY --from=build /out/spillway /usr/local/bin/spillway
USER 65532:65532
# Spillway writes nothing locally with an object store (parts are buffered
# in memory, under the budget); a file:// store needs a volume of its own.
# The admin endpoint: /metrics, /healthz, /readyz, /status. Nothing else
# listens. admin.listen must be 0.0.0.0:8080 (its default is loopback).
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/spillway"]
CMD ["run", "--config", "/etc/spillway/spillway.yaml"]
