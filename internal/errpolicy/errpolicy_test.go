package errpolicy

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestApply: each setting of the policy, and a dead-letter topic that
// can't take the record, which must stop the run rather than skip.
func TestApply(t *testing.T) {
	r := &kgo.Record{Topic: "t", Partition: 3, Offset: 42}
	cause := errors.New("record t/3@42: not UTF-8")
	log := slog.New(slog.DiscardHandler)
	var sent []*kgo.Record
	dlq := func(_ context.Context, r *kgo.Record, _ error) error { sent = append(sent, r); return nil }
	refused := errors.New("dead-letter topic refused the record")
	cases := []struct {
		name    string
		p       Policy
		want    Outcome
		wantErr string
	}{
		{"none stops, naming the settings", Policy{Tolerance: "none", Log: log}, 0, "errors.tolerance: all"},
		{"all skips", Policy{Tolerance: "all", Log: log}, Skipped, ""},
		{"dead letter", Policy{Tolerance: "none", DeadLetter: dlq, Log: log}, DeadLettered, ""},
		{"dead letter fails", Policy{Tolerance: "all", Log: log, DeadLetter: func(context.Context, *kgo.Record, error) error { return refused }}, 0, "send t/3@42 to the dead-letter topic"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.p.Apply(context.Background(), r, cause)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err = %v, want it to mention %q", err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("Apply = %v, %v; want %v", got, err, c.want)
			}
		})
	}
	if len(sent) != 1 || sent[0] != r {
		t.Fatalf("dead-lettered %d records, want the one", len(sent))
	}
}
