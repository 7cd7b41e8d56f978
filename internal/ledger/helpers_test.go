package ledger_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/storage"
)

const testPrefix = "data/"

var idA = ledger.Identity{Cluster: "clusterA", Topic: "events", TopicID: "topicIDa", Partition: 7}

// openStore opens a local store in a fresh directory, returning its root.
func openStore(tb testing.TB) (*storage.Bucket, string) {
	tb.Helper()
	return openStoreIn(tb, tb.TempDir())
}

// openBigStore is openStore in memory where the machine has a tmpfs at
// /dev/shm: writing and removing 100,000 small files takes minutes on a
// busy disk, and seconds there. The store's code is the same.
func openBigStore(tb testing.TB) (*storage.Bucket, string) {
	tb.Helper()
	if fi, err := os.Stat("/dev/shm"); err != nil || !fi.IsDir() {
		return openStore(tb)
	}
	dir, err := os.MkdirTemp("/dev/shm", "spillway-ledger-test-")
	if err != nil {
		return openStore(tb)
	}
	tb.Cleanup(func() {
		if err := os.RemoveAll(dir); err != nil {
			tb.Error(err)
		}
	})
	return openStoreIn(tb, dir)
}

func openStoreIn(tb testing.TB, dir string) (*storage.Bucket, string) {
	tb.Helper()
	b, err := storage.Open(context.Background(), "file://"+dir, storage.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = b.Close() })
	return b, dir
}

// entryFor is entry seq of a partition written one file at a time: file
// seq holds offsets [10*seq, 10*seq+10).
func entryFor(id ledger.Identity, seq int64) *ledger.Entry {
	return &ledger.Entry{
		Cluster: id.Cluster, Topic: id.Topic, TopicID: id.TopicID, Partition: id.Partition,
		Seq: seq, Writer: "test", Time: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC),
		Before: offsets.State{Next: 10 * seq},
		File: ledger.FileInfo{
			Key:     fmt.Sprintf("%s%s/%d/%012d.jsonl", testPrefix, id.Topic, id.Partition, 10*seq),
			Ranges:  offsets.Ranges{{10 * seq, 10*seq + 10}},
			Records: 10, Bytes: 100 + seq,
		},
	}
}

// putFile publishes a data file of n bytes under key.
func putFile(tb testing.TB, st *storage.Bucket, key string, n int64) {
	tb.Helper()
	if err := st.Put(context.Background(), key, make([]byte, n), nil); err != nil {
		tb.Fatal(err)
	}
}

// putRaw stores data under key as it is.
func putRaw(tb testing.TB, st *storage.Bucket, key string, data []byte) {
	tb.Helper()
	if err := st.Put(context.Background(), key, data, nil); err != nil {
		tb.Fatal(err)
	}
}

func mustJSON(tb testing.TB, v any) []byte {
	tb.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// writeLedger writes entries 0..n-1 of id straight into the directory of a
// local store, as the files Ledger.Append would make, and publishes the
// last entry's data file. Append syncs every file and its directory, which
// for 100,000 entries takes minutes; the bytes and names are the same.
func writeLedger(tb testing.TB, root string, l *ledger.Ledger, id ledger.Identity, n int64) {
	tb.Helper()
	lastDir := ""
	for seq := int64(0); seq < n; seq++ {
		e := entryFor(id, seq)
		e.Version = ledger.EntryVersion
		p := filepath.Join(root, filepath.FromSlash(l.EntryKey(id, seq)))
		if d := filepath.Dir(p); d != lastDir {
			if err := os.MkdirAll(d, 0o755); err != nil {
				tb.Fatal(err)
			}
			lastDir = d
		}
		if err := os.WriteFile(p, mustJSON(tb, e), 0o644); err != nil {
			tb.Fatal(err)
		}
	}
	last := entryFor(id, n-1)
	p := filepath.Join(root, filepath.FromSlash(last.File.Key))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(p, make([]byte, last.File.Bytes), 0o644); err != nil {
		tb.Fatal(err)
	}
}

// countingStore counts the calls made to a store.
type countingStore struct {
	ledger.Store
	list, listDir, stat, read, put atomic.Int64
}

type callCounts struct{ List, ListDir, Stat, Read, Put int64 }

func (c *countingStore) counts() callCounts {
	return callCounts{c.list.Load(), c.listDir.Load(), c.stat.Load(), c.read.Load(), c.put.Load()}
}

func (c *countingStore) reset() {
	for _, n := range []*atomic.Int64{&c.list, &c.listDir, &c.stat, &c.read, &c.put} {
		n.Store(0)
	}
}

func (c *countingStore) List(ctx context.Context, prefix string, fn func(storage.Object) error) error {
	c.list.Add(1)
	return c.Store.List(ctx, prefix, fn)
}

func (c *countingStore) ListDir(ctx context.Context, prefix string, fn func(storage.Object) error) error {
	c.listDir.Add(1)
	return c.Store.ListDir(ctx, prefix, fn)
}

func (c *countingStore) Stat(ctx context.Context, key string) (storage.Object, bool, error) {
	c.stat.Add(1)
	return c.Store.Stat(ctx, key)
}

func (c *countingStore) Read(ctx context.Context, key string) (io.ReadCloser, error) {
	c.read.Add(1)
	return c.Store.Read(ctx, key)
}

func (c *countingStore) Put(ctx context.Context, key string, data []byte, meta map[string]string) error {
	c.put.Add(1)
	return c.Store.Put(ctx, key, data, meta)
}

// mkdirKeyDir makes the directories of key, as a write that failed after
// making them leaves them.
func mkdirKeyDir(tb testing.TB, root, key string) {
	tb.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(root, filepath.FromSlash(key))), 0o755); err != nil {
		tb.Fatal(err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
