package naming

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

func TestRenderTimeZone(t *testing.T) {
	const tpl = "{{timestamp:unit=yyyy}}-{{timestamp:unit=MM}}-{{timestamp:unit=dd}}T{{timestamp:unit=HH}}/{{topic}}-{{partition}}-{{start_offset}}"
	newYear := time.Date(2024, 12, 31, 15, 30, 0, 0, time.UTC)
	for _, tc := range []struct {
		opts []Option
		want string
	}{
		{nil, "2024-12-31T15/t-0-1"},
		{[]Option{Location(nil)}, "2024-12-31T15/t-0-1"},
		{[]Option{Location(mustLoad(t, "Asia/Tokyo"))}, "2025-01-01T00/t-0-1"},
		{[]Option{Location(mustLoad(t, "America/Los_Angeles"))}, "2024-12-31T07/t-0-1"},
		{[]Option{Location(mustLoad(t, "-15:30"))}, "2024-12-31T00/t-0-1"},
	} {
		p, err := Parse(tpl, tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		// The zone Vars.Time carries doesn't matter, only the template's.
		v := Vars{Topic: "t", StartOffset: 1, Time: newYear.In(time.FixedZone("X", 7*3600))}
		if got := p.Render(v); got != tc.want {
			t.Errorf("%v: Render = %q, want %q", p.Location(), got, tc.want)
		}
	}
}

// TestDSTBoundaries: Berlin leaves out 02:00-03:00 in spring and has it
// twice in autumn. Names follow the local clock; in autumn two UTC hours
// share a bucket (and a group), and their files stay apart by start offset.
func TestDSTBoundaries(t *testing.T) {
	berlin := mustLoad(t, "Europe/Berlin")
	tpl, err := Parse(hiveTemplate, Location(berlin))
	if err != nil {
		t.Fatal(err)
	}
	at := func(s string) time.Time {
		ts, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return ts
	}
	for _, tc := range []struct{ utc, want string }{
		// Spring, 2024-03-31: 01:59:59 CET is followed by 03:00 CEST.
		{"2024-03-31T00:59:59Z", "dt=2024-03-31/hour=01/t-0-7"},
		{"2024-03-31T01:00:00Z", "dt=2024-03-31/hour=03/t-0-7"},
		// Autumn, 2024-10-27: 02:00-03:00 happens in CEST, then in CET.
		{"2024-10-26T23:59:59Z", "dt=2024-10-27/hour=01/t-0-7"},
		{"2024-10-27T00:00:00Z", "dt=2024-10-27/hour=02/t-0-7"},
		{"2024-10-27T00:59:59Z", "dt=2024-10-27/hour=02/t-0-7"},
		{"2024-10-27T01:00:00Z", "dt=2024-10-27/hour=02/t-0-7"},
		{"2024-10-27T01:59:59Z", "dt=2024-10-27/hour=02/t-0-7"},
		{"2024-10-27T02:00:00Z", "dt=2024-10-27/hour=03/t-0-7"},
	} {
		v := Vars{Topic: "t", StartOffset: 7, Time: at(tc.utc)}
		if got := tpl.Render(v); got != tc.want {
			t.Errorf("%s: Render = %q, want %q", tc.utc, got, tc.want)
		}
	}
	cest := Vars{Topic: "t", StartOffset: 7, Time: at("2024-10-27T00:30:00Z")}
	cet := Vars{Topic: "t", StartOffset: 9, Time: at("2024-10-27T01:30:00Z")}
	if tpl.Group(cest) != tpl.Group(cet) {
		t.Errorf("the two 02:30s have groups %q and %q, want one", tpl.Group(cest), tpl.Group(cet))
	}
	if tpl.Render(cest) == tpl.Render(cet) {
		t.Errorf("files of the two 02:30s share the name %q", tpl.Render(cest))
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
			y, m, d, h := civil(ts, loc)
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
