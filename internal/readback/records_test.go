package readback

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/storage"
	"github.com/spillway/spillway/internal/testkit/datafiles"
)

func TestScanRecord(t *testing.T) {
	deep := strings.Repeat("[", 20_000) + strings.Repeat("]", 20_000)
	for _, tc := range []struct {
		in     string
		offset int64
		has    bool
		bad    string // part of the error, "" for none
	}{
		{in: `{"key":"k","value":{"a":[1,2.5e3,true,null]},"offset":42,"timestamp":1}`, offset: 42, has: true},
		{in: ` { "offset" : 0 } `, offset: 0, has: true},
		{in: `{"value":{"offset":7},"offset":8}`, offset: 8, has: true},
		{in: `{"value":{"offset":7}}`},
		{in: `{"value":` + deep + `,"offset":3}`, offset: 3, has: true},
		{in: `"just a string \" \\ \u00e9"`},
		{in: `-12.5e-3`},
		{in: `null`},
		{in: `[]`},
		{in: `{}`},
		{in: `{"offset":9223372036854775807}`, offset: 1<<63 - 1, has: true},
		{in: ``, bad: "end of JSON"},
		{in: `{"offset":1`, bad: "end of JSON"},
		{in: `{"offset":1}}`, bad: "after the value"},
		{in: `{"offset":1} x`, bad: "after the value"},
		{in: `{"offset":1.5}`, bad: "not an integer"},
		{in: `{"offset":"1"}`, bad: "not an integer"},
		{in: `{"offset":[1]}`, bad: "not an integer"},
		{in: `{"offset":1,"offset":2}`, bad: "twice"},
		{in: `{"offset":01}`, bad: "invalid"},
		{in: `{"a":tru}`, bad: "invalid"},
		{in: `{a:1}`, bad: "key must be a string"},
		{in: `{"a" 1}`, bad: "missing ':'"},
		{in: `["a",]`, bad: "invalid"},
		{in: `[1 2]`, bad: "invalid"},
		{in: "\"tab\tinside\"", bad: "control character"},
		{in: `"\x"`, bad: "bad escape"},
		{in: `"\u12"`, bad: `\u`},
		{in: `{"a":1]`, bad: "invalid"},
		{in: `[` + deep, bad: "end of JSON"},
	} {
		off, has, err := scanRecord([]byte(tc.in))
		name := tc.in
		if len(name) > 60 {
			name = name[:60] + "..."
		}
		switch {
		case tc.bad == "" && err != nil:
			t.Errorf("scanRecord(%s): %v", name, err)
		case tc.bad != "" && (err == nil || !strings.Contains(err.Error(), tc.bad)):
			t.Errorf("scanRecord(%s) = %v, want an error with %q", name, err, tc.bad)
		case tc.bad == "" && (off != tc.offset || has != tc.has):
			t.Errorf("scanRecord(%s) = %d, %v; want %d, %v", name, off, has, tc.offset, tc.has)
		}
	}
}

