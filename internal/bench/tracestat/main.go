// Command tracestat reads a runtime execution trace of a Spillway run
// (userbench -profile DIR -trace) and says where its goroutines spent the
// run: running, waiting for a P (runnable), in a system call, or blocked,
// grouped by the function each goroutine runs; how many Ps were busy; and
// what the poll loop, the one goroutine every record passes through,
// waited on. A CPU profile says what the cores did; this says why they
// were idle, or why the poll loop was late although they were not.
//
//	go run ./internal/bench/tracestat DIR/16p-zstd-3.trace
//
// It is a main package without tests, like userbench, whose output it
// reads.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"golang.org/x/exp/trace"
)

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: tracestat FILE.trace")
		os.Exit(2)
	}
	f, err := os.Open(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracestat:", err)
		os.Exit(1)
	}
	defer f.Close()
	s, err := read(f)
	if err != nil {
		fmt.Fprintln(os.Stderr, "tracestat:", err)
		os.Exit(1)
	}
	s.print(os.Stdout)
}

// pollLoop is the function whose goroutine is the poll loop.
const pollLoop = "source.(*Source).Run"

// stats is what read gathers.
type stats struct {
	span time.Duration
	// byGroup[group][state]: goroutine time by the function the
	// goroutine runs.
	byGroup map[string]map[string]time.Duration
	count   map[string]int // goroutines per group
	// busy[n]: time with n Ps running.
	busy map[int]time.Duration
	// poll: the poll loop's time by state, and blocked by where.
	poll map[string]time.Duration
	// runnableAfter: goroutine time waiting for a P, by what made it
	// runnable (created, back from a system call, or unblocked where).
	runnableAfter map[string]time.Duration
}

// goroutine is the state read keeps of one goroutine.
type goroutine struct {
	group   string
	poll    bool
	since   trace.Time
	state   trace.GoState
	blocked string // where it last blocked, or how it became runnable
}

func read(r io.Reader) (*stats, error) {
	tr, err := trace.NewReader(r)
	if err != nil {
		return nil, err
	}
	s := &stats{byGroup: map[string]map[string]time.Duration{}, count: map[string]int{},
		busy: map[int]time.Duration{}, poll: map[string]time.Duration{}, runnableAfter: map[string]time.Duration{}}
	gs := map[trace.GoID]*goroutine{}
	procs := map[trace.ProcID]bool{}
	var first, last, busySince trace.Time
	running := 0
	for {
		ev, err := tr.ReadEvent()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		now := ev.Time()
		if first == 0 {
			first, busySince = now, now
		}
		last = now
		if ev.Kind() != trace.EventStateTransition {
			continue
		}
		st := ev.StateTransition()
		switch st.Resource.Kind {
		case trace.ResourceProc:
			_, to := st.Proc()
			p := st.Resource.Proc()
			if on := to == trace.ProcRunning; on != procs[p] {
				s.busy[running] += now.Sub(busySince)
				busySince = now
				procs[p] = on
				if on {
					running++
				} else {
					running--
				}
			}
		case trace.ResourceGoroutine:
			s.goroutine(gs, st, now)
		}
	}
	s.busy[running] += last.Sub(busySince)
	for _, g := range gs {
		s.add(g, g.state, last)
	}
	s.span = last.Sub(first)
	return s, nil
}

// goroutine accounts one goroutine's state transition at now.
func (s *stats) goroutine(gs map[trace.GoID]*goroutine, st trace.StateTransition, now trace.Time) {
	id := st.Resource.Goroutine()
	from, to := st.Goroutine()
	g := gs[id]
	if g == nil {
		g = &goroutine{since: now}
		gs[id] = g
		if from == trace.GoNotExist {
			g.blocked = "created"
		}
	}
	frames := stackFuncs(st.Stack)
	if len(frames) > 0 {
		if g.group == "" {
			g.group = short(frames[len(frames)-1]) // the function it was started with
			s.count[g.group]++
		}
		for _, fn := range frames {
			if strings.HasSuffix(fn, pollLoop) {
				g.poll = true
			}
		}
	}
	s.add(g, from, now)
	switch {
	case to == trace.GoWaiting:
		g.blocked = where(st.Reason, frames)
	case to == trace.GoRunnable && from == trace.GoSyscall:
		g.blocked = "a system call"
	}
	g.state, g.since = to, now
}

