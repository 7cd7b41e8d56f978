//go:build race

package jsonfmt

// raceEnabled: the race detector changes allocation and makes the memory
// measurement slow and unrepresentative, so TestLargeValueIsNotCopied skips.
const raceEnabled = true
