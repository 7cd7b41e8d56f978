// Command publishorder measures, in a model of the local backend's commit
// made of plain system calls, what other ways of making a data file and
// its ledger entry durable would save on local disk, before the storage
// API is changed for one (issue #26): 2,000 files of 200 KiB over 1,000
// partitions (userbench's 1000p workload), 64 commits at once (the local
// backend's bound), the orders in alternating rounds:
//
//	serial:    entry (create, write, fsync, rename, fsync its directory),
//	           then the data file (write, fsync, rename, fsync its directory)
//	overlap:   the data file's write and fsync while the entry is written
//	           as above, then the data file's rename and directory fsync
//	syncfs:    (-syncfs) both written without fsync, then each fsync
//	           replaced by a group commit of the whole filesystem (barrier)
//	data-only: (-data-only) the data file alone, as serial writes it:
//	           what publication would cost with no ledger at all
//
// All but data-only make the entry durable before the data file's name is
// visible. None shares a directory fsync between files (the local
// backend's group commit does for the data directory), so read the
// differences, not the totals. The partitions' ledger directories are made
// before the clock starts, or, with -cold, at each partition's first entry,
// as a run's first files make them.
//
//	go run ./internal/bench/publishorder [-dir D] [-rounds 3] [-cold] [-syncfs] [-data-only]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

func main() {
	dir := flag.String("dir", "", "where to write (default: a new directory under the temp dir)")
	rounds := flag.Int("rounds", 3, "rounds of each order")
	files := flag.Int("files", 2000, "data files per round")
	parts := flag.Int("partitions", 1000, "partitions (one ledger directory each)")
	size := flag.Int("size", 200<<10, "bytes per data file")
	workers := flag.Int("workers", 64, "commits at once")
	syncfs := flag.Bool("syncfs", false, "also the syncfs order (see barrier)")
	cold := flag.Bool("cold", false, "make each partition's ledger directories at its first entry, timed (each new directory's parent fsynced, as the local backend does), not beforehand")
	dataOnly := flag.Bool("data-only", false, "also the data files alone, without entries: what no ledger at all would cost")
	flag.Parse()
	orders := []string{"serial", "overlap"}
	if *syncfs {
		orders = append(orders, "syncfs")
	}
	if *dataOnly {
		orders = append(orders, "data-only")
	}
	if err := run(orders, *cold, *dir, *rounds, *files, *parts, *size, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "publishorder:", err)
		os.Exit(1)
	}
}

