package source

import (
	"context"
	"fmt"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spillway/spillway/internal/offsets"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Health is what the consumer knows of its own readiness.
type Health struct {
	// Joined: the consumer is a member of its group and has received and
	// set up its assignment (which may be empty).
	Joined bool
	// Partitions is the number of partitions assigned; Assigned lists
	// them.
	Partitions int
	Assigned   []offsets.TopicPartition
	// Unreachable lists the brokers whose last connection attempt failed,
	// each with the error.
	Unreachable []string
	// Reason says why the consumer is not ready, empty when it is.
	Reason string
	// NoTopicMatches: kafka.topic_regex matches no topic yet, so the
	// consumer has not joined its group.
	NoTopicMatches bool
}

// Health returns the consumer's readiness: joined, with its assignment, and
// every broker it last tried reachable.
func (s *Source) Health() Health {
	h := s.health.snapshot()
	if s.regex != "" && !h.Joined && len(s.cl.GetConsumeTopics()) == 0 {
		// The client joins the group only once a topic matches: until
		// then "joining" would never end, and never say why.
		why := fmt.Sprintf("kafka.topic_regex %q matches no topic yet; the consumer keeps checking as topics are created (every 5 minutes at most)", s.regex)
		h.NoTopicMatches = true
		if h.Reason = why; len(h.Unreachable) > 0 {
			h.Reason = "unreachable: " + strings.Join(h.Unreachable, "; ") + "; " + why
		}
	}
	return h
}

// health follows the group session through the rebalance callbacks and the
// client's hooks. The client retries a lost broker or a failed session on
// its own; this only records it, for /readyz and /status.
type health struct {
	mu         sync.Mutex
	group      string
	joined     bool
	why        string // why not joined
	partitions map[offsets.TopicPartition]bool
	// unreachable holds, per broker node, the error of its last failed
	// connection; a successful one removes it.
	unreachable map[int32]string
}

func (h *health) init(group string) {
	h.group = group
	h.why = fmt.Sprintf("joining consumer group %q", group)
	h.partitions = map[offsets.TopicPartition]bool{}
	h.unreachable = map[int32]string{}
}

type callback = func(context.Context, *kgo.Client, map[string][]int32)

// assigned marks the member joined once cb, which sets the partitions up,
// has returned without a fatal error. kgo calls it after every sync, even
// with nothing assigned.
func (h *health) assigned(cb callback, fatal func() error) callback {
	return func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
		cb(ctx, cl, m)
		h.mu.Lock()
		defer h.mu.Unlock()
		for tp := range toSet(m) {
			h.partitions[tp] = true
		}
		if err := fatal(); err != nil {
			h.joined, h.why = false, err.Error()
			return
		}
		h.joined, h.why = true, ""
	}
}

func (h *health) revoked(cb callback) callback {
	return func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
		cb(ctx, cl, m)
		h.drop(m)
	}
}

// lost: the session ended without a clean revoke; the client rejoins.
func (h *health) lost(cb callback) callback {
	return func(ctx context.Context, cl *kgo.Client, m map[string][]int32) {
		cb(ctx, cl, m)
		h.drop(m)
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.joined {
			h.joined, h.why = false, fmt.Sprintf("partitions of consumer group %q lost; rejoining", h.group)
		}
	}
}

func (h *health) drop(m map[string][]int32) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for tp := range toSet(m) {
		delete(h.partitions, tp)
	}
}

// OnGroupManageError implements kgo.HookGroupManageError: the session is
// over, and the client rejoins.
func (h *health) OnGroupManageError(err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.joined, h.why = false, fmt.Sprintf("consumer group %q: %v; rejoining", h.group, err)
}

// OnBrokerConnect implements kgo.HookBrokerConnect. Seed addresses are left
// out: the client stops using them once it knows the brokers, so a stale
// seed's failure would never clear.
func (h *health) OnBrokerConnect(meta kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	if meta.NodeID < 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err == nil {
		delete(h.unreachable, meta.NodeID)
		return
	}
	h.unreachable[meta.NodeID] = fmt.Sprintf("broker %d at %s: %v", meta.NodeID, net.JoinHostPort(meta.Host, fmt.Sprint(meta.Port)), err)
}

func (h *health) snapshot() Health {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := Health{Joined: h.joined, Partitions: len(h.partitions)}
	for tp := range h.partitions {
		out.Assigned = append(out.Assigned, tp)
	}
	for _, e := range h.unreachable {
		out.Unreachable = append(out.Unreachable, e)
	}
	sort.Strings(out.Unreachable)
	var why []string
	if len(out.Unreachable) > 0 {
		why = append(why, "unreachable: "+strings.Join(out.Unreachable, "; "))
	}
	if !h.joined {
		why = append(why, h.why)
	}
	out.Reason = strings.Join(why, "; ")
	return out
}
