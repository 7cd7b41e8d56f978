package sink_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"pgregory.net/rapid"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/ledger"
	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/offsets"
	"github.com/spillway/spillway/internal/sink"
	"github.com/spillway/spillway/internal/storage"
)

// TestPropPipeline drives the write pipeline (docs/design.md, "The write
// pipeline") as a busy consumer does, where TestPropCommitAndRecovery
// feeds one record at a time and waits for every goroutine between them:
// polls of many records over several partitions in one Write, so that many
// files encode at once with batches queued; a budget small enough that
// WriteSome stops early and the test waits for it as the source does;
// random rotations by record count, by size and by age; bad records, which
// the encoder finds after Write returned; tombstones; and revokes (flush,
// commit, drop, then the partition assigned again from its commit) in the
// middle of it all. Run it with -race.
//
// At the end, storage must hold every writable record exactly once, each
// file in offset order, nothing of a bad record or a tombstone; every
// partition must be committed to its log end; and the budget must be back
// where it started (every queued byte released).
func TestPropPipeline(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		limit := int64(rapid.SampledFrom([]int{1 << 20, 4 << 20}).Draw(rt, "budget"))
		b := budget.New(limit, 0)
		bucket, err := storage.Open(context.Background(), "mem://", storage.Options{PartSize: 64 << 10,
			Account: func(d int64) {
				if d >= 0 {
					b.Acquire(budget.QueuedChunks, d)
				} else {
					b.Release(budget.QueuedChunks, -d)
				}
			}})
		if err != nil {
			rt.Fatal(err)
		}
		defer bucket.Close()
		cfg := pipelineConfig(rt)
		s := sink.New(cfg, sink.FromStorage(bucket), b, slog.New(slog.DiscardHandler))
		defer s.Close()
		ctx := context.Background()

		parts := rapid.IntRange(1, 6).Draw(rt, "partitions")
		logEnd := make([]int64, parts)        // records produced so far
		fed := make([]int64, parts)           // next offset to feed
		committed := make([]int64, parts)     // the group's commit
		skip := make([]map[int64]bool, parts) // bad records and tombstones
		for p := range parts {
			skip[p] = map[int64]bool{}
			s.Assign(tpOf(p), ledger.Identity{}, ledger.Point{State: offsets.State{Next: 0}})
		}
		record := func(p int, off int64) *kgo.Record {
			r := rec(propTopic, int32(p), off)
			// Values of varied size, so max_bytes closes files at varied
			// record counts, some large enough to fill a batch alone.
			r.Value = []byte(fmt.Sprintf("%q", value(propTopic, int32(p), off)+strings.Repeat(" ", int(off*37%5)*int(off%3)*900)))
			switch {
			case off%11 == 5 && off%2 == 1:
				skip[p][off] = true
				return bad(propTopic, int32(p), off)
			case off%13 == 7:
				skip[p][off] = true
				return null(propTopic, int32(p), off)
			}
			return r
		}
		commit := func() {
			for tp, off := range s.Committable(nil) {
				if off < committed[tp.Partition] {
					rt.Fatalf("%v: commit went back from %d to %d", tp, committed[tp.Partition], off)
				}
				committed[tp.Partition] = off
			}
		}
		// poll writes the next records of some partitions in one call, as
		// one fetch, and waits for the budget when WriteSome stops early.
		poll := func() {
			var recs []*kgo.Record
			for p := range parts {
				if !rapid.Bool().Draw(rt, "include") {
					continue
				}
				n := rapid.Int64Range(1, 300).Draw(rt, "records")
				for off := fed[p]; off < fed[p]+n; off++ {
					recs = append(recs, record(p, off))
				}
				fed[p] += n
				logEnd[p] = max(logEnd[p], fed[p])
			}
			for len(recs) > 0 {
				n, err := s.WriteSome(ctx, recs)
				if err != nil {
					rt.Fatalf("WriteSome: %v", err)
				}
				recs = recs[n:]
				if len(recs) > 0 {
					wctx, cancel := context.WithTimeout(ctx, time.Minute)
					err := b.WaitLow(wctx, nil)
					cancel()
					if err != nil {
						rt.Fatalf("the budget never came back below its low watermark: %+v", b.Snapshot())
					}
				}
			}
			commit()
		}
		// revoke flushes a partition and drops it, then takes it back
		// from its commit, as a rebalance that gives it back does.
		revoke := func() {
			p := rapid.IntRange(0, parts-1).Draw(rt, "revoked")
			tps := map[offsets.TopicPartition]bool{tpOf(p): true}
			fctx, cancel := context.WithTimeout(ctx, time.Minute)
			defer cancel()
			if err := s.Flush(fctx, tps, offsets.ReasonRevoke); err != nil {
				rt.Fatalf("Flush t/%d: %v", p, err)
			}
			commit()
			if committed[p] != fed[p] {
				rt.Fatalf("t/%d committed %d after its flush, fed %d", p, committed[p], fed[p])
			}
			s.Drop(tps)
			s.Assign(tpOf(p), ledger.Identity{}, ledger.Point{State: offsets.State{Next: committed[p]}})
		}
		steps := rapid.IntRange(1, 8).Draw(rt, "steps")
		for range steps {
			switch rapid.IntRange(0, 5).Draw(rt, "action") {
			case 0, 1, 2:
				poll()
			case 3:
				if err := s.Tick(ctx, time.Now().Add(2*time.Hour)); err != nil {
					rt.Fatalf("Tick: %v", err)
				}
			case 4:
				revoke()
			case 5:
				commit()
			}
		}
		fctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		if err := s.Flush(fctx, nil, offsets.ReasonShutdown); err != nil {
			rt.Fatalf("Flush: %v", err)
		}
		commit()
		for p := range parts {
			if committed[p] != logEnd[p] {
				rt.Fatalf("t/%d committed %d, log end %d", p, committed[p], logEnd[p])
			}
		}
		seen := make([]map[int64]string, parts)
		for p := range parts {
			seen[p] = map[int64]string{}
		}
		err = bucket.List(ctx, "", func(o storage.Object) error {
			name := strings.TrimSuffix(o.Key, cfg.Extension)
			v, ok := cfg.Template.Match(name)
			if !ok {
				return fmt.Errorf("unexpected object %s", o.Key)
			}
			prev := int64(-1)
			for _, off := range readOffsets(rt, bucket, o.Key) {
				if off <= prev {
					rt.Fatalf("%s: offset %d after %d", o.Key, off, prev)
				}
				prev = off
				if k, dup := seen[v.Partition][off]; dup {
					rt.Fatalf("t/%d offset %d stored twice, in %s and %s", v.Partition, off, k, o.Key)
				}
				if skip[v.Partition][off] {
					rt.Fatalf("%s holds offset %d, a bad record or tombstone", o.Key, off)
				}
				seen[v.Partition][off] = o.Key
			}
			return nil
		})
		if err != nil {
			rt.Fatal(err)
		}
		for p := range parts {
			for off := range logEnd[p] {
				if _, ok := seen[p][off]; !ok && !skip[p][off] {
					rt.Fatalf("t/%d offset %d is not stored", p, off)
				}
			}
		}
		s.Close()
		snap := b.Snapshot()
		held := map[budget.Holder]int64{}
		for _, h := range snap.By {
			if h.Bytes != 0 {
				held[h.Holder] = h.Bytes
			}
		}
		if !maps.Equal(held, map[budget.Holder]int64{}) {
			rt.Fatalf("after Close the budget holds %v", held)
		}
	})
}

