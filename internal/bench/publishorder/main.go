// Command publishorder measures what overlapping a data file's fsync with
// the writing of its ledger entry would save on local disk, before the
// storage API is split to allow it (issue #26): it models the local
// backend's commit with plain system calls, 2,000 files of 200 KiB over
// 1,000 partitions (userbench's 1000p workload), 64 commits at once (the
// local backend's bound), in two orders, alternating rounds:
//
//	serial:  entry (create, write, fsync, rename, fsync its directory),
//	         then the data file (write, fsync, rename, fsync its directory)
//	overlap: the data file's write and fsync while the entry is written
//	         as above, then the data file's rename and directory fsync
//
// Both make the entry durable before the data file's name is visible.
// Neither shares a directory fsync between files (the local backend's
// group commit does for the data directory), so read the difference, not
// the totals.
//
//	go run ./internal/bench/publishorder [-dir D] [-rounds 3]
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
	flag.Parse()
	if err := run(*dir, *rounds, *files, *parts, *size, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "publishorder:", err)
		os.Exit(1)
	}
}

func run(dir string, rounds, files, parts, size, workers int) error {
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
		for _, overlap := range []bool{false, true} {
			name := map[bool]string{false: "serial", true: "overlap"}[overlap]
			root := filepath.Join(dir, fmt.Sprintf("%s-%d", name, r))
			d, err := round(root, files, parts, workers, data, entry, overlap)
			if err != nil {
				return err
			}
			times[name] = append(times[name], d)
			fmt.Printf("round %d %-8s %v\n", r+1, name, d.Round(time.Millisecond))
			if err := os.RemoveAll(root); err != nil {
				return err
			}
		}
	}
	for _, name := range []string{"serial", "overlap"} {
		ts := times[name]
		sort.Slice(ts, func(i, j int) bool { return ts[i] < ts[j] })
		fmt.Printf("%-8s median %v, %.2f ms per file\n", name, ts[len(ts)/2].Round(time.Millisecond), float64(ts[len(ts)/2].Microseconds())/1000/float64(files))
	}
	return nil
}

// round publishes files data files and their entries under root and
// returns the time it took, directories made beforehand.
func round(root string, files, parts, workers int, data, entry []byte, overlap bool) (time.Duration, error) {
	dataDir := filepath.Join(root, "topic")
	if err := os.MkdirAll(dataDir, 0o777); err != nil {
		return 0, err
	}
	for p := 0; p < parts; p++ {
		if err := os.MkdirAll(ledgerDir(root, p), 0o777); err != nil {
			return 0, err
		}
	}
	work := make(chan int)
	errc := make(chan error, workers)
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := publish(root, dataDir, i, parts, data, entry, overlap); err != nil {
					errc <- err
					return
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

func ledgerDir(root string, p int) string {
	return filepath.Join(root, "_spillway", "ledger", "topic", fmt.Sprint(p), "000", "000", "000")
}

func publish(root, dataDir string, i, parts int, data, entry []byte, overlap bool) error {
	p := i % parts
	lt, lf := filepath.Join(ledgerDir(root, p), fmt.Sprintf(".tmp-%d", i)), filepath.Join(ledgerDir(root, p), fmt.Sprintf("%012d.json", i/parts))
	dt, df := filepath.Join(dataDir, fmt.Sprintf(".tmp-%d", i)), filepath.Join(dataDir, fmt.Sprintf("%d-%d.jsonl", p, i))
	if !overlap {
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
	d, err := os.Open(filepath.Dir(final))
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
