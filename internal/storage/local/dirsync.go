package local

// dirSync is the fsync of one directory that commits share: a commit that
// linked its file joins the round not started yet, and one fsync started
// after every joiner's link makes all of them durable. Files closed about
// together in one directory so cost one directory fsync, not one each.
type dirSync struct {
	next    *syncRound // the round that commits join; nil when none waits
	running bool       // a goroutine runs rounds
}

type syncRound struct {
	done   chan struct{}
	err    error
	joined int // callers waiting on it, under Dir.mu
}

// syncDir returns once an fsync of dir that started after the call did
// ended, with its error: what the caller renamed or linked into dir before
// is durable then.
func (l *Dir) syncDir(dir string) error {
	l.mu.Lock()
	d := l.syncs[dir]
	if d == nil {
		d = &dirSync{}
		l.syncs[dir] = d
	}
	if d.next == nil {
		d.next = &syncRound{done: make(chan struct{})}
	}
	r := d.next
	r.joined++
	lead := !d.running
	d.running = true
	l.mu.Unlock()
	if lead {
		l.syncRounds(dir, d)
	}
	<-r.done
	return r.err
}

// syncRounds runs the round of d that waits, then, if another one gathered
// meanwhile, hands the next to a goroutine of its own, so that the caller
// waits for one round, not for everyone's.
func (l *Dir) syncRounds(dir string, d *dirSync) {
	l.mu.Lock()
	r := d.next
	d.next = nil
	l.mu.Unlock()
	r.err = l.fsyncDir(dir)
	// The bookkeeping comes before the round's callers are let go, so
	// that a caller that returns sees the directory's state settled.
	l.mu.Lock()
	last := d.next == nil
	if last {
		d.running = false
		delete(l.syncs, dir)
	}
	l.mu.Unlock()
	close(r.done)
	if !last {
		go l.syncRounds(dir, d)
	}
}
