// Package e2e holds Spillway's end-to-end tests: the real spillway binary,
// run as a subprocess against a broker in another process (kfake, see
// internal/testkit/kfakebroker), writing to a local directory, and checked
// from the outside: exit status, memory used under a cgroup limit, and what
// is in storage.
//
// The package has no code outside its tests; this file only documents it.
// Its tests build their programs once per run, on first use: spillway,
// kfakebroker, testdata's backlog (a producer) and readparquet, and
// testkit's readjsonl (both read the output back). All are built without
// -race, whatever the tests run with: the processes are
// black boxes here (the race detector runs over the same code in the
// packages' own tests), it would change the memory spillway uses under a
// cgroup limit, and it slows producing and decoding about tenfold. The
// heavy tests skip under -short. Every test is t.Parallel (see
// helpers_test.go).
package e2e
