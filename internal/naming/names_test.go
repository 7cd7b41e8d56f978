package naming

import (
	"reflect"
	"testing"
	"time"
)

func TestExtension(t *testing.T) {
	for _, tc := range []struct {
		typ, comp, want string
	}{
		{"jsonl", "none", ".jsonl"},
		{"jsonl", "", ".jsonl"},
		{"jsonl", "gzip", ".jsonl.gz"},
		{"jsonl", "zstd", ".jsonl.zst"},
		{"jsonl", "snappy", ".jsonl.snappy"},
		{"json", "none", ".json"},
		{"json", "gzip", ".json.gz"},
		{"csv", "zstd", ".csv.zst"},
		{"avro", "gzip", ".avro"},
		{"parquet", "snappy", ".parquet"},
		{"", "gzip", ""},
	} {
		if got := Extension(tc.typ, tc.comp); got != tc.want {
			t.Errorf("Extension(%s, %s) = %q, want %q", tc.typ, tc.comp, got, tc.want)
		}
	}
}

func TestSplitExt(t *testing.T) {
	for _, tc := range []struct {
		name, base string
		exts       []string
	}{
		{"t-0-5.jsonl.zst", "t-0-5", []string{"jsonl", "zst"}},
		{"t-0-5.json", "t-0-5", []string{"json"}},
		{"t-0-5", "t-0-5", nil},
		// A template's own dots stay: only known extensions are taken.
		{"a.b.0.5.jsonl", "a.b.0.5", []string{"jsonl"}},
		{"t-0-5.zst", "t-0-5", []string{"zst"}},
		{"t-0-5.bin", "t-0-5", []string{"bin"}},
		{"t-0-5.dat", "t-0-5.dat", nil},
	} {
		base, exts := SplitExt(tc.name)
		if base != tc.base || !reflect.DeepEqual(exts, tc.exts) {
			t.Errorf("SplitExt(%q) = %q, %q; want %q, %q", tc.name, base, exts, tc.base, tc.exts)
		}
		if got := TrimExt(tc.name); got != tc.base {
			t.Errorf("TrimExt(%q) = %q, want %q", tc.name, got, tc.base)
		}
	}
}

func TestNamesKeyAndParse(t *testing.T) {
	for _, tc := range []struct {
		prefix, template, ext string
		v                     Vars
		key                   string
	}{
		{"", "{{topic}}-{{partition}}-{{start_offset}}", ".jsonl.zst", Vars{Topic: "events", Partition: 3, StartOffset: 250}, "events-3-250.jsonl.zst"},
		{"raw/", "{{topic}}/{{partition:padding=true}}/{{start_offset:padding=true}}", ".json", Vars{Topic: "a.b", Partition: 1, StartOffset: 7},
			"raw/a.b/0000000001/00000000000000000007.json"},
		{"p/", "dt={{timestamp:unit=yyyy}}-{{timestamp:unit=MM}}/{{topic}}-{{partition}}-{{start_offset}}", "",
			Vars{Topic: "t", Partition: 0, StartOffset: 9, Time: time.Date(2024, 5, 1, 0, 0, 0, 0, time.UTC)}, "p/dt=2024-05/t-0-9"},
	} {
		n, err := NewNames(tc.prefix, tc.template, tc.ext)
		if err != nil {
			t.Fatal(err)
		}
		key := n.Key(tc.v)
		if key != tc.key {
			t.Errorf("Key(%+v) = %q, want %q", tc.v, key, tc.key)
		}
		got, ok := n.Parse(key)
		if !ok {
			t.Fatalf("Parse(%q) failed", key)
		}
		if got.Vars.Topic != tc.v.Topic || got.Vars.Partition != tc.v.Partition || got.Vars.StartOffset != tc.v.StartOffset {
			t.Errorf("Parse(%q) = %+v, want %+v", key, got.Vars, tc.v)
		}
		if _, exts := SplitExt(tc.ext); !reflect.DeepEqual(got.Exts, exts) {
			t.Errorf("Parse(%q).Exts = %q, want %q", key, got.Exts, exts)
		}
		if start, ok := n.ParsePartition(key, tc.v.Topic, tc.v.Partition); !ok || start != tc.v.StartOffset {
			t.Errorf("ParsePartition(%q) = %d, %v", key, start, ok)
		}
		if _, ok := n.ParsePartition(key, tc.v.Topic, tc.v.Partition+1); ok {
			t.Errorf("ParsePartition(%q) accepts partition %d", key, tc.v.Partition+1)
		}
	}

	n, err := NewNames("raw/", "{{topic}}-{{partition}}-{{start_offset}}", ".jsonl")
	if err != nil {
		t.Fatal(err)
	}
	// Files written before format.compression changed keep their names.
	if got, ok := n.Parse("raw/t-0-5.jsonl.gz"); !ok || !reflect.DeepEqual(got.Exts, []string{"jsonl", "gz"}) {
		t.Errorf("Parse of another compression's file = %+v, %v", got, ok)
	}
	for _, key := range []string{"t-0-5.jsonl", "raw/t-0-x.jsonl", "raw/_spillway/ledger/t/x/0/000/000/000/000.json", "raw/junk.bin"} {
		if got, ok := n.Parse(key); ok {
			t.Errorf("Parse(%q) = %+v, want no match", key, got)
		}
	}
	if p, exact := n.PartitionPrefix("t", 4); p != "raw/t-4-" || !exact {
		t.Errorf("PartitionPrefix = %q, %v", p, exact)
	}
	if _, err := NewNames("", "{{topic}}-{{partition}}", ""); err == nil {
		t.Error("NewNames accepts a template without {{start_offset}}")
	}
}

