package naming

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

const (
	hiveTemplate    = "dt={{timestamp:unit=yyyy}}-{{timestamp:unit=MM}}-{{timestamp:unit=dd}}/hour={{timestamp:unit=HH}}/{{topic}}-{{partition}}-{{start_offset}}"
	hiveKeyTemplate = "dt={{timestamp:unit=yyyy}}-{{timestamp:unit=MM}}-{{timestamp:unit=dd}}/hour={{timestamp:unit=HH}}/key={{key}}/{{topic}}-{{partition}}-{{start_offset}}"
)

func TestTemplateKinds(t *testing.T) {
	for _, tc := range []struct {
		tpl          string
		latestPerKey bool
		splits       bool
	}{
		{defaultTemplate, false, false},
		{"{{topic}}/{{partition:padding=true}}/{{start_offset:padding=true}}", false, false},
		{hiveTemplate, false, true},
		{hiveKeyTemplate, false, true},
		{"{{topic}}-{{partition}}-{{key}}-{{start_offset}}", false, true},
		{"{{key}}", true, true},
		{"{{ key }}", true, true},
		{"{{topic}}/{{partition}}/{{key}}", true, true},
		{"{{topic}}-{{key}}", true, true},
		{"latest/{{key}}.json", true, true},
		{"dt={{timestamp:unit=yyyy}}-{{timestamp:unit=MM}}-{{timestamp:unit=dd}}/{{key}}", true, true},
	} {
		tpl := mustParse(t, tc.tpl)
		if got := tpl.LatestPerKey(); got != tc.latestPerKey {
			t.Errorf("%s: LatestPerKey = %v, want %v", tc.tpl, got, tc.latestPerKey)
		}
		if got := tpl.SplitsPartition(); got != tc.splits {
			t.Errorf("%s: SplitsPartition = %v, want %v", tc.tpl, got, tc.splits)
		}
	}
}

func TestLatestPerKeyRenderAndMatch(t *testing.T) {
	tpl := mustParse(t, "{{topic}}/{{partition}}/{{key}}")
	v := Vars{Topic: "users", Partition: 4, StartOffset: 99, Key: []byte("id/17")}
	name := tpl.Render(v)
	if name != "users/4/id!2F17" {
		t.Fatalf("Render = %q", name)
	}
	// Every record of a key has the one name: the offset is not in it.
	v.StartOffset = 100
	if again := tpl.Render(v); again != name || tpl.Group(v) != name {
		t.Errorf("Render = %q, Group = %q; want %q for any offset", again, tpl.Group(v), name)
	}
	m, ok := tpl.Match(name)
	if !ok || m.Topic != "users" || m.Partition != 4 || string(m.Key) != "id/17" || m.StartOffset != 0 {
		t.Errorf("Match(%q) = %+v, %v", name, m, ok)
	}
	if prefix, exact := tpl.PartitionPrefix("users", 4); prefix != "users/4/" || exact {
		t.Errorf("PartitionPrefix = %q, %v; want users/4/, false", prefix, exact)
	}
	if off, ok := tpl.MatchPartition(name, "users", 4); !ok || off != 0 {
		t.Errorf("MatchPartition = %d, %v; want 0, true", off, ok)
	}
	null := tpl.Render(Vars{Topic: "users", Partition: 4})
	if null != "users/4/null" {
		t.Errorf("null key: Render = %q, want users/4/null", null)
	}
	if m, ok := tpl.Match(null); !ok || m.Key != nil {
		t.Errorf("Match(%q) = %+v, %v; want a null key", null, m, ok)
	}
}