func run(orders []string, cold bool, dir string, rounds, files, parts, size, workers int) error {
	if dir == "" {
		d, err := os.MkdirTemp("", "publishorder-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	data := make([]byte, size)
	for i := range data {
		data[i] = byte('a' + i%26)
	}
	entry := make([]byte, 600)
	times := map[string][]time.Duration{}
	for r := 0; r < rounds; r++ {
		for _, name := range orders {
			root := filepath.Join(dir, fmt.Sprintf("%s-%d", name, r))
			d, err := round(root, cold, files, parts, workers, data, entry, name)
			if err != nil {
				return err
			}
			times[name] = append(times[name], d)
			fmt.Printf("round %d %-8s %v\n", r+1, name, d.Round(time.Millisecond))
			// The rounds' files stay until the end: on ext4 without a
			// journal, files freed just before make the next round's
			// creations slower (docs/bench.md, "Runs' files").
		}
	}
	for _, name := range orders {
		ts := times[name]
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
		fmt.Printf("%-8s median %v, %.2f ms per file\n", name, ts[len(ts)/2].Round(time.Millisecond), float64(ts[len(ts)/2].Microseconds())/1000/float64(files))
	}
	return nil
}

// round publishes files data files and their entries under root and
// returns the time it took; the directories are made beforehand, but for
// the partitions' ledger directories when cold.
func round(root string, cold bool, files, parts, workers int, data, entry []byte, order string) (time.Duration, error) {
	if err := os.Mkdir(root, 0o777); err != nil {
		return 0, err // a round's directory must be new
	}
	dataDir := filepath.Join(root, "topic")
	if err := os.MkdirAll(dataDir, 0o777); err != nil {
		return 0, err
	}
	if err := os.MkdirAll(ledgerTopicDir(root), 0o777); err != nil {
		return 0, err
	}
	dirs := make([]partDirs, parts)
	for p := 0; p < parts; p++ {
		if cold {
			continue
		}
		dirs[p].once.Do(func() {})
		if err := os.MkdirAll(ledgerDir(root, p), 0o777); err != nil {
			return 0, err
		}
	}
	var b *barrier
	if order == "syncfs" {
		var err error
		if b, err = newBarrier(root); err != nil {
			return 0, err
		}
		defer b.close()
	}
	work := make(chan int)
	errc := make(chan error, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			failed := false
			for i := range work {
				if failed {
					continue // drain: the sender must not block
				}
				p := i % parts
				var err error
				if order != "data-only" {
					err = dirs[p].make(root, p, b)
				}
				if err != nil {
					errc <- err
					failed = true
					continue
				}
				if b != nil {
					err = publishSyncfs(b, dataDir, i, parts, root, data, entry)
				} else {
					err = publish(root, dataDir, i, parts, data, entry, order)
				}
				if err != nil {
					errc <- err
					failed = true
				}
			}
		}()
	}
	for i := 0; i < files; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
	close(errc)
	return time.Since(start), <-errc
}

// ledgerTopicDir holds the partitions' ledger directories.
func ledgerTopicDir(root string) string {
	return filepath.Join(root, "_spillway", "ledger", "topic")
}

// ledgerDir is partition p's ledger directory for its first 1,000
// entries, four levels below ledgerTopicDir as the ledger lays them out.
func ledgerDir(root string, p int) string {
	return filepath.Join(ledgerTopicDir(root), fmt.Sprint(p), "000", "000", "000")
}

func publish(root, dataDir string, i, parts int, data, entry []byte, order string) error {
	lt, lf, dt, df := paths(root, dataDir, i, parts)
	if order == "data-only" {
		return durable(dt, df, data, true)
	}
	if order == "serial" {
		if err := durable(lt, lf, entry, true); err != nil {
			return err
		}
		return durable(dt, df, data, true)
	}
	done := make(chan error, 1)
	go func() { done <- durable(dt, df, data, false) }()
	err := durable(lt, lf, entry, true)
	if derr := <-done; err == nil {
		err = derr
	}
	if err != nil {
		return err
	}
	return place(dt, df)
}

// durable writes b to tmp and fsyncs it, then, if visible, renames it to
// final and fsyncs the directory.
func durable(tmp, final string, b []byte, visible bool) error {
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o666)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil || !visible {
		return err
	}
	return place(tmp, final)
}

func place(tmp, final string) error {
	if err := os.Rename(tmp, final); err != nil {
		return err
	}
	return syncDir(filepath.Dir(final))
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// paths are file i's entry and data file: each's temporary name, then
// its final one.
func paths(root, dataDir string, i, parts int) (entryTmp, entry, dataTmp, data string) {
	p := i % parts
	tmp := fmt.Sprintf(".tmp-%d", i)
	return filepath.Join(ledgerDir(root, p), tmp), filepath.Join(ledgerDir(root, p), fmt.Sprintf("%012d.json", i/parts)),
		filepath.Join(dataDir, tmp), filepath.Join(dataDir, fmt.Sprintf("%d-%d.jsonl", p, i))
}

// partDirs makes a partition's ledger directories once.
type partDirs struct {
	once sync.Once
	err  error
}

// make makes the levels of p's ledger directory below the topic's, then
// makes their names durable: the parent of each fsynced at once, as the
// local backend's makeDir does, or, with b, one barrier for all.
func (d *partDirs) make(root string, p int, b *barrier) error {
	d.once.Do(func() {
		leaf := ledgerDir(root, p)
		levels := []string{leaf}
		for i := 0; i < 3; i++ {
			levels = append(levels, filepath.Dir(levels[len(levels)-1]))
		}
		for i := len(levels) - 1; i >= 0; i-- {
			if d.err = os.Mkdir(levels[i], 0o777); d.err != nil {
				return
			}
		}
		if b != nil {
			d.err = b.wait()
			return
		}
		errs := make(chan error, len(levels))
		for _, l := range levels {
			go func() { errs <- syncDir(filepath.Dir(l)) }()
		}
		for range levels {
			if err := <-errs; d.err == nil {
				d.err = err
			}
		}
	})
	return d.err
}
