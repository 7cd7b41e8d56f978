package restore

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/testkit"
	"github.com/spillway/spillway/internal/testkit/outside"
)

// kcatFormat frames each record so that kcat's output parses back
// unambiguously where it can: a line of partition, offset, timestamp and
// the key's and value's lengths (-1 for null), then exactly those bytes of
// key and value (binary, NUL, newlines and all), then a line of headers.
const kcatFormat = "R %p %o %T %K %S\n%k%s\nH %h\n"

// kcatRecord is one record as kcat printed it.
type kcatRecord struct {
	partition  int32
	offset     int64
	timestamp  int64
	key, value []byte // nil for null
	headers    string // kcat's "n=v,n=v"
}

// TestRoundTripKcat restores hostile records (jsonl, zstd) and reads the
// destination with kcat, librdkafka's client, read_committed: a reader
// that shares no code with Spillway or franz-go. Each partition holds the
// source's records once, in order, at offsets that only grow, with their
// timestamps, keys and values byte for byte, null told from empty (kcat
// prints a null's length as -1).
//
// Headers are compared only where kcat's "n=v,n=v" text shows them
// unambiguously. It can't for a header whose value is null (kcat prints
// it as "n=", as an empty one), nor for names or values holding ',' or
// '=' or a newline, nor for binary values in general: those records' headers
// are checked by the franz-go comparison of TestRoundTrip only.
func TestRoundTripKcat(t *testing.T) {
	t.Parallel()
	kcat := outside.Kcat(t)
	cluster := testkit.NewCluster(t, 1)
	f := newSource(t, cluster, "src-kcat", 2, 194, func(c *config.Config) {
		c.Format.Type, c.Format.Compression = "jsonl", "zstd"
	})
	createTopic(t, f.cl, "dst-kcat", 2)
	res, err := f.restoreTo(t, "dst-kcat", Options{TxnBytes: 4 << 10}) // several transactions: their markers take offsets
	if err != nil {
		t.Fatal(err)
	}
	if res.Records != 388 || res.Txns < 2 {
		t.Fatalf("restored %d records in %d transactions, want 388 in several", res.Records, res.Txns)
	}

	ctx, cancel := context.WithTimeout(context.Background(), waitDeadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, kcat, "-C", "-b", cluster.Addrs()[0], "-t", "dst-kcat", "-o", "beginning", "-e", "-q",
		"-X", "isolation.level=read_committed", "-f", kcatFormat)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kcat: %v\n%s", err, stderr.String())
	}
	got, err := parseKcat(out)
	if err != nil {
		t.Fatalf("kcat's output: %v", err)
	}

	headersCompared := 0
	for p := range int32(2) {
		want := f.want[p]
		if len(got[p]) != len(want) {
			t.Errorf("kcat read %d records of dst-kcat/%d, want %d", len(got[p]), p, len(want))
			continue
		}
		last := int64(-1)
		for i, w := range want {
			g := got[p][i]
			switch {
			case g.offset <= last:
				t.Errorf("dst-kcat/%d record %d at offset %d after %d", p, i, g.offset, last)
			case g.timestamp != w.Timestamp.UnixMilli():
				t.Errorf("dst-kcat/%d record %d: timestamp %d, want %d", p, i, g.timestamp, w.Timestamp.UnixMilli())
			case !testkit.SameBytes(g.key, w.Key) || !testkit.SameBytes(g.value, w.Value):
				t.Errorf("dst-kcat/%d record %d: key %q value %q (null: %v %v), want %q %q (null: %v %v)", p, i,
					g.key, g.value, g.key == nil, g.value == nil, w.Key, w.Value, w.Key == nil, w.Value == nil)
			}
			last = g.offset
			if text, ok := kcatHeaders(w.Headers); ok {
				headersCompared++
				if g.headers != text {
					t.Errorf("dst-kcat/%d record %d: headers %q, want %q", p, i, g.headers, text)
				}
			}
		}
	}
	// hostile gives a quarter of the records one plain header and a
	// quarter none: those are compared.
	if headersCompared < 388/2 {
		t.Errorf("compared the headers of %d records, want at least half of 388", headersCompared)
	}
}

// kcatHeaders is how kcat prints hs, when that text tells them apart.
func kcatHeaders(hs []kgo.RecordHeader) (string, bool) {
	var parts []string
	for _, h := range hs {
		if h.Value == nil || strings.ContainsAny(h.Key, ",=\n") || bytes.ContainsAny(h.Value, ",=\n") || !printable(h.Value) {
			return "", false
		}
		parts = append(parts, h.Key+"="+string(h.Value))
	}
	return strings.Join(parts, ","), true
}

func printable(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

// parseKcat reads kcatFormat's frames, by partition in offset order.
func parseKcat(out []byte) (map[int32][]kcatRecord, error) {
	got := map[int32][]kcatRecord{}
	r := bufio.NewReader(bytes.NewReader(out))
	for n := 0; ; n++ {
		line, err := r.ReadString('\n')
		if err == io.EOF && line == "" {
			return got, nil
		}
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", n, err)
		}
		var rec kcatRecord
		var klen, vlen int
		if _, err := fmt.Sscanf(line, "R %d %d %d %d %d\n", &rec.partition, &rec.offset, &rec.timestamp, &klen, &vlen); err != nil {
			return nil, fmt.Errorf("record %d: %q: %w", n, line, err)
		}
		body := make([]byte, max(klen, 0)+max(vlen, 0)+1)
		if _, err := io.ReadFull(r, body); err != nil || body[len(body)-1] != '\n' {
			return nil, fmt.Errorf("record %d: key and value of %d and %d bytes: %v", n, klen, vlen, err)
		}
		if klen >= 0 {
			rec.key = body[:klen:klen]
		}
		if vlen >= 0 {
			rec.value = body[max(klen, 0) : max(klen, 0)+vlen]
		}
		h, err := r.ReadString('\n')
		if err != nil || !strings.HasPrefix(h, "H ") {
			return nil, fmt.Errorf("record %d: headers line %q: %v", n, h, err)
		}
		rec.headers = strings.TrimSuffix(strings.TrimPrefix(h, "H "), "\n")
		got[rec.partition] = append(got[rec.partition], rec)
	}
}
