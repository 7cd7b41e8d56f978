package budget_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spillway/spillway/internal/budget"
)

// fakeRoot builds a directory that looks like / for DetectLimit: files maps
// paths relative to the root to their contents.
func fakeRoot(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for rel, content := range files {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestDetectLimit(t *testing.T) {
	const mib = 1 << 20
	tests := []struct {
		name  string
		files map[string]string
		want  int64
		where string // relative to root; "" when not found
	}{
		{
			name: "v2 root cgroup (cgroup namespace)",
			files: map[string]string{
				"proc/self/cgroup":         "0::/\n",
				"sys/fs/cgroup/memory.max": "536870912\n",
			},
			want: 512 * mib, where: "sys/fs/cgroup/memory.max",
		},
		{
			name: "v2 nested cgroup",
			files: map[string]string{
				"proc/self/cgroup": "0::/kubepods/burstable/pod1/abc\n",
				"sys/fs/cgroup/kubepods/burstable/pod1/abc/memory.max": "268435456",
			},
			want: 256 * mib, where: "sys/fs/cgroup/kubepods/burstable/pod1/abc/memory.max",
		},
		{
			name: "v2 max means no limit",
			files: map[string]string{
				"proc/self/cgroup":         "0::/\n",
				"sys/fs/cgroup/memory.max": "max\n",
			},
		},
		{
			name: "v1 memory controller",
			files: map[string]string{
				"proc/self/cgroup": "12:pids:/user.slice\n" +
					"11:cpu,cpuacct:/user.slice\n" +
					"4:memory:/user.slice/job\n" +
					"1:name=systemd:/user.slice\n",
				"sys/fs/cgroup/memory/user.slice/job/memory.limit_in_bytes": "1073741824\n",
			},
			want: 1024 * mib, where: "sys/fs/cgroup/memory/user.slice/job/memory.limit_in_bytes",
		},
		{
			name: "v1 memory in a combined controller list",
			files: map[string]string{
				"proc/self/cgroup": "7:cpuset,memory:/x\n",
				"sys/fs/cgroup/memory/x/memory.limit_in_bytes": "134217728",
			},
			want: 128 * mib, where: "sys/fs/cgroup/memory/x/memory.limit_in_bytes",
		},
		{
			name: "v1 controller name must match exactly",
			files: map[string]string{
				"proc/self/cgroup": "7:memsw:/x\n",
				"sys/fs/cgroup/memory/x/memory.limit_in_bytes": "134217728",
			},
		},
		{
			name: "v1 huge number means no limit",
			files: map[string]string{
				"proc/self/cgroup":                           "4:memory:/\n",
				"sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n",
			},
		},
		{
			name: "hybrid: v2 line without memory.max, v1 memory has the limit",
			files: map[string]string{
				"proc/self/cgroup": "4:memory:/svc\n0::/svc\n",
				"sys/fs/cgroup/memory/svc/memory.limit_in_bytes": "201326592",
			},
			want: 192 * mib, where: "sys/fs/cgroup/memory/svc/memory.limit_in_bytes",
		},
		{
			name: "hybrid: v1 unlimited, unified has a limit",
			files: map[string]string{
				"proc/self/cgroup": "4:memory:/svc\n0::/svc\n",
				"sys/fs/cgroup/memory/svc/memory.limit_in_bytes": "9223372036854771712",
				"sys/fs/cgroup/svc/memory.max":                   "100663296",
			},
			want: 96 * mib, where: "sys/fs/cgroup/svc/memory.max",
		},
		{
			name:  "no proc/self/cgroup",
			files: map[string]string{"etc/hostname": "x"},
		},
		{
			name: "cgroup listed but limit file missing",
			files: map[string]string{
				"proc/self/cgroup": "0::/gone\n",
			},
		},
		{
			name: "garbage limit",
			files: map[string]string{
				"proc/self/cgroup":         "0::/\n",
				"sys/fs/cgroup/memory.max": "lots\n",
			},
		},
		{
			name: "zero limit is not a limit",
			files: map[string]string{
				"proc/self/cgroup":         "0::/\n",
				"sys/fs/cgroup/memory.max": "0\n",
			},
		},
		{
			name: "malformed lines are skipped",
			files: map[string]string{
				"proc/self/cgroup":         "junk\n\n0::/\n",
				"sys/fs/cgroup/memory.max": "67108864\n",
			},
			want: 64 * mib, where: "sys/fs/cgroup/memory.max",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := fakeRoot(t, tt.files)
			got, where, ok := budget.DetectLimit(root)
			if ok != (tt.where != "") {
				t.Fatalf("DetectLimit = %d, %q, %v; want found=%v", got, where, ok, tt.where != "")
			}
			if !ok {
				if got != 0 || where != "" {
					t.Fatalf("not found but returned %d, %q", got, where)
				}
				return
			}
			if got != tt.want {
				t.Fatalf("limit = %d, want %d", got, tt.want)
			}
			if want := filepath.Join(root, filepath.FromSlash(tt.where)); where != want {
				t.Fatalf("where = %q, want %q", where, want)
			}
		})
	}
}

// In a cgroup v1 container without a cgroup namespace (Docker's default on
// v1 hosts), /proc/self/cgroup names the host path (/docker/<id>) while the
// container's own cgroup is mounted at /sys/fs/cgroup/memory itself.
func TestDetectLimitV1ContainerWithoutNamespace(t *testing.T) {
	root := fakeRoot(t, map[string]string{
		"proc/self/cgroup":                           "4:memory:/docker/0123456789abcdef\n",
		"sys/fs/cgroup/memory/memory.limit_in_bytes": "536870912\n",
	})
	got, _, ok := budget.DetectLimit(root)
	if !ok || got != 512<<20 {
		t.Fatalf("DetectLimit = %d, %v; want 512MiB from the mount root", got, ok)
	}
}

func TestNewPlan(t *testing.T) {
	const mib = int64(1 << 20)
	tests := []struct {
		process  int64
		data     int64
		goLimit  int64
		fetchMax int32
		reserved int64
	}{
		// Data = half; fetch = Data/4/2 fetches/4 = Data/32; reserved = 2*fetch*4.
		{64 * mib, 32 * mib, 64 * mib * 85 / 100, 1 << 20, 8 * mib},
		{1024 * mib, 512 * mib, 1024 * mib * 85 / 100, 16 << 20, 128 * mib},
		{3000 * mib, 1500 * mib, 3000 * mib * 85 / 100, int32(1500 * mib / 32), 2 * 4 * (1500 * mib / 32)},
		// The fetch size is capped at 64MiB.
		{16 << 30, 8 << 30, (16 << 30) * 85 / 100, 64 << 20, 2 * 4 * 64 * mib},
	}
	for _, tt := range tests {
		p, err := budget.NewPlan(tt.process)
		if err != nil {
			t.Fatalf("NewPlan(%d): %v", tt.process, err)
		}
		if p.Process != tt.process || p.Data != tt.data || p.GoLimit != tt.goLimit ||
			p.FetchMax != tt.fetchMax || p.Fetches != 2 || p.Reserved != tt.reserved {
			t.Errorf("NewPlan(%d) = %+v; want data %d golimit %d fetch 2x%d reserved %d",
				tt.process, p, tt.data, tt.goLimit, tt.fetchMax, tt.reserved)
		}
		if p.Reserved > p.Data/4 {
			t.Errorf("NewPlan(%d): reserved %d is more than a quarter of data %d", tt.process, p.Reserved, p.Data)
		}
		if p.GoLimit >= p.Process || p.Data >= p.GoLimit {
			t.Errorf("NewPlan(%d): want data < GOMEMLIMIT < process, got %+v", tt.process, p)
		}
	}
}

func TestNewPlanRejectsSmallLimits(t *testing.T) {
	for _, n := range []int64{0, -1, 1 << 20, 64<<20 - 1} {
		_, err := budget.NewPlan(n)
		if err == nil {
			t.Fatalf("NewPlan(%d) accepted a limit below 64MiB", n)
		}
		if !strings.Contains(err.Error(), "64MiB") {
			t.Errorf("NewPlan(%d) error %q does not name the minimum", n, err)
		}
	}
}

func TestPlanString(t *testing.T) {
	p, err := budget.NewPlan(1 << 30)
	if err != nil {
		t.Fatal(err)
	}
	s := p.String()
	for _, want := range []string{"process limit 1024MiB", "GOMEMLIMIT 870MiB", "data budget 512MiB", "fetch 2x16384KiB", "records up to 128MiB"} {
		if !strings.Contains(s, want) {
			t.Errorf("Plan.String() = %q, missing %q", s, want)
		}
	}
}

func TestDefaultMemoryLimitIsAValidPlan(t *testing.T) {
	if _, err := budget.NewPlan(budget.DefaultMemoryLimit); err != nil {
		t.Fatalf("the default limit does not make a plan: %v", err)
	}
}
