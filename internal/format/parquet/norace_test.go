//go:build !race

package parquet

const raceEnabled = false
