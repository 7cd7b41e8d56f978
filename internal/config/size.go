package config

import (
	"fmt"
	"strings"

	"github.com/spillway/spillway/internal/bytesize"
)

// Size is a byte count. In YAML and the environment it takes units:
// "64MiB", "1GB", "512KiB" or a bare number of bytes (package bytesize).
type Size = bytesize.Size

// Byte units.
const (
	KiB = bytesize.KiB
	MiB = bytesize.MiB
	GiB = bytesize.GiB
	TiB = bytesize.TiB
)

// ParseSize parses a byte count such as "64MiB"; see bytesize.Parse.
func ParseSize(s string) (Size, error) { return bytesize.Parse(s) }

// MemoryLimitBytes interprets memory_limit. auto is true when the limit is
// "auto" (case-insensitive), meaning: use the cgroup limit, else a safe
// default; the caller decides both, since only it can read the cgroup.
// Otherwise limit is the parsed size in bytes.
func (b Backpressure) MemoryLimitBytes() (limit int64, auto bool, err error) {
	if strings.EqualFold(strings.TrimSpace(b.MemoryLimit), "auto") {
		return 0, true, nil
	}
	v, err := ParseSize(b.MemoryLimit)
	if err != nil {
		return 0, false, fmt.Errorf("backpressure.memory_limit: %w", err)
	}
	return int64(v), false, nil
}

// DiskLimitBytes interprets disk_limit as MemoryLimitBytes does
// memory_limit: auto is true for "auto", which the caller resolves from
// spool_dir's file system (see DiskAutoPercent).
func (b Backpressure) DiskLimitBytes() (limit int64, auto bool, err error) {
	if strings.EqualFold(strings.TrimSpace(b.DiskLimit), "auto") {
		return 0, true, nil
	}
	v, err := ParseSize(b.DiskLimit)
	if err != nil {
		return 0, false, fmt.Errorf("backpressure.disk_limit: %w", err)
	}
	return int64(v), false, nil
}

// DiskAutoPercent is the share of the space free on spool_dir's file
// system, when Spillway starts, that disk_limit auto takes.
const DiskAutoPercent = 80

// MinDiskLimit is the smallest disk_limit: a few batches of records.
const MinDiskLimit = 16 * MiB
