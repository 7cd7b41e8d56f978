package sink_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/errpolicy"
	"github.com/spillway/spillway/internal/format"
	"github.com/spillway/spillway/internal/format/formats"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/sink"
	"github.com/spillway/spillway/internal/storage"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// ---- a bucket whose commits can be held back, per key ----
//
// A fake of sink.Bucket, not an emulator: it holds a file's commit open at
// a moment the test chooses (and fails it on demand), which no storage
// emulator can do, to assert on what the sink does while a file is being
// published. Files are kept in memory; a commit is create-only, as
// storage's.

type gate struct {
	mu      sync.Mutex
	objects map[string][]byte
	holds   map[string]chan struct{}
	fails   map[string]error
	commits chan string // every commit that reached the store, in order
}

func newGate() *gate {
	return &gate{objects: map[string][]byte{}, holds: map[string]chan struct{}{}, fails: map[string]error{}, commits: make(chan string, 10000)}
}

// hold makes the commit of key wait until the returned release is called.
func (g *gate) hold(key string) (release func()) {
	ch := make(chan struct{})
	g.mu.Lock()
	g.holds[key] = ch
	g.mu.Unlock()
	var once sync.Once
	return func() { once.Do(func() { close(ch) }) }
}

// awaitCommit waits until the commit of key has reached the store (it may
// then be held).
func (g *gate) awaitCommit(t *testing.T, key string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case k := <-g.commits:
			if k == key {
				return
			}
		case <-timeout:
			t.Fatalf("commit of %s never started", key)
		}
	}
}

// fail makes the commit of key fail with err.
func (g *gate) fail(key string, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.fails[key] = err
}

// started drains the commits that reached the store so far.
func (g *gate) started() []string {
	var out []string
	for {
		select {
		case k := <-g.commits:
			out = append(out, k)
		default:
			return out
		}
	}
}

func (g *gate) files() map[string][]byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := map[string][]byte{}
	for k, v := range g.objects {
		out[k] = v
	}
	return out
}

func (g *gate) NewWriter(ctx context.Context, key string, _ map[string]string) (sink.Writer, error) {
	return &gateWriter{ctx: ctx, key: key, g: g}, nil
}
func (g *gate) WriterMemory() int64 { return 0 }
func (g *gate) ChunkSize() int64    { return 64 << 10 }

type gateWriter struct {
	ctx context.Context // the sink's: it ends on Close, which abandons
	key string
	g   *gate
	buf bytes.Buffer
}

func (w *gateWriter) Write(p []byte) (int, error)             { return w.buf.Write(p) }
func (w *gateWriter) Written() int64                          { return int64(w.buf.Len()) }
func (w *gateWriter) WaitQueued(context.Context, int64) error { return nil }
func (w *gateWriter) Abort()                                  {}

func (w *gateWriter) CRC32C() uint32 {
	return crc32.Checksum(w.buf.Bytes(), crc32.MakeTable(crc32.Castagnoli))
}

// Commit stores the file, after any hold. Create-only.
func (w *gateWriter) Commit() error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	w.g.commits <- w.key
	w.g.mu.Lock()
	h := w.g.holds[w.key]
	w.g.mu.Unlock()
	if h != nil {
		select {
		case <-h:
		case <-w.ctx.Done():
			return w.ctx.Err()
		}
	}
	w.g.mu.Lock()
	defer w.g.mu.Unlock()
	if err := w.g.fails[w.key]; err != nil {
		return err
	}
	if _, ok := w.g.objects[w.key]; ok {
		return fmt.Errorf("gate: %s: %w", w.key, storage.ErrExists)
	}
	w.g.objects[w.key] = bytes.Clone(w.buf.Bytes())
	return nil
}

// ---- the sink under test ----

var jsonlFormat = config.Format{Type: "jsonl", Fields: []string{"key", "value", "offset", "timestamp", "headers"}, ValueEncoding: "none", Envelope: true}

const compressorMemory = 1000

func baseConfig(t *testing.T) sink.Config {
	t.Helper()
	tmpl, err := naming.Parse("{{topic}}-{{partition}}-{{start_offset}}")
	if err != nil {
		t.Fatal(err)
	}
	return baseConfigFor(tmpl)
}

func baseConfigFor(tmpl *naming.Template) sink.Config {
	return sink.Config{
		Template:     tmpl,
		Extension:    naming.Extension(jsonlFormat.Type, jsonlFormat.Compression),
		MaxOpenFiles: 100,
		NewEncoder: func(w io.Writer) (format.Encoder, error) {
			return formats.NewEncoder(jsonlFormat, w)
		},
		NewCompressor: func(w io.Writer) (io.WriteCloser, error) {
			return format.NewCompressor("none", w)
		},
		CompressorMemory: compressorMemory,
		ErrRecord:        format.ErrRecord,
		NullValues:       "write",
		Policy:           errpolicy.Policy{Tolerance: "none"},
	}
}

