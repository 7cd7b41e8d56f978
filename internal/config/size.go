package config

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Byte units. Binary units are what memory and part sizes are usually
// reasoned in; decimal ones are accepted because people write "1GB".
const (
	KiB Size = 1 << 10
	MiB Size = 1 << 20
	GiB Size = 1 << 30
	TiB Size = 1 << 40
)

// sizeUnits is every unit ParseSize accepts, matched case-insensitively.
// The order is the one shown to users and the one String tries.
var sizeUnits = []struct {
	name string
	mult int64
}{
	{"B", 1},
	{"kB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12},
	{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
}

func unitNames() string {
	names := make([]string, len(sizeUnits))
	for i, u := range sizeUnits {
		names[i] = u.name
	}
	return strings.Join(names, ", ")
}

// sizeHint is the advice given for anything that does not look like a size.
const sizeHint = "use a number with a unit such as 64MiB, 1GB, 512KiB"

// sizeError keeps the input and the advice apart so that a config Problem
// can show them in its own layout.
type sizeError struct {
	input string
	hint  string
}

func (e *sizeError) Error() string { return fmt.Sprintf("%q is not a size; %s", e.input, e.hint) }

// ParseSize parses a byte count such as "64MiB", "64 MiB", "1GB" (10^9
// bytes), "512KiB", "100B" or a bare integer (bytes). Units are
// case-insensitive; fractions and negative sizes are rejected.
func ParseSize(s string) (Size, error) {
	in := strings.TrimSpace(s)
	digits := len(in) - len(strings.TrimLeft(in, "0123456789"))
	num, unit := in[:digits], strings.TrimSpace(in[digits:])
	switch {
	case strings.HasPrefix(in, "-"):
		return 0, &sizeError{s, "sizes can't be negative"}
	case num == "":
		return 0, &sizeError{s, sizeHint}
	case strings.HasPrefix(unit, ".") || strings.HasPrefix(unit, ","):
		return 0, &sizeError{s, "use a whole number with a smaller unit, such as 1536MiB for 1.5GiB"}
	}
	mult := int64(1)
	if unit != "" {
		i := unitIndex(unit)
		if i < 0 {
			return 0, &sizeError{s, fmt.Sprintf("%s (units: %s)", sizeHint, unitNames())}
		}
		mult = sizeUnits[i].mult
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > math.MaxInt64/mult {
		return 0, &sizeError{s, fmt.Sprintf("it is larger than the maximum, %d bytes", int64(math.MaxInt64))}
	}
	return Size(n * mult), nil
}

func unitIndex(unit string) int {
	for i, u := range sizeUnits {
		if strings.EqualFold(u.name, unit) {
			return i
		}
	}
	return -1
}

// String renders s in the unit that gives the smallest whole number, such as
// "8MiB" or "1GB", and in bytes ("1000B") when no larger unit is exact.
// ParseSize reads the result back to the same value.
func (s Size) String() string {
	if s == 0 {
		return "0B"
	}
	best := sizeUnits[0]
	for _, u := range sizeUnits[1:] {
		if int64(s)%u.mult == 0 && u.mult > best.mult {
			best = u
		}
	}
	return fmt.Sprintf("%d%s", int64(s)/best.mult, best.name)
}

// MarshalText renders s as String does, so that encoders print "8MiB".
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText parses text with ParseSize.
func (s *Size) UnmarshalText(text []byte) error {
	v, err := ParseSize(string(text))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Set parses v with ParseSize; with String and Type it lets a Size be a
// command-line flag (pflag.Value).
func (s *Size) Set(v string) error { return s.UnmarshalText([]byte(v)) }

// Type names the flag value type in help output.
func (s *Size) Type() string { return "size" }

// MemoryLimitBytes interprets memory_limit. auto is true when the limit is
// "auto" (case-insensitive), meaning: use the cgroup limit, else a safe
// default; the caller decides both, since only it can read the cgroup.
// Otherwise limit is the parsed size in bytes.
func (b Backpressure) MemoryLimitBytes() (limit int64, auto bool, err error) {
	if strings.EqualFold(strings.TrimSpace(b.MemoryLimit), "auto") {
		return 0, true, nil
	}
	v, err := ParseSize(b.MemoryLimit)
	if err != nil {
		return 0, false, fmt.Errorf("backpressure.memory_limit: %w", err)
	}
	return int64(v), false, nil
}

// DiskLimitBytes interprets disk_limit as MemoryLimitBytes does
// memory_limit: auto is true for "auto", which the caller resolves from
// spool_dir's file system (see DiskAutoPercent).
func (b Backpressure) DiskLimitBytes() (limit int64, auto bool, err error) {
	if strings.EqualFold(strings.TrimSpace(b.DiskLimit), "auto") {
		return 0, true, nil
	}
	v, err := ParseSize(b.DiskLimit)
	if err != nil {
		return 0, false, fmt.Errorf("backpressure.disk_limit: %w", err)
	}
	return int64(v), false, nil
}

// DiskAutoPercent is the share of the space free on spool_dir's file
// system, when Spillway starts, that disk_limit auto takes.
const DiskAutoPercent = 80

// MinDiskLimit is the smallest disk_limit: a few batches of records.
const MinDiskLimit = 16 * MiB
