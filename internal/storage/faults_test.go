package storage_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/spillway/spillway/internal/storage"
	"github.com/spillway/spillway/internal/storage/storagetest"
)

// BeforeCommit sees every commit's key and decides whether it happens; a
// refused commit leaves nothing behind, not even a temp file.
func TestFaultsBeforeCommit(t *testing.T) {
	refuse := errors.New("refused")
	var seen []string
	faults := &storage.Faults{BeforeCommit: func(key string) error {
		seen = append(seen, key)
		if key == "no" {
			return refuse
		}
		return nil
	}}
	b, dir := storagetest.OpenLocal(t, storage.Options{Faults: faults})
	for _, key := range []string{"yes", "no"} {
		w, err := b.NewWriter(t.Context(), key, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte("data")); err != nil {
			t.Fatal(err)
		}
		err = w.Commit()
		if want := map[string]error{"yes": nil, "no": refuse}[key]; !errors.Is(err, want) {
			t.Fatalf("Commit(%s) = %v, want %v", key, err, want)
		}
	}
	if !slices.Equal(seen, []string{"yes", "no"}) {
		t.Fatalf("BeforeCommit saw %v", seen)
	}
	if got := storagetest.Files(t, dir); !slices.Equal(got, []string{"yes"}) {
		t.Fatalf("files %v, want only the committed object", got)
	}
}