type harness struct {
	t      *testing.T
	cfg    sink.Config
	s      *sink.Sink
	b      *budget.Budget
	bucket *storage.Bucket
	dir    string // for file:// buckets
	gate   *gate  // for gate buckets
	log    *slog.Logger

	closeOnce sync.Once
}

type opt func(*harness, *sink.Config, *storage.Options)

// withFile stores in a fresh local directory (the default).
func withFile() opt { return func(h *harness, _ *sink.Config, _ *storage.Options) { h.dir = "" } }

// withMem stores in a fresh mem:// bucket.
func withMem() opt { return func(h *harness, _ *sink.Config, _ *storage.Options) { h.dir = "mem" } }

// withGate stores in a gate whose commits can be held.
func withGate() opt { return func(h *harness, _ *sink.Config, _ *storage.Options) { h.dir = "gate" } }

func withBudget(b *budget.Budget) opt {
	return func(h *harness, _ *sink.Config, _ *storage.Options) { h.b = b }
}

func withConfig(f func(*sink.Config)) opt {
	return func(_ *harness, c *sink.Config, _ *storage.Options) { f(c) }
}

// withAccounting wires storage's part buffers into the budget, as the
// runner does.
func withAccounting() opt {
	return func(h *harness, _ *sink.Config, o *storage.Options) {
		o.Account = func(d int64) {
			if d >= 0 {
				h.b.Acquire(budget.QueuedChunks, d)
			} else {
				h.b.Release(budget.QueuedChunks, -d)
			}
		}
	}
}

func newHarness(t *testing.T, opts ...opt) *harness {
	t.Helper()
	h := &harness{t: t, b: budget.New(1<<30, 0)}
	cfg := baseConfig(t)
	sopts := storage.Options{PartSize: 64 << 10}
	for _, o := range opts {
		o(h, &cfg, &sopts)
	}
	var u string
	switch h.dir {
	case "mem":
		h.dir, u = "", "mem://"
	case "gate":
		h.gate, u = newGate(), "mem://"
		h.dir = ""
	default:
		h.dir = filepath.Join(t.TempDir(), "out")
		u = "file://" + h.dir
	}
	bucket, err := storage.Open(context.Background(), u, sopts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bucket.Close() })
	h.bucket, h.cfg = bucket, cfg
	var sb sink.Bucket = sink.FromStorage(bucket)
	if h.gate != nil {
		sb = h.gate
	}
	log := h.log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h.s = sink.New(cfg, sb, h.b, log)
	t.Cleanup(h.close)
	return h
}

func (h *harness) close() { h.closeOnce.Do(h.s.Close) }

func (h *harness) write(recs ...*kgo.Record) {
	h.t.Helper()
	if err := h.s.Write(context.Background(), recs); err != nil {
		h.t.Fatalf("Write: %v", err)
	}
}

func (h *harness) flush() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.s.Flush(ctx, nil, offsets.ReasonShutdown); err != nil {
		h.t.Fatalf("Flush: %v", err)
	}
}

// eventually polls cond; it only observes state, and fails after a long
// deadline that a correct sink never comes near.
func (h *harness) eventually(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// committed accumulates Committable results, as the committer does.
func (h *harness) committed(into map[offsets.TopicPartition]int64) map[offsets.TopicPartition]int64 {
	if into == nil {
		into = map[offsets.TopicPartition]int64{}
	}
	for tp, off := range h.s.Committable(nil) {
		if prev, ok := into[tp]; ok && off <= prev {
			h.t.Errorf("%v: committable went from %d to %d", tp, prev, off)
		}
		into[tp] = off
	}
	return into
}

// line is one JSON Lines record as the jsonl envelope writes it.
type line struct {
	Key       *string         `json:"key"`
	Value     json.RawMessage `json:"value"`
	Offset    int64           `json:"offset"`
	Timestamp int64           `json:"timestamp"`
	Headers   json.RawMessage `json:"headers"`
}

type file struct {
	key       string
	tp        offsets.TopicPartition
	start     int64 // from the name
	size      int
	lines     []line
	lineSizes []int
}

// objects reads every stored object, ordered by partition and start offset.
func (h *harness) objects() []file {
	h.t.Helper()
	raw := map[string][]byte{}
	if h.gate != nil {
		raw = h.gate.files()
	} else {
		err := h.bucket.List(context.Background(), "", func(o storage.Object) error {
			r, err := h.bucket.Read(context.Background(), o.Key)
			if err != nil {
				return err
			}
			defer r.Close()
			b, err := io.ReadAll(r)
			raw[o.Key] = b
			return err
		})
		if err != nil {
			h.t.Fatal(err)
		}
	}
	var out []file
	for key, data := range raw {
		name := strings.TrimSuffix(strings.TrimPrefix(key, h.cfg.Prefix), h.cfg.Extension)
		v, ok := h.cfg.Template.Match(name)
		if !ok {
			h.t.Fatalf("object %q does not match the template", key)
		}
		f := file{key: key, tp: offsets.TopicPartition{Topic: v.Topic, Partition: v.Partition}, start: v.StartOffset, size: len(data)}
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			var l line
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				h.t.Fatalf("%s: bad line %q: %v", key, sc.Text(), err)
			}
			f.lines = append(f.lines, l)
			f.lineSizes = append(f.lineSizes, len(sc.Bytes())+1)
		}
		if len(data) > 0 && data[len(data)-1] != '\n' {
			h.t.Fatalf("%s does not end with a newline", key)
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.tp != b.tp {
			if a.tp.Topic != b.tp.Topic {
				return a.tp.Topic < b.tp.Topic
			}
			return a.tp.Partition < b.tp.Partition
		}
		return a.start < b.start
	})
	return out
}

