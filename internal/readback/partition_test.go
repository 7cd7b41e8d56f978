package readback

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/formats"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/testkit/datafiles"
)

// TestReadPartition writes files of every format that has fields, with
// partition listed in format.fields (last, and between others), through
// Spillway's own encoders, and reads each record's Kafka partition back;
// without partition listed, no record has one.
func TestReadPartition(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	b := datafiles.OpenDir(t, dir)
	for _, typ := range []string{"jsonl", "json", "csv", "avro", "parquet"} {
		for _, fields := range [][]string{
			{"key", "value", "offset", "partition"},
			{"partition", "offset", "value"},
			{"key", "value", "offset"},
		} {
			key := fmt.Sprintf("%s-%d-0%s", typ, len(fields)*10+len(fields[0]), naming.Extension(typ, "gzip"))
			writeParts(t, dir, key, typ, fields, 7)
			_, exts := naming.SplitExt(key)
			var got []string
			err := Records(context.Background(), b, key, exts, fields, func(r Record) error {
				if r.Err != nil {
					return r.Err
				}
				got = append(got, fmt.Sprintf("%d@%d:%v", r.Offset, r.Partition, r.HasPartition))
				return nil
			})
			want := "[10@7:true 11@7:true]"
			if len(fields) == 3 && fields[0] == "key" {
				want = "[10@0:false 11@0:false]"
			}
			if err != nil || fmt.Sprint(got) != want {
				t.Errorf("%s with fields %v: %v, %v; want %s", typ, fields, got, err, want)
			}
		}
	}
}

// writeParts writes records at offsets 10 and 11 of Kafka partition part
// as format.type typ with fields, gzip-compressed.
func writeParts(t *testing.T, dir, key, typ string, fields []string, part int32) {
	t.Helper()
	var buf bytes.Buffer
	cfg := config.Format{Type: typ, Compression: "gzip", Fields: fields, ValueEncoding: "none", Envelope: true}
	w, err := format.NewCompressor(formats.Of(cfg.Type).StreamCompression(cfg), &buf)
	if err != nil {
		t.Fatal(err)
	}
	enc, err := formats.NewBufferedEncoder(cfg, w, format.Memory{FlushBytes: 8 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range []int64{10, 11} {
		if err := enc.Encode(&kgo.Record{Offset: o, Partition: part, Key: []byte("k"), Value: []byte(`{"partition":"not this one"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := enc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	datafiles.Put(t, dir, key, buf.Bytes())
}