func TestHiveTemplate(t *testing.T) {
	tpl, err := Parse(hiveKeyTemplate, Location(mustLoad(t, "Europe/Berlin")))
	if err != nil {
		t.Fatal(err)
	}
	v := Vars{
		Topic: "orders", Partition: 3, StartOffset: 1200,
		Time: time.Date(2024, 12, 31, 23, 15, 0, 0, time.UTC), // 00:15 on New Year's Day in Berlin
		Key:  []byte("customer 42"),
	}
	name := tpl.Render(v)
	if want := "dt=2025-01-01/hour=00/key=customer!2042/orders-3-1200"; name != want {
		t.Fatalf("Render = %q, want %q", name, want)
	}
	if g, want := tpl.Group(v), "dt=2025-01-01/hour=00/key=customer!2042/orders-3-"; g != want {
		t.Errorf("Group = %q, want %q", g, want)
	}
	m, ok := tpl.Match(name)
	if !ok || m.Topic != "orders" || m.Partition != 3 || m.StartOffset != 1200 || string(m.Key) != "customer 42" {
		t.Errorf("Match(%q) = %+v, %v", name, m, ok)
	}
	if prefix, exact := tpl.PartitionPrefix("orders", 3); prefix != "dt=" || exact {
		t.Errorf("PartitionPrefix = %q, %v; want dt=, false", prefix, exact)
	}
	if off, ok := tpl.MatchPartition(name, "orders", 3); !ok || off != 1200 {
		t.Errorf("MatchPartition = %d, %v", off, ok)
	}
	if _, ok := tpl.MatchPartition(name, "orders", 4); ok {
		t.Errorf("MatchPartition matched another partition")
	}
	plain := mustParse(t, hiveTemplate)
	if got, want := plain.Render(v), "dt=2024-12-31/hour=23/orders-3-1200"; got != want {
		t.Errorf("UTC: Render = %q, want %q", got, want)
	}
}

// TestGroup: records of one partition share a group exactly when they
// share a time bucket and a key, whatever their offsets.
func TestGroup(t *testing.T) {
	def := mustParse(t, defaultTemplate)
	hive := mustParse(t, hiveKeyTemplate)
	t0 := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	base := Vars{Topic: "t", Partition: 1, StartOffset: 10, Time: t0, Key: []byte("k")}
	with := func(f func(*Vars)) Vars { v := base; f(&v); return v }
	for _, tc := range []struct {
		name      string
		v         Vars
		defSame   bool // same group as base under the default template
		hiveSame  bool // under the Hive template with {{key}}
		defSplits bool
	}{
		{"another offset", with(func(v *Vars) { v.StartOffset = 99 }), true, true, false},
		{"same hour", with(func(v *Vars) { v.Time = t0.Add(50 * time.Minute) }), true, true, false},
		{"next hour", with(func(v *Vars) { v.Time = t0.Add(time.Hour) }), true, false, false},
		{"next day, same hour", with(func(v *Vars) { v.Time = t0.Add(24 * time.Hour) }), true, false, false},
		{"another key", with(func(v *Vars) { v.Key = []byte("k2") }), true, false, false},
		{"null key", with(func(v *Vars) { v.Key = nil }), true, false, false},
		{"empty key", with(func(v *Vars) { v.Key = []byte{} }), true, false, false},
		{"another partition", with(func(v *Vars) { v.Partition = 2 }), false, false, false},
	} {
		if got := def.Group(tc.v) == def.Group(base); got != tc.defSame {
			t.Errorf("%s: default template: same group = %v, want %v", tc.name, got, tc.defSame)
		}
		if got := hive.Group(tc.v) == hive.Group(base); got != tc.hiveSame {
			t.Errorf("%s: Hive template: same group = %v, want %v", tc.name, got, tc.hiveSame)
		}
	}
	if g := def.Group(base); g != "t-1-" {
		t.Errorf("default template: Group = %q, want t-1-", g)
	}
}

