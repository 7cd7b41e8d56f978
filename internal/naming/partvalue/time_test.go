package partvalue

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func mustLoad(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := LoadLocation(name)
	if err != nil {
		t.Fatalf("LoadLocation(%q): %v", name, err)
	}
	return loc
}

func TestLoadLocation(t *testing.T) {
	at := time.Date(2024, 7, 1, 12, 0, 0, 0, time.UTC) // summer: Berlin is +2
	for _, tc := range []struct {
		name   string
		offset int // seconds east of UTC at `at`
	}{
		{"UTC", 0},
		{"Z", 0},
		{"Europe/Berlin", 2 * 3600},
		{"America/New_York", -4 * 3600},
		{"Asia/Kolkata", 5*3600 + 1800},
		{"Etc/GMT-3", 3 * 3600}, // IANA's inverted sign
		{"+05:30", 5*3600 + 1800},
		{"-0800", -8 * 3600},
		{"+02", 2 * 3600},
		{"+2", 2 * 3600},
		{"-00:00", 0},
		{"+18:00", 18 * 3600},
		{"UTC+01:00", 3600},
		{"GMT-3", -3 * 3600},
		{"UT+0130", 5400},
	} {
		loc := mustLoad(t, tc.name)
		if _, off := at.In(loc).Zone(); off != tc.offset {
			t.Errorf("LoadLocation(%q): offset %ds, want %ds", tc.name, off, tc.offset)
		}
	}
	for _, tc := range []struct{ name, want string }{
		{"", "time zone is empty"},
		{"Local", `"Local" is the machine's own`},
		{"Europe/Berln", `unknown time zone "Europe/Berln"`},
		{"utc+1", `unknown time zone "utc+1"`},
		{"+18:01", `unknown time zone "+18:01"`},
		{"+19", `unknown time zone "+19"`},
		{"+05:60", `unknown time zone "+05:60"`},
		{"+5:30", `unknown time zone "+5:30"`},
		{"+053", `unknown time zone "+053"`},
		{"UTC+", `unknown time zone "UTC+"`},
		{"+", `unknown time zone "+"`},
		{"../etc/passwd", `unknown time zone "../etc/passwd"`},
		{"PST", `unknown time zone "PST"`},
	} {
		_, err := LoadLocation(tc.name)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("LoadLocation(%q) = %v, want an error containing %q", tc.name, err, tc.want)
		}
	}
}

// TestCivil checks the calendar arithmetic against package time, in zones
// with daylight saving, half-hour and negative offsets, over the range of
// Kafka timestamps.
func TestCivil(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	zones := []*time.Location{time.UTC, mustLoad(t, "Europe/Berlin"), mustLoad(t, "America/St_Johns"),
		mustLoad(t, "Australia/Lord_Howe"), mustLoad(t, "Pacific/Kiritimati"), mustLoad(t, "-15:30")}
	check := func(ts time.Time) {
		for _, loc := range zones {
			y, m, d, h := Civil(ts, loc)
			lt := ts.In(loc)
			wy, wm, wd := lt.Date()
			if y != int64(wy) || m != int64(wm) || d != int64(wd) || h != int64(lt.Hour()) {
				t.Fatalf("civil(%v, %v) = %d-%d-%d %dh, want %v", ts, loc, y, m, d, h, lt)
			}
		}
	}
	for _, ms := range []int64{-1, 0, 1, 951782400000 /* 2000-02-29 */, 4107542400000 /* 2100-03-01 */, 1<<63 - 1} {
		check(time.UnixMilli(ms))
	}
	check(time.Date(-7, 3, 1, 0, 0, 0, 0, time.UTC))
	for range 100000 {
		switch r.IntN(3) {
		case 0:
			check(time.UnixMilli(r.Int64()))
		case 1:
			check(time.UnixMilli(r.Int64N(4102444800000))) // 1970 to 2100
		default:
			check(time.UnixMilli(-1 - r.Int64N(1<<50)))
		}
	}
}
