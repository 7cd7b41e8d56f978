package budget

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultMemoryLimit is used when memory_limit is auto and no cgroup limit
// is found: small enough to be safe on a laptop, large enough for the
// defaults (8MiB parts, 4 uploads).
const DefaultMemoryLimit = 1 << 30

// MinMemoryLimit is the smallest process limit NewPlan accepts: below it
// the fetch buffers and one open file's writer would not fit in the data
// budget. config refuses a smaller backpressure.memory_limit with it.
const MinMemoryLimit = 64 << 20

// DetectLimit finds the memory limit of the cgroup this process runs in,
// v2 (memory.max) or v1 (memory.limit_in_bytes). It returns ok=false when
// there is none (no cgroup, or "max"). root is normally "/".
func DetectLimit(root string) (limit int64, where string, ok bool) {
	f, err := os.Open(filepath.Join(root, "proc/self/cgroup"))
	if err != nil {
		return 0, "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		var file string
		switch {
		case parts[0] == "0" && parts[1] == "":
			file = filepath.Join(root, "sys/fs/cgroup", parts[2], "memory.max")
		case hasController(parts[1], "memory"):
			// Inside a container without its own cgroup namespace, the path
			// names the host's hierarchy (/docker/<id>) but the container's
			// own cgroup is mounted at the root: try the path, then its
			// parents, up to the mount root.
			for p := parts[2]; ; p = filepath.Dir(p) {
				file = filepath.Join(root, "sys/fs/cgroup/memory", p, "memory.limit_in_bytes")
				if n, ok := readLimit(file); ok {
					return n, file, true
				}
				if p == "/" || p == "." {
					break
				}
			}
			continue
		default:
			continue
		}
		if n, ok := readLimit(file); ok {
			return n, file, true
		}
	}
	return 0, "", false
}

func hasController(list, c string) bool {
	for _, x := range strings.Split(list, ",") {
		if x == c {
			return true
		}
	}
	return false
}

func readLimit(file string) (int64, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0, false
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	// cgroup v1 reports "no limit" as a huge page-aligned number.
	if err != nil || n <= 0 || n >= 1<<60 {
		return 0, false
	}
	return n, true
}

// Plan splits a process memory limit into the parts Spillway sizes from it.
type Plan struct {
	Process  int64 // the limit the process must stay under
	GoLimit  int64 // GOMEMLIMIT: the Go runtime collects harder near it
	Data     int64 // the byte budget for record data
	FetchMax int32 // kgo FetchMaxBytes
	Fetches  int   // kgo MaxConcurrentFetches
	Reserved int64 // fetch buffers reserved inside Data
}

// NewPlan derives the budget from a process limit. Half the limit is for
// data; the rest covers the Go runtime's GC headroom (garbage from encoding
// is collected, not freed at once), goroutine stacks, the binary and TLS
// buffers. A quarter of the data budget is reserved for the Kafka client's
// fetch buffers, divided by 4 because decompression can grow a fetch.
func NewPlan(process int64) (Plan, error) {
	if process < MinMemoryLimit {
		return Plan{}, fmt.Errorf("memory limit %d bytes is below the minimum of %dMiB", process, MinMemoryLimit>>20)
	}
	p := Plan{Process: process, GoLimit: process * 85 / 100, Data: process / 2, Fetches: 2}
	fetch := p.Data / 4 / int64(p.Fetches) / 4
	if fetch > 64<<20 {
		fetch = 64 << 20
	}
	p.FetchMax = int32(fetch)
	p.Reserved = int64(p.Fetches) * fetch * 4
	return p, nil
}

func (p Plan) String() string {
	return fmt.Sprintf("process limit %dMiB, GOMEMLIMIT %dMiB, data budget %dMiB (fetch %dx%dKiB)",
		p.Process>>20, p.GoLimit>>20, p.Data>>20, p.Fetches, p.FetchMax>>10)
}
