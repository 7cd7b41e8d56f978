package ledger

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spillway/spillway/internal/offsets"
)

// Log is what Kafka says of a partition now.
type Log struct {
	Start int64 // log start offset
	End   int64 // high watermark: one past the last record
}

// ResumeOptions change how Resume treats what it finds.
type ResumeOptions struct {
	// Deployment, when set, is this run's: a last entry written by another
	// one stops the run (DeploymentError).
	Deployment Deployment
	// GroupActive, when set, tells whether a consumer group has members
	// now, so that Point.Note can say whether a ledger written by another
	// group is taken over (a renamed group, or commits lost) or may be
	// another deployment's.
	GroupActive func(ctx context.Context, group string) (bool, error)
	// StartFresh lets a topic whose id changed (deleted and recreated)
	// start a new ledger beside the old topic's, instead of stopping.
	StartFresh bool
	// Legacy, when set, tells where a partition without a ledger ends in
	// files written before the ledger existed (one past the highest
	// offset; ok=false when there are none).
	Legacy func(ctx context.Context, topic string, partition int32) (next int64, ok bool, err error)
}

// Point is where a partition resumes.
type Point struct {
	// State is what storage already holds: consume from State.Next on, and
	// skip the offsets in State.Above.
	State offsets.State
	// Seq is the sequence number of the partition's next ledger entry.
	Seq int64
	// From says what the state was read from, for logs.
	From string
	// Found is false when storage holds nothing of the partition: then
	// State says nothing, and the group's commit or start_offset decides.
	Found bool
	// Note is what a log should say, at WARN, of how the point was found.
	Note string
}

// Resume finds where a partition stands in storage: its last ledger entry,
// checked against the log it must belong to. It reads no data file; it
// checks, with one stat, whether the last entry's file was published.
func (l *Ledger) Resume(ctx context.Context, id Identity, log Log, opts ResumeOptions) (Point, error) {
	ids, err := l.TopicIDs(ctx, id.Topic)
	if err != nil {
		return Point{}, err
	}
	ours := false
	var others []string
	for _, x := range ids {
		if x == id.TopicID {
			ours = true
		} else {
			others = append(others, x)
		}
	}
	if !ours {
		if len(others) > 0 {
			if !opts.StartFresh {
				return Point{}, &ForeignError{Bucket: l.bucket(), Prefix: l.prefix, ID: id, Found: strings.Join(others, ", "), Why: "topic id"}
			}
			// The files there are the old topic's: never read them for
			// where this one stands.
			return Point{From: "a new ledger beside topic ids " + strings.Join(others, ", ")}, nil
		}
		return l.resumeLegacy(ctx, id, log, opts)
	}
	e, err := l.Last(ctx, id)
	if err != nil {
		return Point{}, err
	}
	if e == nil {
		// Only empty levels: a first write that failed.
		return l.resumeLegacy(ctx, id, log, opts)
	}
	if e.Cluster != id.Cluster {
		return Point{}, &ForeignError{Bucket: l.bucket(), Prefix: l.prefix, ID: id, Found: e.Cluster, Why: "cluster id"}
	}
	if d := opts.Deployment.Differs(e.Deployment); d != "" {
		return Point{}, &DeploymentError{Bucket: l.bucket(), Prefix: l.prefix, ID: id, Seq: e.Seq, Writer: e.Writer, Differs: d}
	}
	note := ""
	if g, mine := e.Group, opts.Deployment.Group; g != "" && mine != "" && g != mine && opts.GroupActive != nil {
		// Whether the other group runs only words the warning: a member
		// may be a crashed instance that its session has not timed out
		// yet, not a reason to stop, and two deployments that do write at
		// once collide on an entry, and the one that loses says so,
		// naming the other group (sink.writeEntry). So a group this
		// principal may not describe (an ACL) is no reason to stop either.
		active, err := opts.GroupActive(ctx, g)
		switch {
		case err != nil:
			note = fmt.Sprintf("the partition's ledger was written by kafka.group %q, and whether that group has members could not be told (%v): group %q resumes from the ledger; if another deployment writes into this prefix, the two fence each other off and one stops, so give each its own storage.prefix", g, err, mine)
		case active:
			note = fmt.Sprintf("the partition's ledger was written by kafka.group %q, which has members now: if that is another deployment writing into this prefix, the two fence each other off and one stops; give each its own storage.prefix. Group %q resumes from the ledger", g, mine)
		default:
			note = fmt.Sprintf("the partition's ledger was written by kafka.group %q, which has no members now: group %q takes it over (a renamed group, or one whose commits were lost)", g, mine)
		}
	}
	p, err := l.resumeEntry(ctx, id, log, e)
	p.Note = note
	return p, err
}

