// Package sourceopts is the kafka section of the config (brokers, group,
// topics, TLS, SASL, timeouts): its Options and their checks. Package
// source consumes with them. It is a leaf, apart from package source, so
// that config can embed it without an import cycle (source reaches
// config through ledger, readback and the format packages).
package sourceopts

import (
	"errors"
	"io/fs"
	"os"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"time"

	"github.com/spillway/spillway/internal/hostport"
	"github.com/spillway/spillway/internal/keycheck"
)

// The accepted values of the section's enumerated keys. Normalize matches
// them case-insensitively and stores them in the case given here.
var (
	startOffsets   = []string{"earliest", "latest"}
	saslMechanisms = []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"}
)

const (
	// Kafka brokers' default group.min.session.timeout.ms and
	// group.max.session.timeout.ms: outside them every join is refused.
	minSessionTimeout = 6 * time.Second
	maxSessionTimeout = 30 * time.Minute
	// Below a second a healthy but distant cluster fails the startup check;
	// past an hour a setup that can't work idles as if it could.
	minStartupTimeout = time.Second
	maxStartupTimeout = time.Hour
)

// topicName is what Kafka accepts as a topic name (and a group instance
// id).
var topicName = regexp.MustCompile(`^[a-zA-Z0-9._-]{1,249}$`)

// Options is the kafka section of the config: the consumer group and
// how to reach the brokers. Package config embeds it; Validate checks it.
type Options struct {
	Brokers     []string `koanf:"brokers"`
	Group       string   `koanf:"group"`
	Topics      []string `koanf:"topics"`
	TopicRegex  string   `koanf:"topic_regex"`
	StartOffset string   `koanf:"start_offset"` // earliest | latest
	ClientID    string   `koanf:"client_id"`
	// InstanceID turns on static membership (KIP-345): a restarted
	// instance with the same id takes its partitions back at once, with
	// no rebalance, instead of waiting out the old member's session.
	InstanceID string `koanf:"instance_id"`
	// SessionTimeout is how long the group waits for a silent member
	// before giving its partitions to others.
	SessionTimeout time.Duration `koanf:"session_timeout"`
	// StartupTimeout bounds the check at start that the brokers answer,
	// accept the credentials and hold the topics: a setup that can't work
	// stops with what to fix instead of idling.
	StartupTimeout time.Duration `koanf:"startup_timeout"`
	TLS            TLS           `koanf:"tls"`
	SASL           SASL          `koanf:"sasl"`
}

// TLS configures the connection to the brokers.
type TLS struct {
	Enabled  bool   `koanf:"enabled"`
	CAFile   string `koanf:"ca_file"`
	CertFile string `koanf:"cert_file"`
	KeyFile  string `koanf:"key_file"`
}

// SASL configures broker authentication.
type SASL struct {
	Mechanism string `koanf:"mechanism"` // "" | PLAIN | SCRAM-SHA-256 | SCRAM-SHA-512
	Username  string `koanf:"username"`
	Password  string `koanf:"password"` // secret
}

// Normalize puts the enumerated values in their canonical case; values
// that match nothing are left as given, for Validate to quote.
func (k *Options) Normalize() {
	k.StartOffset = keycheck.Canon(k.StartOffset, startOffsets)
	k.SASL.Mechanism = keycheck.Canon(k.SASL.Mechanism, saslMechanisms)
}

// Validate reports every problem of the section as a *keycheck.Error, or
// nil. Enumerated values must be in canonical case (Normalize).
func (k *Options) Validate() error {
	var ps keycheck.List
	k.check(&ps)
	return ps.Err()
}

