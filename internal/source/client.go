package source

import (
	"fmt"
	"log/slog"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/spillway/spillway/internal/source/sourceopts"
	"github.com/spillway/spillway/internal/tlsfiles"
)

// ClientOptions translates the kafka config into franz-go options shared by
// the consumer and by tools (verify, the dead-letter producer).
func ClientOptions(k sourceopts.Options) ([]kgo.Opt, error) {
	opts := []kgo.Opt{
		kgo.SeedBrokers(k.Brokers...),
		kgo.ClientID(k.ClientID),
	}
	if k.TLS.Enabled {
		tc, err := tlsfiles.Config("kafka.tls", tlsfiles.Files{CAFile: k.TLS.CAFile, CertFile: k.TLS.CertFile, KeyFile: k.TLS.KeyFile})
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	switch strings.ToUpper(k.SASL.Mechanism) {
	case "":
	case "PLAIN":
		opts = append(opts, kgo.SASL(plain.Auth{User: k.SASL.Username, Pass: k.SASL.Password}.AsMechanism()))
	case "SCRAM-SHA-256":
		opts = append(opts, kgo.SASL(scram.Auth{User: k.SASL.Username, Pass: k.SASL.Password}.AsSha256Mechanism()))
	case "SCRAM-SHA-512":
		opts = append(opts, kgo.SASL(scram.Auth{User: k.SASL.Username, Pass: k.SASL.Password}.AsSha512Mechanism()))
	default:
		return nil, fmt.Errorf("kafka.sasl.mechanism %q is not supported", k.SASL.Mechanism)
	}
	return opts, nil
}

// slogLogger adapts slog to franz-go's logger, at warn and above only: the
// client's info logs are per-connection chatter.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Level() kgo.LogLevel { return kgo.LogLevelWarn }

func (s slogLogger) Log(level kgo.LogLevel, msg string, kv ...any) {
	switch level {
	case kgo.LogLevelError:
		s.l.Error("kafka: "+msg, kv...)
	default:
		s.l.Warn("kafka: "+msg, kv...)
	}
}
