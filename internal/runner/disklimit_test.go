package runner

import (
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/spillway/spillway/internal/budget"
	"github.com/spillway/spillway/internal/config"
)

// smallFS mounts a tmpfs of size bytes at a temp directory: a real file
// system with little free space, which no flag can fake for statfs. It
// needs CAP_SYS_ADMIN (the test runs as root on the CI machine); without
// it (or where mount is not offered) the test is skipped.
func smallFS(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENOSYS) {
			t.Skipf("mounting a tmpfs needs CAP_SYS_ADMIN: %v", err)
		}
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// TestDiskLimitAutoTooSmall: disk_limit auto on a file system with less
// free space than MinDiskLimit needs is refused when the run starts, and
// `config check` says so beforehand, also for a spool directory that does
// not exist yet (a run would make it there).
func TestDiskLimitAutoTooSmall(t *testing.T) {
	small := smallFS(t, "8m")
	cfg := config.Default()
	cfg.Kafka.Topics = []string{"events"}
	cfg.Storage.URL = "file:///tmp/out"
	cfg.Backpressure.MemoryLimit = "256MiB"
	cfg.Backpressure.SpoolDir = filepath.Join(small, "not", "yet")
	cfg.Backpressure.DiskLimit = "auto"

	w, err := MemoryWarnings(cfg)
	if err != nil || len(w) != 1 || !strings.Contains(w[0], "disk_limit auto takes 80% of it, below the minimum of 16MiB") ||
		!strings.Contains(w[0], cfg.Backpressure.SpoolDir) || !strings.Contains(w[0], "a run here would not start") {
		t.Errorf("config check on an 8 MiB file system: %q %v, want a warning naming the directory and the minimum", w, err)
	}
	cfg.Backpressure.DiskLimit = "1GiB" // a size is taken as given: the spool stops at the disk's own end
	if w, err := MemoryWarnings(cfg); err != nil || len(w) != 0 {
		t.Errorf("disk_limit 1GiB: %q %v, want no warning", w, err)
	}

	cfg.Backpressure.DiskLimit = "auto"
	b := budget.New(64<<20, 0)
	sp, err := openSpool(cfg.Backpressure, b, encodeSlots(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil {
		sp.Close()
		t.Fatal("openSpool on an 8 MiB file system with disk_limit auto: nil error")
	}
	if !strings.Contains(err.Error(), "below the minimum of 16MiB") {
		t.Errorf("openSpool: %v, want the same cause as config check", err)
	}

	big := t.TempDir()
	cfg.Backpressure.SpoolDir = filepath.Join(big, "spool")
	if w, err := MemoryWarnings(cfg); err != nil || len(w) != 0 {
		t.Errorf("config check with room: %q %v, want no warning", w, err)
	}
}
