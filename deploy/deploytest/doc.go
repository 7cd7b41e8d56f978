// Package deploytest checks the deployment files offline: the Dockerfile,
// the Kubernetes manifests under deploy/kubernetes, and the alert rules
// under deploy/prometheus (with promtool, and a real Prometheus that
// scrapes the release binary). It is a module of
// its own so that the Kubernetes API types and kustomize stay out of
// Spillway's go.mod; scripts/test.sh runs it.
//
// It holds tests only. See docs/design.md, "Deployment".
package deploytest