func pipelineConfig(rt *rapid.T) sink.Config {
	tmpl, err := naming.Parse("{{topic}}-{{partition}}-{{start_offset}}")
	if err != nil {
		rt.Fatal(err)
	}
	cfg := baseConfigFor(tmpl)
	cfg.MaxRecords = int64(rapid.SampledFrom([]int{0, 1, 7, 100, 1000}).Draw(rt, "maxRecords"))
	cfg.MaxBytes = int64(rapid.SampledFrom([]int{0, 2 << 10, 20 << 10, 300 << 10}).Draw(rt, "maxBytes"))
	cfg.MaxOpenFiles = rapid.SampledFrom([]int{0, 2}).Draw(rt, "maxOpenFiles") // 0: what the budget holds
	cfg.MaxAge = time.Hour
	cfg.NullValues = "ignore"
	cfg.Policy.Tolerance = "all"
	return cfg
}

// readOffsets returns the offsets of a stored JSON Lines file, in order.
func readOffsets(rt *rapid.T, bucket *storage.Bucket, key string) []int64 {
	r, err := bucket.Read(context.Background(), key)
	if err != nil {
		rt.Fatal(err)
	}
	defer r.Close()
	var offs []int64
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			rt.Fatalf("%s: bad line %q: %v", key, sc.Text(), err)
		}
		offs = append(offs, l.Offset)
	}
	if err := sc.Err(); err != nil {
		rt.Fatal(err)
	}
	if len(offs) == 0 {
		rt.Fatalf("%s is empty", key)
	}
	return offs
}
