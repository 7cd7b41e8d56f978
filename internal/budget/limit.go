package budget

import (
	"bufio"
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
