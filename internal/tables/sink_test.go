package tables

import (
	"context"
	"database/sql"
	"errors"
	goio "io"
	"log/slog"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/apache/iceberg-go/catalog"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	"github.com/apache/iceberg-go/table"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/errpolicy"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/formats"
	"github.com/spillway/spillway/internal/iceberg"
	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/sink"
	"github.com/spillway/spillway/internal/storage"
)

// TestSinkLedgerTableAcrossACrash runs the real sink, ledger and
// tracker into the loop, with a partition split by day (records of two
// days alternate, so its files interleave their offsets, the case where
// ledger entries share their End): a first process commits some files and
// dies with others stored and never committed; the next one, from the
// ledger alone, leaves every stored file in the table once. The files are
// Parquet, as with a table, and the table is package iceberg's, in a SQL
// catalog in SQLite, read back with iceberg-go's own catalog.
func TestSinkLedgerTableAcrossACrash(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	bucket, err := storage.Open(ctx, "file://"+dir, storage.Options{PartSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bucket.Close() })
	led := ledger.New(bucket, "")
	tmpl, err := naming.Parse("kafka.db/{{topic}}/data/{{topic}}-{{partition}}-{{timestamp:unit=dd}}-{{start_offset}}")
	if err != nil {
		t.Fatal(err)
	}
	pq := config.Format{Type: "parquet", Compression: "none", Fields: []string{"key", "value", "offset", "timestamp"}, ValueEncoding: "none", Envelope: true, Micros: true}
	io := iceberg.Defaults()
	io.Table = "kafka.{{topic}}"
	openCat := func() Catalog {
		c, err := iceberg.Open(ctx, io, dir)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		return icebergCatalog{c: c, writer: "test"}
	}
	tp := offsets.TopicPartition{Topic: "t", Partition: 0}
	id := ledger.Identity{Cluster: "c", Topic: "t", TopicID: "id", Partition: 0}
	opts := Options{Table: "kafka.{{topic}}", Base: "file://" + dir + "/", Interval: time.Hour, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond}

	first := New(openCat(), led, opts, slog.New(slog.DiscardHandler))
	s := sink.New(sink.Config{
		Template: tmpl, EventTime: true, Extension: ".parquet", MaxOpenFiles: 100, MaxRecords: 3,
		NewEncoder:    func(w goio.Writer) (format.Encoder, error) { return formats.NewEncoder(pq, w) },
		NewCompressor: func(w goio.Writer) (goio.WriteCloser, error) { return format.NewCompressor("none", w) },
		ErrRecord:     format.ErrRecord, NullValues: "write", Policy: errpolicy.Policy{Tolerance: "none"},
		Ledger: led, Published: first.Published,
	}, sink.FromStorage(bucket), budget.New(1<<30, 0), slog.New(slog.DiscardHandler))
	defer s.Close()
	s.Assign(tp, id, ledger.Point{State: offsets.State{Next: 0}})
	first.Assigned(tp, id)
	day := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	// Offset 0 is of day 1, the rest of day 2: day 1's file stays open
	// with offset 0 while day 2's close at 3 records, so their entries all
	// end at 0.
	write := func(from, to int64) {
		var recs []*kgo.Record
		for o := from; o < to; o++ {
			ts := day.Add(24 * time.Hour)
			if o == 0 {
				ts = day
			}
			recs = append(recs, &kgo.Record{Topic: "t", Partition: 0, Offset: o, Value: []byte("v"), Timestamp: ts})
		}
		if err := s.Write(ctx, recs); err != nil {
			t.Fatal(err)
		}
	}
	published := func(n int) {
		for {
			first.mu.Lock()
			got := len(first.parts[tp].pending)
			first.mu.Unlock()
			if got >= n {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("%d files published, want %d", got, n)
			case <-time.After(time.Millisecond):
			}
		}
	}
	write(0, 7)
	published(2) // [1,4) and [4,7)
	if err := first.step(ctx, true); err != nil {
		t.Fatal(err)
	}
	committed := len(tableFiles(t, ctx, dir))
	write(7, 13)
	published(2) // [7,10) and [10,13)
	// The first process dies here: its last files are stored, and in the
	// ledger, and not in the table; day 1's file was never stored.

	second := New(openCat(), led, opts, slog.New(slog.DiscardHandler))
	second.Assigned(tp, id)
	if err := second.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var want []string
	var ends []int64
	last, err := led.Last(ctx, id)
	if err != nil || last == nil {
		t.Fatalf("ledger: %v, %v", last, err)
	}
	for seq := int64(0); seq <= last.Seq; seq++ {
		e, err := led.Read(ctx, id, led.EntryKey(id, seq))
		if err != nil {
			t.Fatal(err)
		}
		if e.HasFile() {
			want = append(want, "file://"+dir+"/"+e.File.Key)
			ends = append(ends, e.After().Next)
		}
	}
	got := tableFiles(t, ctx, dir)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("table holds\n %v\nwant every stored file once:\n %v", got, want)
	}
	if committed == 0 || committed == len(want) {
		t.Errorf("the first process committed %d files of %d: the crash must leave some to catch up", committed, len(want))
	}
	tied := false
	for i := 1; i < len(ends); i++ {
		tied = tied || ends[i] == ends[i-1]
	}
	if !tied {
		t.Errorf("no two entries share their End (%v): the test does not interleave", ends)
	}
}

// tableFiles lists the data files of table kafka.t's current snapshot, as
// iceberg-go's own SQL catalog and planner give them: none while the table
// does not exist.
func tableFiles(t *testing.T, ctx context.Context, dir string) []string {
	t.Helper()
	db, err := sql.Open("sqlite", filepath.Join(dir, "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	cat, err := sqlcat.NewCatalog(iceberg.CatalogName, db, sqlcat.SQLite, nil)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := cat.LoadTable(ctx, table.Identifier{"kafka", "t"})
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	tasks, err := tbl.Scan().PlanFiles(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, task := range tasks {
		out = append(out, task.File.FilePath())
	}
	return out
}