// Stored reports whether storage holds e's file under its name with e's
// size: whether its writer published it. A last entry whose file is not
// there is void (its writer died first) or still being published.
func (l *Ledger) Stored(ctx context.Context, e *Entry) (bool, error) {
	o, ok, err := l.st.Stat(ctx, e.File.Key)
	if err != nil {
		return false, fmt.Errorf("ledger: stat %s: %w", e.File.Key, err)
	}
	return ok && o.Size == e.File.Bytes, nil
}

// resumeEntry is where a partition stands whose last entry is e.
func (l *Ledger) resumeEntry(ctx context.Context, id Identity, log Log, e *Entry) (Point, error) {
	if !e.HasFile() {
		// An entry of gaps alone: nothing to publish, so it holds.
		p := Point{State: e.After(), Seq: e.Seq + 1, From: fmt.Sprintf("ledger entry %d (gaps %s)", e.Seq, offsets.FormatRanges(e.GapRanges())), Found: true}
		return p, checkLog(l, id, p, log)
	}
	o, ok, err := l.st.Stat(ctx, e.File.Key)
	if err != nil {
		return Point{}, err
	}
	p := Point{State: e.Before, Seq: e.Seq + 1, From: fmt.Sprintf("ledger entry %d, whose file was not published", e.Seq), Found: true}
	if ok && o.Size != e.File.Bytes {
		z, found := ZombieFirst(e, o.Size, func(seq int64) (*Entry, bool) {
			j, err := l.Read(ctx, id, l.EntryKey(id, seq))
			return j, err == nil
		})
		if found {
			if len(z.Dup) > 0 {
				return Point{}, errors.New(z.DupMessage())
			}
			zp := Point{State: z.State(), Seq: e.Seq + 1, Found: true, From: fmt.Sprintf(
				"ledger entry %d and the file of entry %d (%s)", e.Seq, z.File.Seq, z.Why())}
			return zp, checkLog(l, id, zp, log)
		}
	}
	if ok {
		if o.Size != e.File.Bytes {
			return Point{}, fmt.Errorf("ledger entry %s names %s of %d bytes, but storage holds %d bytes under that name: something other than Spillway changed it; restore the file, or write into a new storage.prefix",
				l.EntryKey(id, e.Seq), e.File.Key, e.File.Bytes, o.Size)
		}
		p.State, p.From = e.After(), fmt.Sprintf("ledger entry %d", e.Seq)
	}
	return p, checkLog(l, id, p, log)
}

// zombieWalk bounds how far back ZombieFirst looks: the files a new owner
// can publish between resuming and colliding with a paused writer's name.
const zombieWalk = 64

// LateFile is a paused writer's file published late under a name that a
// new owner entered again: what ZombieFirst finds. Resume and verify's
// Scan both read a ledger through it, so they agree on what it explains.
type LateFile struct {
	// File is entry j, whose file storage holds under the name.
	File *Entry
	// Void is the entry that named the file again, whose commit failed.
	Void *Entry
	// Dup are j's offsets that Void's state before holds too: the new
	// owner stored them again, so storage holds them twice.
	Dup offsets.Ranges
}

// State is what storage holds when Void is the last entry: its state
// before plus j's offsets.
func (z LateFile) State() offsets.State { return z.Void.Before.With(z.File.File.Ranges) }

