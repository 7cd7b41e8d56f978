//go:build !race

package main

// raceEnabled tells TestMain to build the spillway binary with -race too, so
// that the binary tests also catch data races in the process they start.
const raceEnabled = false
