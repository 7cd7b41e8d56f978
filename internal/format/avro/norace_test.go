//go:build !race

package avro

const raceEnabled = false
