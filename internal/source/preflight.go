package source

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/spillway/spillway/internal/source/sourceopts"
)

// Preflight checks, before the consumer joins its group, that the setup can
// work: a broker answers, it accepts the credentials, the group and every
// topic of kafka.topics (and the dead-letter topic, when set) exist and may
// be used. The consumer itself retries all of these forever and says
// nothing, so a broken setup would idle as if healthy. ctx bounds the check
// (kafka.startup_timeout); the error names the cause and what to change.
//
// With kafka.topic_regex, no topic is required to exist: topics matching it
// may come later. The report says which match now.
func Preflight(ctx context.Context, k sourceopts.Options, deadLetterTopic string) (PreflightReport, error) {
	var rep PreflightReport
	err := preflight(ctx, k, deadLetterTopic, &rep)
	return rep, err
}

// PreflightReport is what Preflight found besides problems.
type PreflightReport struct {
	// RegexListed: with kafka.topic_regex, the topics could be listed,
	// and RegexMatches are those it matches, sorted (none is no error:
	// they may be created later).
	RegexListed  bool
	RegexMatches []string
}

func preflight(ctx context.Context, k sourceopts.Options, deadLetterTopic string, rep *PreflightReport) error {
	opts, err := ClientOptions(k)
	if err != nil {
		return err
	}
	var conn connErrs
	cl, err := kgo.NewClient(append(opts, kgo.WithHooks(&conn))...)
	if err != nil {
		return fmt.Errorf("kafka client: %w", err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)

	var topics []string
	if k.TopicRegex == "" {
		topics = append(topics, k.Topics...)
	}
	if deadLetterTopic != "" {
		topics = append(topics, deadLetterTopic)
	}
	meta, err := brokerMetadata(ctx, k, adm, topics, &conn)
	if errors.Is(err, kerr.TopicAuthorizationFailed) {
		// The answer as a whole was refused: ask topic by topic, to
		// name the ones not authorized.
		meta, err = topicByTopic(ctx, adm, topics)
	}
	if err != nil {
		return err
	}
	var problems []string
	for _, t := range topics {
		field := "kafka.topics"
		if t == deadLetterTopic {
			field = "errors.dead_letter_topic"
		}
		td, ok := meta.Topics[t]
		switch {
		case !ok, errors.Is(td.Err, kerr.UnknownTopicOrPartition):
			problems = append(problems, fmt.Sprintf("%s: topic %q does not exist; create it, or correct %s", field, t, field))
		case errors.Is(td.Err, kerr.TopicAuthorizationFailed):
			problems = append(problems, fmt.Sprintf("%s: not authorized for topic %q; grant the user of kafka.sasl.username Describe and %s on it", field, t, topicOp(field)))
		case td.Err != nil:
			problems = append(problems, fmt.Sprintf("%s: topic %q: %v", field, t, td.Err))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	// Reading the group's offsets needs the Describe right the consumer
	// needs to join: a group not authorized is refused here. A group that
	// does not exist yet is fine; joining creates it.
	if _, err := adm.FetchOffsets(ctx, k.Group); err != nil {
		if errors.Is(err, kerr.GroupAuthorizationFailed) {
			return fmt.Errorf("kafka.group: not authorized for group %q: %w; grant the user of kafka.sasl.username Read on the group, or use a group it may join", k.Group, err)
		}
		if isAuthErr(err) {
			return authErr(k, err)
		}
		if ctx.Err() != nil {
			return timeoutErr(k, err, conn.last())
		}
	}
	if k.TopicRegex != "" {
		// Not a problem when it fails (a user may lack Describe on
		// other topics): the report then says nothing of the regex.
		re, rerr := k.TopicPattern()
		topics, lerr := adm.ListTopics(ctx)
		if rerr == nil && lerr == nil {
			rep.RegexListed = true
			for _, t := range topics.Names() {
				if re.MatchString(t) {
					rep.RegexMatches = append(rep.RegexMatches, t)
				}
			}
		}
	}
	return nil
}

func topicOp(field string) string {
	if field == "errors.dead_letter_topic" {
		return "Write"
	}
	return "Read"
}

// brokerMetadata asks for the topics' metadata until a broker answers or
// ctx ends. A broker not (yet) reachable is retried, as the consumer would:
// it may be starting too. Refused credentials are not: they won't change.
func brokerMetadata(ctx context.Context, k sourceopts.Options, adm *kadm.Client, topics []string, conn *connErrs) (kadm.Metadata, error) {
	retry := time.NewTimer(0)
	defer retry.Stop()
	for {
		var meta kadm.Metadata
		var err error
		if len(topics) == 0 {
			// No topic named: a request for no topic still proves a
			// broker answers and accepts the credentials.
			meta, err = adm.BrokerMetadata(ctx)
		} else {
			meta, err = adm.Metadata(ctx, topics...)
		}
		if err == nil {
			return meta, nil
		}
		if isAuthErr(err) {
			return meta, authErr(k, err)
		}
		if errors.Is(err, kerr.TopicAuthorizationFailed) {
			return meta, err
		}
		if _, ok := errors.AsType[*kgo.ErrFirstReadEOF](err); ok {
			return meta, fmt.Errorf("kafka: the brokers %v closed the connection at the first request: %w; if they require authentication, set kafka.sasl.mechanism, username and password; if they use TLS, set kafka.tls.enabled", k.Brokers, err)
		}
		retry.Reset(time.Second)
		select {
		case <-ctx.Done():
			return meta, timeoutErr(k, err, conn.last())
		case <-retry.C:
		}
	}
}

func authErr(k sourceopts.Options, err error) error {
	if k.SASL.Mechanism == "" {
		return fmt.Errorf("kafka: the brokers %v refused the connection without authentication: %w; set kafka.sasl.mechanism, username and password", k.Brokers, err)
	}
	return fmt.Errorf("kafka: the brokers %v refused authentication with kafka.sasl.mechanism %s as user %q: %w; check kafka.sasl.username and password, and that the brokers enable this mechanism on this listener", k.Brokers, k.SASL.Mechanism, k.SASL.Username, err)
}

// timeoutErr says why no answer came by kafka.startup_timeout, from the last
// failed connection, which the context's expiry would hide.
func timeoutErr(k sourceopts.Options, err, lastConn error) error {
	if lastConn != nil {
		err = lastConn
	}
	if isAuthErr(err) {
		return authErr(k, err)
	}
	if k.SASL.Mechanism != "" && errors.Is(err, io.EOF) {
		// Brokers close the connection on a SASL exchange they don't
		// accept: a wrong password, or a listener without SASL.
		return fmt.Errorf("kafka: the brokers %v closed every connection during authentication with kafka.sasl.mechanism %s as user %q: %w; check kafka.sasl.username and password, and that the brokers enable SASL with this mechanism on this listener", k.Brokers, k.SASL.Mechanism, k.SASL.Username, err)
	}
	return fmt.Errorf("kafka: no broker of kafka.brokers %v answered within kafka.startup_timeout %s: %w; check kafka.brokers, the network, and kafka.tls and kafka.sasl against the brokers' listener", k.Brokers, k.StartupTimeout, err)
}

func isAuthErr(err error) bool {
	if err == nil {
		return false
	}
	return errors.Is(err, kerr.SaslAuthenticationFailed) || errors.Is(err, kerr.UnsupportedSaslMechanism) ||
		errors.Is(err, kerr.IllegalSaslState) || errors.Is(err, kerr.ClusterAuthorizationFailed)
}

// connErrs keeps the last failed connection to a broker: when the check
// times out, that is the cause worth reporting. A timed-out dial does not
// replace an earlier, more specific error: the dial in flight when
// kafka.startup_timeout ends fails with "i/o timeout" whatever the cause,
// and a refused connection says more. A connection that succeeds clears
// what came before it: a broker refused while it started is not the cause
// of a later timeout.
type connErrs struct {
	mu  sync.Mutex
	err error
}

func (c *connErrs) OnBrokerConnect(_ kgo.BrokerMetadata, _ time.Duration, _ net.Conn, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil && c.err != nil && isTimeout(err) && !isTimeout(c.err) {
		return
	}
	c.err = err
}

// isTimeout reports whether a dial timed out or was cut short by its
// context: either way it says nothing of the broker.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	ne, ok := errors.AsType[net.Error](err)
	return ok && ne.Timeout()
}

func (c *connErrs) last() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// topicByTopic asks for each topic's metadata alone, and marks those the
// broker refuses as not authorized.
func topicByTopic(ctx context.Context, adm *kadm.Client, topics []string) (kadm.Metadata, error) {
	out := kadm.Metadata{Topics: kadm.TopicDetails{}}
	for _, t := range topics {
		meta, err := adm.Metadata(ctx, t)
		switch {
		case errors.Is(err, kerr.TopicAuthorizationFailed):
			out.Topics[t] = kadm.TopicDetail{Topic: t, Err: kerr.TopicAuthorizationFailed}
		case err != nil:
			return out, fmt.Errorf("kafka: metadata of topic %q: %w", t, err)
		default:
			if td, ok := meta.Topics[t]; ok {
				out.Topics[t] = td
			}
		}
	}
	return out, nil
}
