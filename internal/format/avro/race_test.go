//go:build race

package avro

// raceEnabled: the race detector changes allocation and makes the memory
// measurement slow and unrepresentative, so TestCompressorMemory skips.
const raceEnabled = true