// add accounts the time g spent in state until now.
func (s *stats) add(g *goroutine, state trace.GoState, now trace.Time) {
	d := now.Sub(g.since)
	if d <= 0 || state == trace.GoNotExist || state == trace.GoUndetermined {
		return
	}
	group := g.group
	if group == "" {
		group = "(unknown)"
	}
	if s.byGroup[group] == nil {
		s.byGroup[group] = map[string]time.Duration{}
	}
	s.byGroup[group][state.String()] += d
	if state == trace.GoRunnable {
		s.runnableAfter[g.blocked] += d
	}
	if g.poll {
		k := state.String()
		if state == trace.GoWaiting {
			k = "blocked: " + g.blocked
		}
		s.poll[k] += d
	}
}

// stackFuncs lists a stack's functions, innermost first.
func stackFuncs(st trace.Stack) []string {
	var fns []string
	for f := range st.Frames() {
		fns = append(fns, f.Func)
	}
	return fns
}

// where names a blocking point: the reason, and the first three functions
// outside the runtime and sync.
func where(reason string, frames []string) string {
	var at []string
	for _, fn := range frames {
		if strings.HasPrefix(fn, "runtime.") || strings.HasPrefix(fn, "sync.") {
			continue
		}
		at = append(at, short(fn))
		if len(at) == 3 {
			break
		}
	}
	return reason + " in " + strings.Join(at, " < ")
}

// short drops a function's import path, keeping its package name.
func short(fn string) string {
	if i := strings.LastIndexByte(fn, '/'); i >= 0 {
		return fn[i+1:]
	}
	return fn
}

func (s *stats) print(out io.Writer) {
	sec := func(d time.Duration) string { return fmt.Sprintf("%.2f", d.Seconds()) }
	fmt.Fprintf(out, "span %ss\n\nPs running (of GOMAXPROCS):\n", sec(s.span))
	for n := 0; n <= len(s.busy); n++ {
		if d, ok := s.busy[n]; ok {
			fmt.Fprintf(out, "  %d: %ss (%.0f%%)\n", n, sec(d), 100*d.Seconds()/s.span.Seconds())
		}
	}

	fmt.Fprintf(out, "\ngoroutine seconds by the function they run (the 12 that ran most):\n")
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "function\tgoroutines\trunning\trunnable\tsyscall\tblocked\t")
	groups := make([]string, 0, len(s.byGroup))
	for g := range s.byGroup {
		groups = append(groups, g)
	}
	sort.Slice(groups, func(i, j int) bool {
		return s.byGroup[groups[i]]["Running"] > s.byGroup[groups[j]]["Running"]
	})
	for i, g := range groups {
		if i == 12 {
			break
		}
		m := s.byGroup[g]
		fmt.Fprintf(w, "%s\t%d\t%s\t%s\t%s\t%s\t\n", g, s.count[g], sec(m["Running"]), sec(m["Runnable"]), sec(m["Syscall"]), sec(m["Waiting"]))
	}
	_ = w.Flush()

	fmt.Fprintf(out, "\nthe poll loop (%s):\n", pollLoop)
	printTop(out, s.poll, 8, sec)
	fmt.Fprintf(out, "\nwaiting for a P, by what made the goroutine runnable (all goroutines):\n")
	printTop(out, s.runnableAfter, 8, sec)
}

// printTop prints the n largest entries of m.
func printTop(out io.Writer, m map[string]time.Duration, n int, sec func(time.Duration) string) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] })
	for i, k := range keys {
		if i == n {
			break
		}
		fmt.Fprintf(out, "  %8ss  %s\n", sec(m[k]), k)
	}
}