// Why says, for logs and reports, why the name holds j's file.
func (z LateFile) Why() string {
	return fmt.Sprintf("entry %d is void: a writer that had lost the partition published entry %d's file under that name first", z.Void.Seq, z.File.Seq)
}

// DupMessage says which offsets are stored twice and which file to delete.
func (z LateFile) DupMessage() string {
	j := z.File
	return fmt.Sprintf("%s holds offsets %s that later files hold too: a writer that had lost the partition published it late (ledger entry %d), after the new owner had stored them again; delete %s (its other offsets are written again) and restart",
		j.File.Key, offsets.FormatRanges(z.Dup), j.Seq, j.File.Key)
}

// ZombieFirst explains an entry e whose file holds size bytes, not e's:
// two writers raced for one name. The one that lost the partition (a
// paused zombie) wrote an earlier entry j for that name and published its
// file late, after the new owner had found it missing, resumed from j's
// Before, published files of other names (entries j+1 .. e.Seq-1) and
// entered the same name again as e, whose commit then failed. The file is
// j's, e is void, and what is handled is e's Before plus j's offsets
// (LateFile.State). When j's offsets are also in e's Before, storage holds
// them twice (LateFile.Dup). entry reads the partition's entry seq; the
// walk stops at one it can't read.
func ZombieFirst(e *Entry, size int64, entry func(seq int64) (*Entry, bool)) (LateFile, bool) {
	after := e // the entry after j: j must have been void to its writer
	for seq := e.Seq - 1; seq >= max(0, e.Seq-zombieWalk); seq-- {
		j, ok := entry(seq)
		if !ok {
			return LateFile{}, false
		}
		if j.File.Key == e.File.Key && j.File.Bytes == size {
			if len(after.Before.Ranges().Overlap(j.File.Ranges)) > 0 {
				// The next writer counted j's file as stored: not a race.
				return LateFile{}, false
			}
			return LateFile{File: j, Void: e, Dup: e.Before.Ranges().Overlap(j.File.Ranges)}, true
		}
		after = j
	}
	return LateFile{}, false
}

func (l *Ledger) resumeLegacy(ctx context.Context, id Identity, log Log, opts ResumeOptions) (Point, error) {
	p := Point{From: "nothing stored"}
	if opts.Legacy != nil {
		next, ok, err := opts.Legacy(ctx, id.Topic, id.Partition)
		if err != nil {
			return Point{}, fmt.Errorf("files without a ledger (written by an earlier version) are stored for %s/%d, and where they end can't be read: %w; move them out of storage.prefix, or write into a new one", id.Topic, id.Partition, err)
		}
		if ok {
			p = Point{State: offsets.State{Next: next}, From: "files written before the ledger", Found: true}
		}
	}
	return p, checkLog(l, id, p, log)
}

// checkLog refuses a state that claims offsets the log doesn't have: a
// commit past the log end would skip every record up to it.
func checkLog(l *Ledger, id Identity, p Point, log Log) error {
	if end := p.State.End(); end > log.End {
		return &PastEndError{Bucket: l.bucket(), Prefix: l.prefix, ID: id, Stored: end, End: log.End, From: p.From}
	}
	return nil
}

// bucket names the ledger's storage for messages: its URL, credentials
// removed, when the store can say it.
func (l *Ledger) bucket() string {
	if s, ok := l.st.(fmt.Stringer); ok {
		return s.String()
	}
	return "(storage.url)"
}

// where names a bucket and prefix in a message.
func where(bucket, prefix string) string {
	return fmt.Sprintf("%s with storage.prefix %q", bucket, prefix)
}

// ForeignError is a ledger that belongs to another topic id or cluster than
// the one being consumed.
type ForeignError struct {
	Bucket string
	Prefix string
	ID     Identity
	Found  string // the other topic ids or cluster id
	Why    string // "topic id" or "cluster id"
}

