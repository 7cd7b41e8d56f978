// Package errpolicy applies the error policy to a record that can't be
// written (errors.tolerance and errors.dead_letter_topic): send it to the
// dead-letter topic, skip it, or stop. It is one rule for every writer, so a
// record is treated the same whatever layout it was going to.
package errpolicy

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Policy is errors.tolerance and errors.dead_letter_topic, already
// validated.
type Policy struct {
	// Tolerance is none (stop) or all (skip).
	Tolerance string
	// DeadLetter, when set, receives records that cannot be written. It
	// must return only once the record is durable in the dead-letter topic.
	DeadLetter func(ctx context.Context, r *kgo.Record, cause error) error
	Log        *slog.Logger
}

// Outcome says what Apply did with a record it let pass.
type Outcome int

// What Apply did with a record that is not to stop the run.
const (
	Skipped Outcome = iota
	DeadLettered
)

// Apply decides about r, which cause keeps from being written; cause names
// the record (topic, partition, offset). A nil error means the record is
// handled without being stored, and its offset may be committed.
func (p Policy) Apply(ctx context.Context, r *kgo.Record, cause error) (Outcome, error) {
	if p.DeadLetter != nil {
		if err := p.DeadLetter(ctx, r, cause); err != nil {
			return 0, fmt.Errorf("send %s/%d@%d to the dead-letter topic: %w", r.Topic, r.Partition, r.Offset, err)
		}
		p.Log.Warn("record sent to the dead-letter topic", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "cause", cause)
		return DeadLettered, nil
	}
	if p.Tolerance != "all" {
		return 0, fmt.Errorf("%w (to skip such records set errors.tolerance: all, or send them to errors.dead_letter_topic)", cause)
	}
	p.Log.Warn("record skipped", "topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "cause", cause)
	return Skipped, nil
}
