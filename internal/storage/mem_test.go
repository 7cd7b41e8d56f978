package storage_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/spillway/spillway/internal/storage"
	"github.com/spillway/spillway/internal/storage/storagetest"
)

func TestMemWriteCommitListRead(t *testing.T) {
	b := storagetest.Open(t, "mem://", storage.Options{PartSize: 4096})
	if b.WriterMemory() <= 0 {
		t.Errorf("WriterMemory = %d, want the gocloud writer's own buffer counted", b.WriterMemory())
	}
	if !strings.HasPrefix(b.String(), "mem:") {
		t.Errorf("String = %q", b.String())
	}
	data := storagetest.Payload(50_000)
	w, err := b.NewWriter(context.Background(), "t/0/a.jsonl", map[string]string{"spillway-topic": "t"})
	if err != nil {
		t.Fatal(err)
	}
	storagetest.WriteChunks(t, w, data)
	if objs := storagetest.List(t, b, ""); len(objs) != 0 {
		t.Fatalf("List before Commit = %v", objs)
	}
	if _, err := b.Read(context.Background(), "t/0/a.jsonl"); err == nil {
		t.Fatal("Read succeeded before Commit")
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	storagetest.Put(t, b, "t/1/b.jsonl", []byte("b"))
	storagetest.Put(t, b, "u.jsonl", []byte("u"))

	if got := storagetest.Read(t, b, "t/0/a.jsonl"); !bytes.Equal(got, data) {
		t.Fatalf("Read: %d bytes, want %d", len(got), len(data))
	}
	for prefix, want := range map[string][]string{
		"":     {"t/0/a.jsonl", "t/1/b.jsonl", "u.jsonl"},
		"t/":   {"t/0/a.jsonl", "t/1/b.jsonl"},
		"t/1":  {"t/1/b.jsonl"},
		"u":    {"u.jsonl"},
		"none": nil,
	} {
		if got := storagetest.Keys(storagetest.List(t, b, prefix)); !slices.Equal(got, want) {
			t.Errorf("List(%q) = %v, want %v", prefix, got, want)
		}
	}
	objs := storagetest.List(t, b, "t/0/")
	if len(objs) != 1 || objs[0].Size != int64(len(data)) {
		t.Fatalf("List sizes = %+v", objs)
	}
	if _, err := b.Read(context.Background(), "missing"); err == nil {
		t.Fatal("Read(missing) succeeded")
	}
}

func TestMemAbortLeavesNothing(t *testing.T) {
	b := storagetest.Open(t, "mem://", storage.Options{PartSize: 4096})
	for _, size := range []int{0, 10, 50_000} {
		w, err := b.NewWriter(context.Background(), "k", nil)
		if err != nil {
			t.Fatal(err)
		}
		storagetest.WriteChunks(t, w, storagetest.Payload(size))
		w.Abort()
		if objs := storagetest.List(t, b, ""); len(objs) != 0 {
			t.Fatalf("size %d: List after Abort = %v", size, objs)
		}
	}
}

func TestMemCreateOnly(t *testing.T) {
	b := storagetest.Open(t, "mem://", storage.Options{})
	storagetest.Put(t, b, "k", []byte("first"))
	w, err := b.NewWriter(context.Background(), "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	storagetest.WriteChunks(t, w, []byte("second"))
	if err := w.Commit(); !errors.Is(err, storage.ErrExists) {
		t.Fatalf("second Commit = %v, want ErrExists", err)
	}
	if got := string(storagetest.Read(t, b, "k")); got != "first" {
		t.Fatalf("object replaced by %q", got)
	}
}

// Errors from Open are logged and printed; they must not carry the
// credentials that redact.URL removes.
func TestOpenErrorsDoNotLeakCredentials(t *testing.T) {
	for _, raw := range []string{
		"s3://AKIA:SECRETVALUE@bucket/\x7f",       // url.Parse fails
		"nosuchscheme://AKIA:SECRETVALUE@bucket/", // no driver
		"mem://?secret_access_key=SECRETVALUE",    // driver rejects the query
	} {
		_, err := storage.Open(context.Background(), raw, storage.Options{})
		if err == nil {
			t.Fatalf("Open(%q) succeeded", raw)
		}
		if strings.Contains(err.Error(), "SECRETVALUE") {
			t.Errorf("Open error leaks the secret: %v", err)
		}
	}
}
