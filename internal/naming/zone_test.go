package naming

import (
	"testing"
	"time"

	"github.com/spillway/spillway/internal/naming/partvalue"
)

func mustLoad(t testing.TB, name string) *time.Location {
	t.Helper()
	loc, err := partvalue.LoadLocation(name)
	if err != nil {
		t.Fatalf("LoadLocation(%q): %v", name, err)
	}
	return loc
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