// An extension set by hand (file.extension) is what keys end with, and
// the format and compression come from the config, not from the name:
// Confluent's ".json" holds JSON lines, Aiven's ".gz" a gzipped csv.
func TestConfiguredExtension(t *testing.T) {
	for _, tc := range []struct {
		prefix, template, ext, format, compression string
		v                                          Vars
		key                                        string
		content                                    []string
	}{
		{"topics/", "{{topic}}/partition={{partition}}/{{topic}}+{{partition}}+{{start_offset:padding=10}}", ".json", "jsonl", "none",
			Vars{Topic: "orders", Partition: 2, StartOffset: 42}, "topics/orders/partition=2/orders+2+0000000042.json", []string{"jsonl"}},
		{"topics/", "{{topic}}/partition={{partition}}/{{topic}}+{{partition}}+{{start_offset:padding=10}}", ".snappy.parquet", "parquet", "snappy",
			Vars{Topic: "orders", Partition: 2, StartOffset: 42}, "topics/orders/partition=2/orders+2+0000000042.snappy.parquet", []string{"parquet"}},
		{"", "{{topic}}-{{partition}}-{{start_offset}}", ".gz", "csv", "gzip",
			Vars{Topic: "t", Partition: 0, StartOffset: 5}, "t-0-5.gz", []string{"csv", "gz"}},
		{"raw/", "{{topic}}-{{partition}}-{{start_offset:padding=true}}", "", "csv", "none",
			Vars{Topic: "t.v1", Partition: 1, StartOffset: 7}, "raw/t.v1-1-00000000000000000007", []string{"csv"}},
	} {
		n, err := NewConfiguredNames(tc.prefix, tc.template, tc.ext, tc.format, tc.compression)
		if err != nil {
			t.Fatal(err)
		}
		key := n.Key(tc.v)
		if key != tc.key {
			t.Errorf("Key = %q, want %q", key, tc.key)
		}
		got, ok := n.Parse(key)
		if !ok || got.Vars.Topic != tc.v.Topic || got.Vars.Partition != tc.v.Partition || got.Vars.StartOffset != tc.v.StartOffset || !reflect.DeepEqual(got.Exts, tc.content) {
			t.Errorf("Parse(%q) = %+v, %v; want exts %q", key, got, ok, tc.content)
		}
		if off, ok := n.ParsePartition(key, tc.v.Topic, tc.v.Partition); !ok || off != tc.v.StartOffset {
			t.Errorf("ParsePartition(%q) = %d, %v", key, off, ok)
		}
		if got := n.ContentExts(key); !reflect.DeepEqual(got, tc.content) {
			t.Errorf("ContentExts(%q) = %q, want %q", key, got, tc.content)
		}
	}
	// "auto" is Extension's, and the name says the content.
	n, err := NewConfiguredNames("", "{{topic}}-{{partition}}-{{start_offset}}", "auto", "jsonl", "zstd")
	if err != nil {
		t.Fatal(err)
	}
	if n.Ext != ".jsonl.zst" || n.Content != nil {
		t.Errorf("auto: Ext %q Content %q", n.Ext, n.Content)
	}
	// With the extension set to none, a file an earlier config wrote with
	// its own extension still reads back.
	n, err = NewConfiguredNames("", "{{topic}}-{{partition}}-{{start_offset}}", "", "jsonl", "none")
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := n.Parse("t-0-9.jsonl.gz"); !ok || got.Vars.StartOffset != 9 || !reflect.DeepEqual(got.Exts, []string{"jsonl", "gz"}) {
		t.Errorf("Parse of an older file = %+v, %v", got, ok)
	}
}