// offsets returns the record offsets stored per partition, in file order,
// and checks each file holds only its own partition's records in
// increasing order, starting at or after its name's start offset.
func (h *harness) offsets(files []file) map[offsets.TopicPartition][]int64 {
	h.t.Helper()
	out := map[offsets.TopicPartition][]int64{}
	for _, f := range files {
		prev := f.start - 1
		for _, l := range f.lines {
			if l.Offset <= prev {
				h.t.Fatalf("%s: offset %d after %d", f.key, l.Offset, prev)
			}
			var v string
			if err := json.Unmarshal(l.Value, &v); err == nil && v != value(f.tp.Topic, f.tp.Partition, l.Offset) && !strings.HasPrefix(v, value(f.tp.Topic, f.tp.Partition, l.Offset)+" ") {
				h.t.Fatalf("%s: offset %d holds value %q", f.key, l.Offset, v)
			}
			prev = l.Offset
			out[f.tp] = append(out[f.tp], l.Offset)
		}
	}
	return out
}

// contiguous checks that every file holds consecutive offsets starting at
// its name's start offset, and that the files of a partition tile [0, n).
func (h *harness) contiguous(files []file, want map[offsets.TopicPartition]int64) {
	h.t.Helper()
	next := map[offsets.TopicPartition]int64{}
	for _, f := range files {
		if len(f.lines) == 0 {
			h.t.Fatalf("%s is empty", f.key)
		}
		if f.start != next[f.tp] {
			h.t.Fatalf("%s starts at %d, want %d (previous file's end)", f.key, f.start, next[f.tp])
		}
		for i, l := range f.lines {
			if l.Offset != f.start+int64(i) {
				h.t.Fatalf("%s: line %d has offset %d, want %d", f.key, i, l.Offset, f.start+int64(i))
			}
		}
		next[f.tp] = f.start + int64(len(f.lines))
	}
	h.offsets(files)
	for tp, n := range want {
		if next[tp] != n {
			h.t.Fatalf("%v: stored up to %d, want %d", tp, next[tp], n)
		}
	}
	for tp := range next {
		if _, ok := want[tp]; !ok {
			h.t.Fatalf("unexpected files for %v", tp)
		}
	}
}

// localFiles lists every regular file under the local bucket's directory,
// temp files included.
func (h *harness) localFiles() []string {
	h.t.Helper()
	var out []string
	err := filepath.WalkDir(h.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(h.dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// ---- records ----

func value(topic string, p int32, off int64) string { return fmt.Sprintf("%s/%d/%d", topic, p, off) }

func rec(topic string, p int32, off int64) *kgo.Record {
	return &kgo.Record{
		Topic: topic, Partition: p, Offset: off,
		Key:       []byte(fmt.Sprint("k", off)),
		Value:     []byte(value(topic, p, off)),
		Timestamp: time.UnixMilli(1_700_000_000_000 + off),
		Headers:   []kgo.RecordHeader{{Key: "h", Value: []byte("v")}},
	}
}

// recs returns records [from, to) of one partition.
func recs(topic string, p int32, from, to int64) []*kgo.Record {
	var out []*kgo.Record
	for off := from; off < to; off++ {
		out = append(out, rec(topic, p, off))
	}
	return out
}

// bad is a record the jsonl encoder refuses (value not UTF-8).
func bad(topic string, p int32, off int64) *kgo.Record {
	r := rec(topic, p, off)
	r.Value = []byte{0xff, 0xfe, 0xfd}
	return r
}

// null is a tombstone.
func null(topic string, p int32, off int64) *kgo.Record {
	r := rec(topic, p, off)
	r.Value = nil
	return r
}

func tp(topic string, p int32) offsets.TopicPartition {
	return offsets.TopicPartition{Topic: topic, Partition: p}
}

func key(topic string, p int32, start int64) string {
	return fmt.Sprintf("%s-%d-%d.jsonl", topic, p, start)
}