func (k *Options) check(ps *keycheck.List) {
	if len(k.Brokers) == 0 {
		ps.Add("kafka.brokers", "", "required; list at least one broker as host:port, such as [\"127.0.0.1:9092\"]")
	}
	for _, b := range k.Brokers {
		if err := hostport.Dial(b); err != nil {
			ps.Add("kafka.brokers", b, "%v; use host:port such as 127.0.0.1:9092", err)
		}
	}
	if strings.TrimSpace(k.Group) == "" {
		ps.Add("kafka.group", "", "required; set the consumer group name, such as spillway")
	}
	if k.InstanceID != "" && !topicName.MatchString(k.InstanceID) {
		ps.Add("kafka.instance_id", k.InstanceID, "is not a valid group instance id; use 1 to 249 letters, digits, '.', '_' or '-', unique per instance, such as the pod name")
	}
	if k.SessionTimeout < minSessionTimeout || k.SessionTimeout > maxSessionTimeout {
		ps.Add("kafka.session_timeout", k.SessionTimeout.String(), "is outside what brokers accept by default; use a duration from %s to %s, such as 45s", minSessionTimeout, maxSessionTimeout)
	}
	if k.StartupTimeout < minStartupTimeout || k.StartupTimeout > maxStartupTimeout {
		ps.Add("kafka.startup_timeout", k.StartupTimeout.String(), "is out of range; use a duration from %s to %s, such as 60s", minStartupTimeout, maxStartupTimeout)
	}

	switch {
	case len(k.Topics) == 0 && k.TopicRegex == "":
		ps.Add("kafka.topics", "", `required; list the topics to consume, such as ["events"], or set kafka.topic_regex to a pattern such as "events\\..*"`)
	case len(k.Topics) > 0 && k.TopicRegex != "":
		ps.Add("kafka.topic_regex", k.TopicRegex, "is set as well as kafka.topics; set only one of the two")
	}
	for i, t := range k.Topics {
		switch {
		case !topicName.MatchString(t):
			ps.Add("kafka.topics", t, "is not a valid topic name; use 1 to 249 letters, digits, '.', '_' or '-'")
		case slices.Index(k.Topics, t) < i:
			ps.Add("kafka.topics", t, "is listed twice")
		}
	}
	if _, err := k.TopicPattern(); err != nil {
		var e *keycheck.Error
		if errors.As(err, &e) {
			*ps = append(*ps, e.Problems...)
		}
	}

	ps.OneOf("kafka.start_offset", k.StartOffset, startOffsets)
	k.TLS.check(ps)
	k.SASL.check(ps)
}

// TopicPattern returns kafka.topic_regex compiled, or nil when it is unset.
// Validation, the consumer and verify all compile it here, so they agree
// on what it accepts and matches: like kgo.ConsumeRegex, it matches
// anywhere in a topic name unless anchored with ^ and $. A pattern that
// does not compile is an *Error naming the key.
func (k *Options) TopicPattern() (*regexp.Regexp, error) {
	if k.TopicRegex == "" {
		return nil, nil
	}
	re, err := regexp.Compile(k.TopicRegex)
	if err != nil {
		why := err.Error()
		var se *syntax.Error
		if errors.As(err, &se) {
			why = se.Code.String()
		}
		return nil, &keycheck.Error{Problems: []keycheck.Problem{{Key: "kafka.topic_regex", Value: k.TopicRegex, Msg: "is not a valid regular expression: " + why}}}
	}
	return re, nil
}

func (t *TLS) check(ps *keycheck.List) {
	switch {
	case t.CertFile != "" && t.KeyFile == "":
		ps.Add("kafka.tls.key_file", "", "required when kafka.tls.cert_file is set: a client certificate needs its private key")
	case t.KeyFile != "" && t.CertFile == "":
		ps.Add("kafka.tls.cert_file", "", "required when kafka.tls.key_file is set: a private key needs its client certificate")
	}
	files := []struct{ key, path string }{
		{"kafka.tls.ca_file", t.CAFile},
		{"kafka.tls.cert_file", t.CertFile},
		{"kafka.tls.key_file", t.KeyFile},
	}
	for _, f := range files {
		if f.path == "" {
			continue
		}
		if !t.Enabled {
			ps.Add(f.key, f.path, "is set but kafka.tls.enabled is false; set kafka.tls.enabled: true to use TLS")
		}
		switch fi, err := os.Stat(f.path); {
		case errors.Is(err, fs.ErrNotExist):
			ps.Add(f.key, f.path, "does not exist; give the path of a PEM file")
		case err != nil:
			var pe *fs.PathError
			if errors.As(err, &pe) {
				err = pe.Err
			}
			ps.Add(f.key, f.path, "can't be read: %v", err)
		case fi.IsDir():
			ps.Add(f.key, f.path, "is a directory; give the path of a PEM file")
		}
	}
}

func (s *SASL) check(ps *keycheck.List) {
	if s.Mechanism == "" {
		if s.Username != "" || s.Password != "" {
			ps.Add("kafka.sasl.mechanism", "", "required when kafka.sasl.username or password is set; use %s", keycheck.OrList(saslMechanisms))
		}
		return
	}
	if !slices.Contains(saslMechanisms, s.Mechanism) {
		ps.Add("kafka.sasl.mechanism", s.Mechanism, "is not valid; use %s, or leave it empty for no authentication", keycheck.OrList(saslMechanisms))
	}
	if s.Username == "" {
		ps.Add("kafka.sasl.username", "", "required when kafka.sasl.mechanism is set")
	}
	if s.Password == "" {
		ps.Add("kafka.sasl.password", "", "required when kafka.sasl.mechanism is set")
	}
}
