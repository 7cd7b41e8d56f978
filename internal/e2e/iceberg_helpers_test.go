package e2e

import (
	"cmp"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spillway/spillway/internal/testkit/outside"
	"github.com/twmb/franz-go/pkg/kgo"
)

// iceDay0 is the first day of the event timestamps produceDays gives.
var iceDay0 = time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC)

// produceDays produces records from to from+total over the topic's partitions, in
// batches of batch (pausing between batches when pace is set, so that
// production overlaps what the test does to spillway). Record i goes to
// partition i%partitions; its event timestamp is on day k%days after
// iceDay0, where k = i/partitions is its position in the partition, so
// every partition interleaves days records and keeps days files open at
// once under partition_by: day(timestamp). Values are size bytes cut
// from a pool of random hex (so zstd can't shrink them much).
func produceDays(ctx context.Context, cl *kgo.Client, topic string, partitions, from, total, batch, size, days int, pace bool) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			raw := make([]byte, 2<<20)
			if _, err := rand.Read(raw); err != nil {
				return err
			}
			pool := []byte(hex.EncodeToString(raw))
			for first := from; first < from+total; first += batch {
				var failed error
				var mu sync.Mutex
				for i := first; i < min(first+batch, from+total); i++ {
					k := i / partitions
					at := (i * 7919 * 64) % (len(pool) - size)
					cl.Produce(ctx, &kgo.Record{
						Topic:     topic,
						Partition: int32(i % partitions),
						Key:       fmt.Appendf(nil, "k-%d", i),
						Value:     pool[at : at+size],
						Timestamp: iceDay0.Add(time.Duration(k%days)*24*time.Hour + time.Duration(k)*time.Millisecond),
					}, func(_ *kgo.Record, err error) {
						if err != nil {
							mu.Lock()
							failed = cmp.Or(failed, err)
							mu.Unlock()
						}
					})
				}
				if err := cl.Flush(ctx); err != nil {
					return err
				}
				if failed != nil {
					return fmt.Errorf("producing records %d..%d: %w", first, min(first+batch, from+total)-1, failed)
				}
				if !pace {
					continue
				}
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(100 * time.Millisecond):
				}
			}
			return nil
		}()
	}()
	return done
}

// iceSnapshot is one snapshot of the table's metadata JSON.
type iceSnapshot struct {
	ID       int64             `json:"snapshot-id"`
	Parent   *int64            `json:"parent-snapshot-id"`
	Seq      int64             `json:"sequence-number"`
	List     string            `json:"manifest-list"`
	Summary  map[string]string `json:"summary"`
	ledger   map[int32]int64   // spillway.ledger of the snapshot's topic
	writer   string            // spillway.writer
	position int               // in the order of sequence numbers
}

// iceMeta is the part of a table's metadata JSON the tests read.
type iceMeta struct {
	Location  string        `json:"location"`
	Current   int64         `json:"current-snapshot-id"`
	Snapshots []iceSnapshot `json:"snapshots"`
	// path and size of the metadata file the catalog points at
	path string
	size int64
}

// readIceMeta reads the table events' metadata as another engine finds
// it: the SQL catalog's iceberg_tables row (nil when the table does not
// exist yet), then the metadata JSON it names. Snapshots come in order of
// their sequence numbers.
func readIceMeta(t testing.TB, catalogDB string) *iceMeta {
	t.Helper()
	if _, err := os.Stat(catalogDB); err != nil {
		return nil
	}
	db, err := sql.Open("sqlite", catalogDB+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var loc string
	err = db.QueryRow(`SELECT metadata_location FROM iceberg_tables WHERE table_namespace = 'kafka' AND table_name = ?`, iceTopic).Scan(&loc)
	if err != nil {
		// No row, or the catalog's tables not created yet.
		return nil
	}
	path := strings.TrimPrefix(loc, "file://")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m := &iceMeta{path: path, size: int64(len(raw))}
	if err := json.Unmarshal(raw, m); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	slices.SortFunc(m.Snapshots, func(a, b iceSnapshot) int { return int(a.Seq - b.Seq) })
	for i := range m.Snapshots {
		s := &m.Snapshots[i]
		s.position = i
		s.writer = s.Summary["spillway.writer"]
		var l map[string]map[int32]int64
		if raw := s.Summary["spillway.ledger"]; raw != "" {
			if err := json.Unmarshal([]byte(raw), &l); err != nil {
				t.Fatalf("snapshot %d: spillway.ledger %q: %v", s.ID, raw, err)
			}
		}
		s.ledger = l[iceTopic]
	}
	return m
}

// current is the current snapshot, or nil.
func (m *iceMeta) current() *iceSnapshot {
	if m == nil {
		return nil
	}
	for i := range m.Snapshots {
		if m.Snapshots[i].ID == m.Current {
			return &m.Snapshots[i]
		}
	}
	return nil
}

func (m *iceMeta) bySeq(seq int64) *iceSnapshot {
	for i := range m.Snapshots {
		if m.Snapshots[i].Seq == seq {
			return &m.Snapshots[i]
		}
	}
	return nil
}

// iceEntry is one manifest entry of the current snapshot.
type iceEntry struct {
	path   string
	status int // 0 existing, 1 added, 2 deleted
	// seq is the data sequence number: that of the snapshot that added
	// the file (snapshot ids don't survive JSON's float64 exactly).
	seq int64
}

// iceManifests reads the current snapshot's manifest list and manifests
// with python3-avro, and fails the test on a delete manifest (content 1)
// or a deleted entry: Spillway only appends.
func iceManifests(t testing.TB, m *iceMeta) (manifests int, entries []iceEntry) {
	t.Helper()
	cur := m.current()
	if cur == nil {
		t.Fatal("the table has no current snapshot")
	}
	local := func(uri string) string { return strings.TrimPrefix(uri, "file://") }
	var paths []string
	var seqs []int64
	for _, r := range outside.ReadAvroPython(t, local(cur.List))[0].Records {
		if c, _ := r["content"].(float64); c != 0 {
			t.Errorf("manifest %v holds delete files (content %v): Spillway writes none", r["manifest_path"], c)
		}
		paths = append(paths, local(r["manifest_path"].(string)))
		seqs = append(seqs, int64(r["sequence_number"].(float64)))
	}
	for i, f := range outside.ReadAvroPython(t, paths...) {
		for _, e := range f.Records {
			st := int(e["status"].(float64))
			if st == 2 {
				t.Errorf("%s: a deleted entry: Spillway never removes a file", f.Path)
			}
			seq := seqs[i] // inherited from the manifest when null
			if v, ok := e["sequence_number"].(float64); ok {
				seq = int64(v)
			}
			entries = append(entries, iceEntry{path: local(e["data_file"].(map[string]any)["file_path"].(string)), status: st, seq: seq})
		}
	}
	return len(paths), entries
}