// FuzzScanRecord holds scanRecord to encoding/json's idea of one valid
// value (inputs this short can't reach its nesting limit), and to its
// reading of the top-level offset.
func FuzzScanRecord(f *testing.F) {
	for _, s := range []string{`{"offset":1,"value":{"a":[1,"x",null]}}`, `[1,2]`, `"a\"b"`, `{"offset":-0}`, `1e5`, `{"a":{"offset":2}}`, ` true `, `{"offset":1.0}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		off, has, err := scanRecord(b)
		valid := json.Valid(b)
		if bytes.Contains(b, []byte(`"offset"`)) {
			// scanRecord refuses more: an offset that isn't one integer.
			if err == nil && !valid {
				t.Fatalf("scanRecord(%q) accepts what json.Valid refuses", b)
			}
		} else if (err == nil) != valid {
			t.Fatalf("scanRecord(%q) = %v, json.Valid = %v", b, err, valid)
		}
		if err != nil || !has {
			return
		}
		var rec struct {
			Offset *int64 `json:"offset"`
		}
		if json.Unmarshal(b, &rec) == nil && rec.Offset != nil && *rec.Offset != off {
			t.Fatalf("scanRecord(%q) = offset %d, encoding/json reads %d", b, off, *rec.Offset)
		}
	})
}

// readAll reads a file's records back: their offsets, and the indexes of
// those that can't be read.
func readAll(t *testing.T, b *storage.Bucket, key string) (offsets []int64, bad []int64, err error) {
	t.Helper()
	// Spillway's csv files, as datafiles.Write writes them.
	_, exts := naming.SplitExt(key)
	err = Records(context.Background(), b, key, exts, []string{"key", "value", "offset"}, func(r Record) error {
		switch {
		case r.Err != nil:
			bad = append(bad, r.Index)
		case r.HasOffset:
			offsets = append(offsets, r.Offset)
		}
		return nil
	})
	return offsets, bad, err
}

// TestReadRecords reads back every format and compression Spillway writes.
func TestReadRecords(t *testing.T) {
	dir := t.TempDir()
	b := datafiles.OpenDir(t, dir)
	for _, typ := range []string{"jsonl", "json", "csv", "avro", "parquet"} {
		for _, comp := range []string{"none", "gzip", "zstd", "snappy"} {
			key := "t-0-5" + naming.Extension(typ, comp)
			datafiles.Write(t, dir, key, typ, comp, 5, 6, 9)
			got, bad, err := readAll(t, b, key)
			if err != nil || len(bad) > 0 || fmt.Sprint(got) != "[5 6 9]" {
				t.Errorf("%s: offsets %v, bad %v, %v; want [5 6 9]", key, got, bad, err)
			}
			empty := "t-0-10" + naming.Extension(typ, comp)
			datafiles.Write(t, dir, empty, typ, comp)
			if got, bad, err := readAll(t, b, empty); err != nil || len(got)+len(bad) > 0 {
				t.Errorf("%s (no records): %v, %v, %v", empty, got, bad, err)
			}
		}
	}

	// A value nested deeper than encoding/json reads is written; it
	// reads back.
	deep := strings.Repeat("[", 20_000) + strings.Repeat("]", 20_000)
	datafiles.Put(t, dir, "deep-0-0.jsonl", []byte(`{"value":`+deep+`,"offset":0}`+"\n"+`{"offset":1}`+"\n"))
	if got, bad, err := readAll(t, b, "deep-0-0.jsonl"); err != nil || len(bad) > 0 || fmt.Sprint(got) != "[0 1]" {
		t.Errorf("deeply nested value: %v, %v, %v", got, bad, err)
	}

	// A bad record is reported by index, and reading goes on.
	datafiles.Put(t, dir, "bad-0-0.jsonl", []byte("{\"offset\":0}\n{\"offset\":1,}\n{\"offset\":2}\n"))
	if got, bad, err := readAll(t, b, "bad-0-0.jsonl"); err != nil || fmt.Sprint(got, bad) != "[0 2] [1]" {
		t.Errorf("a bad record: offsets %v, bad %v, %v; want [0 2] [1]", got, bad, err)
	}

	// Truncated files: a last line cut short, a json array never closed,
	// a compressed stream cut.
	datafiles.Put(t, dir, "cut-0-0.jsonl", []byte("{\"offset\":0}\n{\"offset\":1}"))
	if got, bad, err := readAll(t, b, "cut-0-0.jsonl"); err != nil || fmt.Sprint(got, bad) != "[0] [1]" {
		t.Errorf("a jsonl file cut after a record: offsets %v, bad %v, %v; want [0] [1]", got, bad, err)
	}
	datafiles.Write(t, dir, "arr-0-0.json", "json", "none", 0, 1)
	data, err := os.ReadFile(filepath.Join(dir, "arr-0-0.json"))
	if err != nil {
		t.Fatal(err)
	}
	datafiles.Put(t, dir, "arr-0-0.json", bytes.TrimSuffix(data, []byte("]\n")))
	var re *ReadError
	if _, _, err := readAll(t, b, "arr-0-0.json"); !errors.As(err, &re) || re.Record != 2 || !strings.Contains(err.Error(), "closing") {
		t.Errorf("a json file without its closing bracket: %v", err)
	}
	datafiles.Write(t, dir, "z-0-0.jsonl.zst", "jsonl", "zstd", 0, 1, 2)
	data, err = os.ReadFile(filepath.Join(dir, "z-0-0.jsonl.zst"))
	if err != nil {
		t.Fatal(err)
	}
	datafiles.Put(t, dir, "z-0-0.jsonl.zst", data[:len(data)-4])
	if _, _, err := readAll(t, b, "z-0-0.jsonl.zst"); !errors.As(err, &re) || re.Key != "z-0-0.jsonl.zst" {
		t.Errorf("a cut zstd stream: %v, want a *ReadError naming the file", err)
	}

	var ue *UnsupportedError
	datafiles.Put(t, dir, "p-0-0.bin", []byte("a\nb\n"))
	if _, _, err := readAll(t, b, "p-0-0.bin"); !errors.As(err, &ue) || !strings.Contains(err.Error(), ".bin") {
		t.Errorf("a bytes file: %v, want an *UnsupportedError", err)
	}
	datafiles.Put(t, dir, "n-0-0", []byte("{}\n"))
	if _, _, err := readAll(t, b, "n-0-0"); !errors.As(err, &ue) {
		t.Errorf("a file without extension: %v, want an *UnsupportedError", err)
	}
}

// TestReadTypedCorrupt damages avro and parquet files as storage or a hand
// might: a byte flipped inside the data, the file cut short. Each is a
// *ReadError naming the file and the first record that can't be read,
// never a silent short count.
func TestReadTypedCorrupt(t *testing.T) {
	dir := t.TempDir()
	b := datafiles.OpenDir(t, dir)
	offsets := make([]int64, 3000)
	for i := range offsets {
		offsets[i] = int64(i)
	}
	for _, tc := range []struct {
		typ, comp string
		damage    func([]byte) []byte
		what      string
		midway    bool // records before the damage are read
	}{
		{"avro", "zstd", func(d []byte) []byte { return flip(d, len(d)/2) }, "a byte flipped in a block", true},
		{"avro", "none", func(d []byte) []byte { return flip(d, len(d)-8) }, "a byte flipped in the last sync marker", true},
		{"avro", "snappy", func(d []byte) []byte { return d[:len(d)*2/3] }, "cut short", true},
		{"parquet", "zstd", func(d []byte) []byte { return flip(d, len(d)/3) }, "a byte flipped in a page", true},
		{"parquet", "none", func(d []byte) []byte { return d[:len(d)-10] }, "its footer cut", false},
		{"parquet", "snappy", func(d []byte) []byte { return append(d[:len(d)/2:len(d)/2], d[len(d)/2+100:]...) }, "100 bytes cut from its middle", false},
	} {
		key := fmt.Sprintf("%s-%s-0-0%s", tc.typ, tc.comp, naming.Extension(tc.typ, tc.comp))
		datafiles.Write(t, dir, key, tc.typ, tc.comp, offsets...)
		if got, bad, err := readAll(t, b, key); err != nil || len(bad) > 0 || len(got) != len(offsets) {
			t.Fatalf("%s before damage: %d offsets, bad %v, %v", key, len(got), bad, err)
		}
		data, err := os.ReadFile(filepath.Join(dir, key))
		if err != nil {
			t.Fatal(err)
		}
		datafiles.Put(t, dir, key, tc.damage(bytes.Clone(data)))
		got, _, err := readAll(t, b, key)
		var re *ReadError
		if !errors.As(err, &re) || re.Key != key || !strings.Contains(err.Error(), key) {
			t.Errorf("%s, %s: %d records read, then %v; want a *ReadError naming the file", key, tc.what, len(got), err)
			continue
		}
		if re.Record != int64(len(got)) || re.Record >= int64(len(offsets)) {
			t.Errorf("%s, %s: error at record %d after %d records read", key, tc.what, re.Record, len(got))
		}
		if tc.midway && re.Record == 0 {
			t.Errorf("%s, %s: error at record 0; want the records of the blocks or row groups before the damage read", key, tc.what)
		}
		t.Logf("%s, %s: %v", key, tc.what, err)
	}
}

// flip inverts the bits of d[i].
func flip(d []byte, i int) []byte {
	d[i] ^= 0xff
	return d
}

// TestReadCSV reads csv rows as Spillway writes them: values with commas,
// quotes and line breaks inside quotes, a one-field file whose null values
// are empty lines, a bad row (reading goes on), and a file cut short.
func TestReadCSV(t *testing.T) {
	dir := t.TempDir()
	b := datafiles.OpenDir(t, dir)
	read := func(key string, fields ...string) (offsets, bad []int64, n int, err error) {
		_, exts := naming.SplitExt(key)
		err = Records(context.Background(), b, key, exts, fields, func(r Record) error {
			n++
			switch {
			case r.Err != nil:
				bad = append(bad, r.Index)
			case r.HasOffset:
				offsets = append(offsets, r.Offset)
			}
			return nil
		})
		return offsets, bad, n, err
	}
	datafiles.Put(t, dir, "c-0-0.csv", []byte("a2V5,\"x, \"\"y\"\"\nz\",7\n,,8\nk,\"\",9\n"))
	if got, bad, n, err := read("c-0-0.csv", "key", "value", "offset"); err != nil || len(bad) > 0 || n != 3 || fmt.Sprint(got) != "[7 8 9]" {
		t.Errorf("quoted values: offsets %v, bad %v, %d records, %v", got, bad, n, err)
	}
	datafiles.Put(t, dir, "one-0-0.csv", []byte("a\n\n\"\"\nb\n"))
	if _, bad, n, err := read("one-0-0.csv", "value"); err != nil || len(bad) > 0 || n != 4 {
		t.Errorf("one field with a null value: %d records, bad %v, %v; want 4", n, bad, err)
	}
	datafiles.Put(t, dir, "bad-0-0.csv", []byte("k,v,1\nk,v\nk,v,x\nk,v,4\n"))
	if got, bad, _, err := read("bad-0-0.csv", "key", "value", "offset"); err != nil || fmt.Sprint(got, bad) != "[1 4] [1 2]" {
		t.Errorf("bad rows: offsets %v, bad %v, %v; want [1 4] [1 2]", got, bad, err)
	}
	datafiles.Put(t, dir, "cut-0-0.csv", []byte("k,v,1\nk,\"v\n,2"))
	if got, bad, _, err := read("cut-0-0.csv", "key", "value", "offset"); err != nil || fmt.Sprint(got, bad) != "[1] [1]" {
		t.Errorf("a file cut inside a quoted value: offsets %v, bad %v, %v; want [1] [1]", got, bad, err)
	}
	var ue *UnsupportedError
	if _, _, _, err := read("c-0-0.csv"); !errors.As(err, &ue) {
		t.Errorf("csv without format.fields: %v, want an *UnsupportedError", err)
	}
}