// TestGroupIdentifiesNames checks, for random records of one topic
// partition, that equal groups mean equal names at any start offset, and
// different groups mean different names at every start offset: a record's
// group finds its open file, and files of different groups never collide.
func TestGroupIdentifiesNames(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	t0 := time.Date(2024, 10, 26, 22, 0, 0, 0, time.UTC)
	berlin := Location(mustLoad(t, "Europe/Berlin"))
	for _, src := range []string{
		hiveKeyTemplate,
		"{{topic}}-{{partition}}-{{key}}-{{start_offset}}",
		"{{key}}-{{timestamp:unit=HH}}-{{topic}}-{{partition}}-{{start_offset}}",
		"{{start_offset}}.{{key}}.{{timestamp:unit=dd}}{{timestamp:unit=HH}}.{{topic}}.{{partition}}",
		"{{topic}}/{{partition}}/{{key}}",
	} {
		tpl, err := Parse(src, berlin)
		if err != nil {
			t.Fatal(err)
		}
		vars := make([]Vars, 200)
		for i := range vars {
			key := make([]byte, r.IntN(5))
			for j := range key {
				key[j] = "1-a._/!0"[r.IntN(8)]
			}
			if r.IntN(10) == 0 {
				key = nil
			}
			vars[i] = Vars{Topic: "t-1", Partition: 2, Key: key,
				Time: t0.Add(time.Duration(r.IntN(6*3600)) * time.Second)}
		}
		for i, a := range vars {
			for _, b := range vars[i+1:] {
				same := tpl.Group(a) == tpl.Group(b)
				for _, offs := range [][2]int64{{0, 0}, {1, 10}, {11, 1}, {123, 45}} {
					a.StartOffset, b.StartOffset = offs[0], offs[1]
					na, nb := tpl.Render(a), tpl.Render(b)
					if same && offs[0] == offs[1] && na != nb {
						t.Fatalf("%s: same group %q, names %q and %q", src, tpl.Group(a), na, nb)
					}
					if !same && na == nb {
						t.Fatalf("%s: groups %q and %q share the name %q", src, tpl.Group(a), tpl.Group(b), na)
					}
				}
			}
		}
	}
}

func TestAppendGroupAllocates(t *testing.T) {
	berlin := mustLoad(t, "Europe/Berlin")
	for _, src := range []string{defaultTemplate, hiveKeyTemplate} {
		tpl, err := Parse(src, Location(berlin))
		if err != nil {
			t.Fatal(err)
		}
		v := benchVars()
		buf := make([]byte, 0, 256)
		groups := map[string]int{tpl.Group(v): 1}
		found := 0
		allocs := testing.AllocsPerRun(100, func() {
			buf = tpl.AppendGroup(buf[:0], v)
			found += groups[string(buf)]
		})
		if found == 0 {
			t.Errorf("%s: the group was not found", src)
		}
		if allocs != 0 {
			t.Errorf("%s: AppendGroup and a map lookup allocate %.1f times, want 0", src, allocs)
		}
	}
}

func benchVars() Vars {
	return Vars{
		Topic: "events.orders", Partition: 12, StartOffset: 123456789,
		Time: time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC),
		Key:  []byte("3f2b9c4e-8d1a-4e57-9b0c-2a6d5e7f8a91"),
	}
}

func BenchmarkGroup(b *testing.B) {
	berlin := mustLoad(b, "Europe/Berlin")
	long := benchVars()
	long.Key = []byte(strings.Repeat("user/", 100))
	for _, bc := range []struct {
		name, tpl string
		v         Vars
	}{
		{"default", defaultTemplate, benchVars()},
		{"hive-key", hiveKeyTemplate, benchVars()},
		{"hive-key-500B-key", hiveKeyTemplate, long},
	} {
		tpl, err := Parse(bc.tpl, Location(berlin))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(bc.name, func(b *testing.B) {
			buf := make([]byte, 0, 256)
			b.ReportAllocs()
			for b.Loop() {
				buf = tpl.AppendGroup(buf[:0], bc.v)
			}
		})
		b.Run(bc.name+"-string", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = tpl.Group(bc.v)
			}
		})
	}
}

func BenchmarkRenderKey(b *testing.B) {
	tpl, err := Parse(hiveKeyTemplate, Location(mustLoad(b, "Europe/Berlin")))
	if err != nil {
		b.Fatal(err)
	}
	v := benchVars()
	b.ReportAllocs()
	for b.Loop() {
		_ = tpl.Render(v)
	}
}

func ExampleTemplate_AppendGroup() {
	tpl, _ := Parse(hiveKeyTemplate)
	v := Vars{Topic: "orders", Partition: 3, StartOffset: 1200,
		Time: time.Date(2024, 12, 31, 23, 15, 0, 0, time.UTC), Key: []byte("a/b")}
	fmt.Println(string(tpl.AppendGroup(nil, v)))
	fmt.Println(tpl.Render(v))
	// Output:
	// dt=2024-12-31/hour=23/key=a!2Fb/orders-3-
	// dt=2024-12-31/hour=23/key=a!2Fb/orders-3-1200
}
