//go:build !race

package jsonfmt

const raceEnabled = false
