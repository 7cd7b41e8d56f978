package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// diskStats are a block device's counters from /proc/diskstats: what
// reached the disk, which syscall counts can't say (how many fsyncs the
// kernel merged into one cache flush).
type diskStats struct {
	writes, flushes int64
	busyMS          int64 // milliseconds the device had requests in flight
	flushMS         int64 // milliseconds its flushes took, summed
}

func (d diskStats) sub(o diskStats) diskStats {
	return diskStats{writes: d.writes - o.writes, flushes: d.flushes - o.flushes, busyMS: d.busyMS - o.busyMS, flushMS: d.flushMS - o.flushMS}
}

// diskOf names the block device that holds path, as /proc/diskstats
// does ("" where it can't tell: no /proc, or a filesystem on no device).
func diskOf(path string) string {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return ""
	}
	major, minor := strconv.FormatUint(uint64(unix.Major(st.Dev)), 10), strconv.FormatUint(uint64(unix.Minor(st.Dev)), 10)
	if f := diskstatsLine(func(f []string) bool { return f[0] == major && f[1] == minor }); f != nil {
		return f[2]
	}
	return ""
}

// readDisk reads dev's counters; zero where there are none. The fields
// are the kernel's (Documentation/admin-guide/iostats.rst): the 8th of a
// device's line after its name is writes completed, the 10th the time it
// was busy, the 16th flushes completed and the 17th the time they took
// (kernels from 5.5).
func readDisk(dev string) diskStats {
	if dev == "" {
		return diskStats{}
	}
	f := diskstatsLine(func(f []string) bool { return f[2] == dev })
	if f == nil {
		return diskStats{}
	}
	f = f[3:]
	var d diskStats
	if len(f) > 9 {
		d.writes, _ = strconv.ParseInt(f[4], 10, 64)
		d.busyMS, _ = strconv.ParseInt(f[9], 10, 64)
	}
	if len(f) > 16 {
		d.flushes, _ = strconv.ParseInt(f[15], 10, 64)
		d.flushMS, _ = strconv.ParseInt(f[16], 10, 64)
	}
	return d
}

// diskstatsLine returns the fields of the first line of /proc/diskstats
// (major, minor, name, counters) that match accepts, or nil.
func diskstatsLine(match func(fields []string) bool) []string {
	b, err := os.ReadFile("/proc/diskstats")
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 3 && match(f) {
			return f
		}
	}
	return nil
}

func (d diskStats) String() string {
	return fmt.Sprintf("disk %d writes, %d flushes (%.2fs), busy %.2fs", d.writes, d.flushes, float64(d.flushMS)/1000, float64(d.busyMS)/1000)
}
