// Package bytesize is a byte count that the config writes with units
// ("64MiB", "1GB"): parsed, printed and decoded from YAML, the environment
// and flags. A leaf, so that components define their options with it.
package bytesize

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Size is a byte count. In YAML and the environment it takes units:
// "64MiB", "1GB", "512KiB" or a bare number of bytes.
type Size int64

// Byte units. Binary units are what memory and part sizes are usually
// reasoned in; decimal ones are accepted because people write "1GB".
const (
	KiB Size = 1 << 10
	MiB Size = 1 << 20
	GiB Size = 1 << 30
	TiB Size = 1 << 40
)

// sizeUnits is every unit Parse accepts, matched case-insensitively.
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

// Hint is the advice given for anything that does not look like a size.
const Hint = "use a number with a unit such as 64MiB, 1GB, 512KiB"

// Error keeps the input and the advice apart so that a config Problem
// can show them in its own layout.
type Error struct {
	Input string
	Hint  string
}

func (e *Error) Error() string { return fmt.Sprintf("%q is not a size; %s", e.Input, e.Hint) }

// Parse parses a byte count such as "64MiB", "64 MiB", "1GB" (10^9
// bytes), "512KiB", "100B" or a bare integer (bytes). Units are
// case-insensitive; fractions and negative sizes are rejected.
func Parse(s string) (Size, error) {
	in := strings.TrimSpace(s)
	digits := len(in) - len(strings.TrimLeft(in, "0123456789"))
	num, unit := in[:digits], strings.TrimSpace(in[digits:])
	switch {
	case strings.HasPrefix(in, "-"):
		return 0, &Error{s, "sizes can't be negative"}
	case num == "":
		return 0, &Error{s, Hint}
	case strings.HasPrefix(unit, ".") || strings.HasPrefix(unit, ","):
		return 0, &Error{s, "use a whole number with a smaller unit, such as 1536MiB for 1.5GiB"}
	}
	mult := int64(1)
	if unit != "" {
		i := unitIndex(unit)
		if i < 0 {
			return 0, &Error{s, fmt.Sprintf("%s (units: %s)", Hint, unitNames())}
		}
		mult = sizeUnits[i].mult
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > math.MaxInt64/mult {
		return 0, &Error{s, fmt.Sprintf("it is larger than the maximum, %d bytes", int64(math.MaxInt64))}
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
// Parse reads the result back to the same value.
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

// UnmarshalText parses text with Parse.
func (s *Size) UnmarshalText(text []byte) error {
	v, err := Parse(string(text))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// Set parses v with Parse; with String and Type it lets a Size be a
// command-line flag (pflag.Value).
func (s *Size) Set(v string) error { return s.UnmarshalText([]byte(v)) }

// Type names the flag value type in help output.
func (s *Size) Type() string { return "size" }