func (e *ForeignError) Error() string {
	if e.Why == "cluster id" {
		return fmt.Sprintf("storage %s holds a ledger of topic %s with cluster id %s, but the topic is consumed from cluster id %s: the prefix belongs to another cluster, and its offsets mean nothing for this one. Set a new storage.prefix",
			where(e.Bucket, e.Prefix), e.ID.Topic, e.Found, e.ID.Cluster)
	}
	return fmt.Sprintf("storage %s holds a ledger of topic %s with %s %s, but the topic being consumed has %s %s: the topic was deleted and recreated, or the prefix belongs to another cluster, and its offsets mean nothing for this one. "+
		"Either set a new storage.prefix, or set storage.topic_id_change: start_fresh to start this topic afresh in that prefix (a file whose name the old topic already used then stops the run)",
		where(e.Bucket, e.Prefix), e.ID.Topic, e.Why, e.Found, e.Why, pick(e.Why == "topic id", e.ID.TopicID, e.ID.Cluster))
}

func pick(c bool, a, b string) string {
	if c {
		return a
	}
	return b
}

// DeploymentError is a ledger written by a deployment configured otherwise:
// another deployment shares the prefix, or this one's config changed.
type DeploymentError struct {
	Bucket  string
	Prefix  string
	ID      Identity
	Seq     int64
	Writer  string
	Differs string
}

func (e *DeploymentError) Error() string {
	return fmt.Sprintf("storage %s holds the ledger of %s/%d written with %s (entry %d, by %s): another deployment writes into this prefix, or this one's config changed. Two deployments on one prefix fence each other off and mix their files; give each its own storage.prefix. To change this deployment's config, write into a new storage.prefix",
		where(e.Bucket, e.Prefix), e.ID.Topic, e.ID.Partition, e.Differs, e.Seq, e.Writer)
}

// PastEndError is a stored state past the partition's log end.
type PastEndError struct {
	Bucket      string
	Prefix      string
	ID          Identity
	Stored, End int64
	From        string
}

func (e *PastEndError) Error() string {
	return fmt.Sprintf("storage %s holds offsets of %s/%d up to %d (%s), past the log end %d: these files are not of this log (a recreated topic, another cluster, or files copied in), and resuming from them would skip records. Move them out of the prefix, or write into a new storage.prefix",
		where(e.Bucket, e.Prefix), e.ID.Topic, e.ID.Partition, e.Stored, e.From, e.End)
}

// Skip records that an operator skips a partition's offsets from where
// storage stands up to to: an entry of one GapOperator gap, with note, that
// resume then starts after and verify reports. Only an operator asks for
// it, with every writer of the partition stopped: a running one would find
// its next entry taken and stop. It returns the entry written.
func (l *Ledger) Skip(ctx context.Context, id Identity, log Log, opts ResumeOptions, to int64, note, writer string) (*Entry, error) {
	p, err := l.Resume(ctx, id, log, opts)
	if err != nil {
		return nil, err
	}
	if !p.Found {
		return nil, fmt.Errorf("storage holds no ledger for %s/%d: nothing is stored for it yet, so there is nothing to skip from; move the group's offset with kafka-consumer-groups --reset-offsets instead", id.Topic, id.Partition)
	}
	from := p.State.Next
	switch {
	case to <= from:
		return nil, fmt.Errorf("%s/%d: storage already holds or passed every offset below %d; --to must be above it", id.Topic, id.Partition, from)
	case to > log.End:
		return nil, fmt.Errorf("%s/%d: --to %d is past the log end %d", id.Topic, id.Partition, to, log.End)
	}
	gap := offsets.Ranges{{from, to}}.Subtract(p.State.Above)
	e := &Entry{
		Cluster: id.Cluster, Topic: id.Topic, TopicID: id.TopicID, Partition: id.Partition,
		Seq: p.Seq, Writer: writer, Deployment: opts.Deployment, Time: time.Now().UTC(),
		Before: p.State,
		Gaps:   []offsets.Gap{{Ranges: gap, Cause: offsets.GapOperator, Note: note}},
	}
	if err := l.Append(ctx, e); err != nil {
		return nil, fmt.Errorf("write ledger entry %d of %s/%d: %w", e.Seq, id.Topic, id.Partition, err)
	}
	return e, nil
}
