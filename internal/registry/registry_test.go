package registry

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"go.uber.org/goleak"

	"github.com/spillway/spillway/internal/testkit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const userSchema = `{"type":"record","name":"User","namespace":"t","fields":[
 {"name":"id","type":"long"},
 {"name":"address","type":{"type":"record","name":"Address","fields":[{"name":"city","type":"string"}]}}]}`

// refSchema uses t.Address, registered under a subject of its own.
const refSchema = `{"type":"record","name":"Move","namespace":"t","fields":[{"name":"to","type":"t.Address"}]}`

var seeds = []sr.SubjectSchema{
	{Subject: "address", Version: 1, ID: 10, Schema: sr.Schema{Type: sr.TypeAvro, Schema: `{"type":"record","name":"Address","namespace":"t","fields":[{"name":"city","type":"string"}]}`}},
	{Subject: "users-value", Version: 1, ID: 1, Schema: sr.Schema{Type: sr.TypeAvro, Schema: userSchema}},
	{Subject: "moves-value", Version: 1, ID: 2, Schema: sr.Schema{Type: sr.TypeAvro, Schema: refSchema,
		References: []sr.SchemaReference{{Name: "t.Address", Subject: "address", Version: 1}}}},
	{Subject: "docs-value", Version: 1, ID: 3, Schema: sr.Schema{Type: sr.TypeJSON, Schema: `{"type":"object"}`}},
	{Subject: "common.proto", Version: 1, ID: 11, Schema: sr.Schema{Type: sr.TypeProtobuf, Schema: `syntax = "proto3"; package c; message Addr { string city = 1; }`}},
	{Subject: "people-value", Version: 1, ID: 12, Schema: sr.Schema{Type: sr.TypeProtobuf,
		Schema:     `syntax = "proto3"; package p; import "common.proto"; message Person { string name = 1; c.Addr home = 2; }`,
		References: []sr.SchemaReference{{Name: "common.proto", Subject: "common.proto", Version: 1}}}},
	{Subject: "pb-value", Version: 1, ID: 4, Schema: sr.Schema{Type: sr.TypeProtobuf, Schema: `syntax = "proto3"; message M { int64 a = 1; }`}},
}

func wire(id int, payload string) []byte {
	b, _ := new(sr.ConfluentHeader).AppendEncode(nil, id, nil)
	return append(b, payload...)
}

func newRegistry(t *testing.T, url, user, pass, decode string) *Registry {
	t.Helper()
	r, err := New(Options{URL: url, Username: user, Password: pass, Decode: decode}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	r.SetBackoff(5*time.Millisecond, 50*time.Millisecond)
	return r
}

func TestResolveCachesByID(t *testing.T) {
	srv := testkit.StartRegistry(t, seeds, "", "")
	r := newRegistry(t, srv.URL(), "", "", "both")
	recs := []*kgo.Record{
		{Key: wire(1, ""), Value: wire(2, "")},
		{Value: wire(3, "{}")},
		{Value: wire(4, "")},
		{Value: wire(12, "")},
		{Value: wire(99, "")},
		{Value: []byte("no header")},
		{Value: wire(1, "")},
	}
	if err := r.Resolve(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
	for _, id := range []int{1, 2} {
		s, ok := r.Lookup(id)
		if !ok || s.Err != nil || s.Avro == nil {
			t.Fatalf("id %d: %+v, %v", id, s, ok)
		}
	}
	if s, _ := r.Lookup(2); !strings.Contains(s.Avro.String(), "Move") {
		t.Errorf("id 2 parsed as %s", s.Avro)
	}
	if s, ok := r.Lookup(3); !ok || s.Err != nil || s.Type != sr.TypeJSON {
		t.Errorf("id 3: %+v", s)
	}
	if s, _ := r.Lookup(4); s == nil || s.Err != nil || s.Proto == nil || s.Proto.Messages().Get(0).Name() != "M" {
		t.Errorf("id 4 (protobuf): %+v", s)
	}
	s, ok := r.Lookup(99)
	if !ok || !errors.Is(s.Err, ErrUndecodable) || !strings.Contains(s.Err.Error(), "schema id 99 does not exist") {
		t.Errorf("id 99: %+v", s)
	}
	// A Protobuf schema that imports another subject's .proto.
	s12, _ := r.Lookup(12)
	if s12 == nil || s12.Err != nil || s12.Proto.Messages().Get(0).Fields().ByName("home").Message().FullName() != "c.Addr" {
		t.Errorf("id 12 (protobuf with a reference): %+v", s12)
	}
	if st := r.Stats(); st.Fetched != 5 || st.Missing != 1 || st.Retries != 0 {
		t.Errorf("stats %+v, want 5 fetched (ids 1-4, 12) and 1 missing", st)
	}
	// Cached: a second pass asks nothing, even with the registry gone.
	srv.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := r.Resolve(ctx, recs); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ID([]byte("no header")); !errors.Is(err, ErrUndecodable) {
		t.Errorf("ID of bytes without a header: %v", err)
	}
}

// TestResolveWaitsForTheRegistry: a registry that is down is retried until
// it is back; nothing is given up, and ctx still ends the wait.
func TestResolveWaitsForTheRegistry(t *testing.T) {
	srv := testkit.StartRegistry(t, seeds, "", "")
	r := newRegistry(t, srv.URL(), "", "", "value")
	srv.Stop()

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := r.Resolve(ctx, []*kgo.Record{{Value: wire(1, "")}}); !errors.Is(err, context.Canceled) {
		t.Fatalf("Resolve with an ended context and no registry: %v", err)
	}

	done := make(chan error, 1)
	go func() { done <- r.Resolve(t.Context(), []*kgo.Record{{Value: wire(1, "")}}) }()
	deadline := time.Now().Add(time.Minute)
	for r.Stats().Retries < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("no retries seen: %+v", r.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !r.Stats().Waiting {
		t.Error("Stats().Waiting is false while the registry is down")
	}
	srv.Start()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("Resolve did not return once the registry was back")
	}
	if s, ok := r.Lookup(1); !ok || s.Err != nil {
		t.Fatalf("id 1 after the outage: %+v", s)
	}
	if r.Stats().Waiting {
		t.Error("still waiting")
	}
}

func TestBasicAuth(t *testing.T) {
	srv := testkit.StartRegistry(t, seeds, "key", "s3cret-pass")
	bad := newRegistry(t, srv.URL(), "key", "wrong-pass", "value")
	err := bad.Resolve(t.Context(), []*kgo.Record{{Value: wire(1, "")}})
	if err == nil || !strings.Contains(err.Error(), "refused the credentials") || strings.Contains(err.Error(), "wrong-pass") {
		t.Fatalf("wrong password: %v", err)
	}
	good := newRegistry(t, srv.URL(), "key", "s3cret-pass", "value")
	if err := good.Resolve(t.Context(), []*kgo.Record{{Value: wire(1, "")}}); err != nil {
		t.Fatal(err)
	}
	if s, _ := good.Lookup(1); s == nil || s.Err != nil {
		t.Fatalf("id 1: %+v", s)
	}
}
