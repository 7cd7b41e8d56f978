package outside

import (
	"fmt"
	"reflect"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/goleak"

	"github.com/spillway/spillway/internal/testkit"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestKcatProduce(t *testing.T) {
	Kcat(t)
	c := testkit.NewCluster(t, 4, "kc")

	const n = 100
	lines := make([]string, n)
	for i := range lines {
		lines[i] = fmt.Sprintf("key-%d\t{\"n\":%d,\"s\":\"x y\"}", i, i)
	}
	KcatProduce(t, c.Addrs(), "kc", 2, "zstd", lines, true)

	plain := []string{"a", "b b", "c\twith tab"}
	KcatProduce(t, c.Addrs(), "kc", 0, "gzip", plain, false)

	cl := c.Client(t)
	if got, want := testkit.EndOffsets(t, cl, "kc"), map[int32]int64{0: 3, 1: 0, 2: n, 3: 0}; !reflect.DeepEqual(got, want) {
		t.Fatalf("EndOffsets = %v, want %v", got, want)
	}

	cons := c.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"kc": {2: kgo.NewOffset().AtStart(), 0: kgo.NewOffset().AtStart()},
	}))
	var p0, p2 []*kgo.Record
	for _, r := range testkit.Poll(t, cons, n+len(plain)) {
		switch r.Partition {
		case 0:
			p0 = append(p0, r)
		case 2:
			p2 = append(p2, r)
		default:
			t.Fatalf("record in partition %d", r.Partition)
		}
	}
	for i, r := range p2 {
		if r.Offset != int64(i) || string(r.Key) != fmt.Sprintf("key-%d", i) ||
			string(r.Value) != fmt.Sprintf(`{"n":%d,"s":"x y"}`, i) {
			t.Fatalf("p2 record %d: offset %d key %q value %q", i, r.Offset, r.Key, r.Value)
		}
		if !reflect.DeepEqual(r.Headers, KcatHeaders) {
			t.Fatalf("p2 record %d headers %v, want %v", i, r.Headers, KcatHeaders)
		}
	}
	for i, r := range p0 {
		if r.Key != nil || string(r.Value) != plain[i] || len(r.Headers) != 0 {
			t.Fatalf("p0 record %d: key %q value %q headers %v", i, r.Key, r.Value, r.Headers)
		}
	}
}
