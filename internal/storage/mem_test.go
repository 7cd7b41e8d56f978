package storage_test

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/spillway/spillway/internal/storage"
)

func TestMemWriteCommitListRead(t *testing.T) {
	b := open(t, "mem://", storage.Options{PartSize: 4096})
	if b.WriterMemory() <= 0 {
		t.Errorf("WriterMemory = %d, want the gocloud writer's own buffer counted", b.WriterMemory())
	}
	if !strings.HasPrefix(b.String(), "mem:") {
		t.Errorf("String = %q", b.String())
	}
	data := payload(50_000)
	w, err := b.NewWriter(context.Background(), "t/0/a.jsonl", map[string]string{"spillway-topic": "t"})
	if err != nil {
		t.Fatal(err)
	}
	writeChunks(t, w, data)
	if objs := list(t, b, ""); len(objs) != 0 {
		t.Fatalf("List before Commit = %v", objs)
	}
	if _, err := b.Read(context.Background(), "t/0/a.jsonl"); err == nil {
		t.Fatal("Read succeeded before Commit")
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	put(t, b, "t/1/b.jsonl", []byte("b"))
	put(t, b, "u.jsonl", []byte("u"))

	if got := read(t, b, "t/0/a.jsonl"); !bytes.Equal(got, data) {
		t.Fatalf("Read: %d bytes, want %d", len(got), len(data))
	}
	for prefix, want := range map[string][]string{
		"":     {"t/0/a.jsonl", "t/1/b.jsonl", "u.jsonl"},
		"t/":   {"t/0/a.jsonl", "t/1/b.jsonl"},
		"t/1":  {"t/1/b.jsonl"},
		"u":    {"u.jsonl"},
		"none": nil,
	} {
		if got := keys(list(t, b, prefix)); !slices.Equal(got, want) {
			t.Errorf("List(%q) = %v, want %v", prefix, got, want)
		}
	}
	objs := list(t, b, "t/0/")
	if len(objs) != 1 || objs[0].Size != int64(len(data)) {
		t.Fatalf("List sizes = %+v", objs)
	}
	if _, err := b.Read(context.Background(), "missing"); err == nil {
		t.Fatal("Read(missing) succeeded")
	}
}

func TestMemAbortLeavesNothing(t *testing.T) {
	b := open(t, "mem://", storage.Options{PartSize: 4096})
	for _, size := range []int{0, 10, 50_000} {
		w, err := b.NewWriter(context.Background(), "k", nil)
		if err != nil {
			t.Fatal(err)
		}
		writeChunks(t, w, payload(size))
		w.Abort()
		if objs := list(t, b, ""); len(objs) != 0 {
			t.Fatalf("size %d: List after Abort = %v", size, objs)
		}
	}
}

func TestMemCreateOnly(t *testing.T) {
	b := open(t, "mem://", storage.Options{})
	put(t, b, "k", []byte("first"))
	w, err := b.NewWriter(context.Background(), "k", nil)
	if err != nil {
		t.Fatal(err)
	}
	writeChunks(t, w, []byte("second"))
	if err := w.Commit(); !errors.Is(err, storage.ErrExists) {
		t.Fatalf("second Commit = %v, want ErrExists", err)
	}
	if got := string(read(t, b, "k")); got != "first" {
		t.Fatalf("object replaced by %q", got)
	}
}

func TestRedact(t *testing.T) {
	for _, tc := range []struct {
		in        string
		gone      []string // must not appear
		kept      []string // must still appear
		unchanged bool
	}{
		{in: "file:///var/lib/spillway", unchanged: true},
		{in: "s3://bucket?region=eu-west-1&endpoint=http://127.0.0.1:7070&use_path_style=true", unchanged: true},
		{
			in:   "s3://AKIAEXAMPLE:wJalrXUtnFEMI@bucket/prefix?region=us-east-1",
			gone: []string{"AKIAEXAMPLE", "wJalrXUtnFEMI"},
			kept: []string{"s3://", "bucket", "/prefix", "region=us-east-1"},
		},
		{
			in:   "s3://onlyuser@bucket",
			gone: []string{"onlyuser"},
			kept: []string{"bucket"},
		},
		{
			in:   "s3://bucket?region=us-east-1&access_key_id=AKIAID&secret_access_key=SECRET1&session_token=TOKEN1",
			gone: []string{"AKIAID", "SECRET1", "TOKEN1"},
			kept: []string{"region=us-east-1", "access_key_id=", "secret_access_key=", "session_token="},
		},
		{
			in:   "azblob://container?sv=2021-08-06&sig=SIGNATURE123&se=2030-01-01",
			gone: []string{"SIGNATURE123"},
			kept: []string{"sv=2021-08-06", "se=2030-01-01"},
		},
		{
			in:   "s3://b?X-Amz-Credential=CRED1&X-Amz-Signature=SIG2&X-Amz-Security-Token=TOK3&Password=PW4&API_KEY=K5",
			gone: []string{"CRED1", "SIG2", "TOK3", "PW4", "K5"},
		},
	} {
		got := storage.Redact(tc.in)
		if tc.unchanged && got != tc.in {
			t.Errorf("Redact(%q) = %q, want it unchanged", tc.in, got)
		}
		for _, s := range tc.gone {
			if strings.Contains(got, s) {
				t.Errorf("Redact(%q) = %q still contains %q", tc.in, got, s)
			}
		}
		for _, s := range tc.kept {
			if !strings.Contains(got, s) {
				t.Errorf("Redact(%q) = %q lost %q", tc.in, got, s)
			}
		}
	}
	if got := storage.Redact("s3://user:SECRET@bucket/\x7f"); strings.Contains(got, "SECRET") {
		t.Errorf("Redact of an unparseable URL = %q", got)
	}
}

// Errors from Open are logged and printed; they must not carry the
// credentials that Redact removes.
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
