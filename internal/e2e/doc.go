// Package e2e holds Spillway's end-to-end tests: the real spillway binary,
// run as a subprocess against a broker in another process (kfake, see
// internal/testkit/kfakebroker), writing to a local directory, and checked
// from the outside: exit status, memory used under a cgroup limit, and what
// is in storage.
//
// The package has no code outside its tests; this file only documents it.
// Its tests build both binaries once per run (TestMain). The heavy ones skip
// under -short.
package e2e
