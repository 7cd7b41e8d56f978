package runner

import (
	"log/slog"
	"os"
	"runtime"
)

// fileProcsPerCore is how many Ps a run on a local directory gets per
// core Go would use.
//
// A local commit blocks in fsync (the data file's, its ledger entry's,
// their directories'), for the time the disk takes to flush its cache. Go
// takes a P from a goroutine in a system call only when sysmon looks (20
// µs at the soonest, up to 10 ms once it has been idle), and handing the P
// to another thread costs a wake-up; with one P per core, two commits in
// fsync hold both Ps of a 2-core machine, and the poll loop, the Kafka
// client's readers and every encoder wait meanwhile. With twice the Ps the
// other goroutines run on while fsyncs wait, and more fsyncs are in flight
// at once, which the block layer merges into fewer cache flushes. Measured
// on 2 cores (docs/bench.md, "Twice the Ps on a local directory"): at
// 1,000 partitions 17% faster (medians of 5 rounds) with a third fewer
// flushes, at 16 partitions the same, with zstd 2% slower: CPU-bound work
// gains nothing from the extra Ps, and the OS shares the cores among
// their threads. Four or eight times did no better.
const fileProcsPerCore = 2

// goMaxProcs is the GOMAXPROCS for a run writing to storageURL, given the
// current one (procs), the cores the machine has (cpus) and the GOMAXPROCS
// environment variable (env): fileProcsPerCore times the cores for a local
// directory, procs otherwise. Only Go's own choice without a quota (procs
// equal to cpus) is raised, so a second run in one process (tests run the
// command in-process) keeps what the first set. It is procs as well when
// the user set GOMAXPROCS, and when procs is below cpus: Go then follows a
// CPU quota (a container's cgroup limit), and more threads running than
// the quota would spend it early in each period and be throttled for the
// rest, where without one the OS shares the cores among them. The remote
// stores' requests wait in the network poller, which holds no P.
func goMaxProcs(storageURL, env string, procs, cpus int) int {
	if env != "" || procs != cpus || storageScheme(storageURL) != "file" {
		return procs
	}
	return cpus * fileProcsPerCore
}

// raiseProcs sets GOMAXPROCS for a run writing to storageURL (goMaxProcs)
// and logs it when it changed: a process-wide setting, for the run command
// alone.
func raiseProcs(storageURL string, log *slog.Logger) {
	procs := runtime.GOMAXPROCS(0)
	n := goMaxProcs(storageURL, os.Getenv("GOMAXPROCS"), procs, runtime.NumCPU())
	if n == procs {
		return
	}
	runtime.GOMAXPROCS(n)
	log.Info("GOMAXPROCS raised: commits to a local directory wait in fsync holding a P; set GOMAXPROCS to choose", "gomaxprocs", n, "cores", procs)
}
