package config

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	good := []struct {
		in   string
		want Size
	}{
		{"0", 0},
		{"100", 100},
		{"100B", 100},
		{"512KiB", 512 << 10},
		{"512kB", 512_000},
		{"512KB", 512_000},
		{"64MiB", 64 << 20},
		{"64 MiB", 64 << 20},
		{" 64mib ", 64 << 20},
		{"1GB", 1_000_000_000},
		{"1gb", 1_000_000_000},
		{"1GiB", 1 << 30},
		{"2TiB", 2 << 40},
		{"3TB", 3_000_000_000_000},
		{"8388607TiB", 8388607 << 40}, // the largest whole number of TiB
	}
	for _, tt := range good {
		got, err := ParseSize(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}

	bad := []struct{ in, want string }{
		{"", `"" is not a size; use a number with a unit such as 64MiB, 1GB, 512KiB`},
		{"MiB", `"MiB" is not a size; use a number with a unit such as 64MiB, 1GB, 512KiB`},
		{"12XB", `"12XB" is not a size; use a number with a unit such as 64MiB, 1GB, 512KiB (units: B, kB, MB, GB, TB, KiB, MiB, GiB, TiB)`},
		{"12 M", `"12 M" is not a size; use a number with a unit such as 64MiB, 1GB, 512KiB (units: B, kB, MB, GB, TB, KiB, MiB, GiB, TiB)`},
		{"-5MiB", `"-5MiB" is not a size; sizes can't be negative`},
		{"1.5GiB", `"1.5GiB" is not a size; use a whole number with a smaller unit, such as 1536MiB for 1.5GiB`},
		{"8388608TiB", `"8388608TiB" is not a size; it is larger than the maximum, 9223372036854775807 bytes`}, // 2^63
		{"99999999999999999999", `"99999999999999999999" is not a size; it is larger than the maximum, 9223372036854775807 bytes`},
	}
	for _, tt := range bad {
		_, err := ParseSize(tt.in)
		if err == nil || err.Error() != tt.want {
			t.Errorf("ParseSize(%q) error = %v\nwant %s", tt.in, err, tt.want)
		}
	}
}

func TestSizeString(t *testing.T) {
	for _, tt := range []struct {
		in   Size
		want string
	}{
		{0, "0B"},
		{1, "1B"},
		{1000, "1kB"},
		{1024, "1KiB"},
		{1500, "1500B"},
		{8 << 20, "8MiB"},
		{1_000_000_000, "1GB"},
		{1 << 30, "1GiB"},
		{1_000_000_000_000, "1TB"}, // also a whole number of KiB: the smaller number wins
		{3 << 40, "3TiB"},
		{(1 << 20) + 1, "1048577B"},
	} {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("Size(%d).String() = %q, want %q", int64(tt.in), got, tt.want)
		}
		if back, err := ParseSize(tt.in.String()); err != nil || back != tt.in {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in.String(), back, err, int64(tt.in))
		}
	}
	var s Size
	if err := s.Set("2MiB"); err != nil || s != 2<<20 || s.Type() != "size" {
		t.Errorf("Set: %d, %v", s, err)
	}
}

func TestMemoryLimitBytes(t *testing.T) {
	for _, tt := range []struct {
		in    string
		limit int64
		auto  bool
		err   string
	}{
		{"auto", 0, true, ""},
		{"AUTO", 0, true, ""},
		{"512MiB", 512 << 20, false, ""},
		{"2GB", 2e9, false, ""},
		{"lots", 0, false, `backpressure.memory_limit: "lots" is not a size`},
		{"", 0, false, `backpressure.memory_limit: "" is not a size`},
	} {
		limit, auto, err := Backpressure{MemoryLimit: tt.in}.MemoryLimitBytes()
		if limit != tt.limit || auto != tt.auto || (err == nil) != (tt.err == "") ||
			(err != nil && !strings.HasPrefix(err.Error(), tt.err)) {
			t.Errorf("MemoryLimitBytes(%q) = %d, %v, %v; want %d, %v, %q", tt.in, limit, auto, err, tt.limit, tt.auto, tt.err)
		}
	}
}
