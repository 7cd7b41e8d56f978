// Package registry reads keys and values in the Confluent wire format: a
// magic byte, a schema id, and data written with the schema registered
// under that id. It fetches schemas from a Confluent-compatible registry
// with franz-go's sr client and keeps them by id.
//
// Schemas are fetched before records reach the sink (Resolve), so that the
// encoders, which run under the sink's lock, only read the cache (Lookup).
// A registry that can't be reached is retried with backoff until it answers
// or the caller's context ends: records wait, none is dropped. A schema id
// the registry does not know is cached as such, and every record that
// carries it is reported to the error policy. See docs/design.md, "Schema
// registry". Protobuf schemas are compiled with bufbuild/protocompile.
// Every schema type is mapped onto an Avro schema (Columns) for the typed
// columns of avro and parquet files.
package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/avro"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/spillway/spillway/internal/registry/columns"
	"github.com/spillway/spillway/internal/tlsfiles"
)

// ErrUndecodable marks a key or value that can't be decoded by a schema:
// no magic byte, an id the registry does not know, a schema type that is
// not supported, or data that does not match its schema. Errors wrapping
// it name the cause; the caller applies the error policy to the record.
var ErrUndecodable = columns.ErrUndecodable

// Schema is one registered schema, parsed.
type Schema struct {
	ID   int
	Type sr.SchemaType
	// Avro is the parsed schema of an Avro id, with its references.
	Avro *avro.Schema
	// Proto is the compiled file of a Protobuf id, with its imports.
	Proto protoreflect.FileDescriptor
	// Text is the schema as registered.
	Text string
	// Err, when set, is why records with this id can't be decoded (it
	// wraps ErrUndecodable): the id does not exist, the schema type is not
	// supported, or the schema does not parse.
	Err error

	// The columns of avro and parquet files (see Columns): one for an
	// Avro or JSON Schema id (or colsErr), one per message for Protobuf.
	avroCols, jsonCols *Columns
	colsErr            error
	protoCols          map[string]*columns.Message
}

// Registry fetches and caches schemas. Lookup and Parts are safe for
// concurrent use with Resolve.
type Registry struct {
	cl           *sr.Client
	keys, values bool
	log          *slog.Logger
	// backoff bounds the wait between two tries of an unreachable
	// registry; tests make them small.
	minBackoff, maxBackoff time.Duration

	mu    sync.RWMutex
	cache map[int]*Schema

	fetched, missing, retries atomic.Int64
	waiting                   atomic.Bool
}

// requestTimeout bounds one request, so that a registry that accepts the
// connection and then says nothing is retried like one that refuses it.
const requestTimeout = 10 * time.Second

// New returns a registry client for cfg, or nil when cfg has no URL. It
// makes no request: an unreachable registry is found, and waited for, by
// Resolve.
func New(cfg Options, log *slog.Logger) (*Registry, error) {
	if cfg.URL == "" {
		return nil, nil
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if cfg.TLS.CAFile != "" || cfg.TLS.CertFile != "" {
		tc, err := tlsfiles.Config("schema_registry.tls", tlsfiles.Files{CAFile: cfg.TLS.CAFile, CertFile: cfg.TLS.CertFile, KeyFile: cfg.TLS.KeyFile})
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = tc
	}
	opts := []sr.ClientOpt{
		sr.URLs(cfg.URL),
		sr.HTTPClient(&http.Client{Timeout: requestTimeout, Transport: tr}),
		sr.UserAgent("spillway"),
	}
	if cfg.Username != "" {
		opts = append(opts, sr.BasicAuth(cfg.Username, cfg.Password))
	}
	cl, err := sr.NewClient(opts...)
	if err != nil {
		// The message may quote the URL, which validation keeps free of
		// credentials.
		return nil, fmt.Errorf("schema_registry.url: %w", err)
	}
	return &Registry{
		cl: cl, keys: cfg.DecodeKeys(), values: cfg.DecodeValues(), log: log,
		minBackoff: 250 * time.Millisecond, maxBackoff: 30 * time.Second,
		cache: map[int]*Schema{},
	}, nil
}

// NewCached returns a registry that knows only schemas, by id, and asks
// no server: ids it does not hold are unknown. decode is as
// schema_registry.decode. It serves tests and tools that have the schemas
// at hand.
func NewCached(decode string, schemas map[int]sr.Schema) (*Registry, error) {
	r := &Registry{
		keys: decode == "key" || decode == "both", values: decode == "value" || decode == "both",
		log: slog.New(slog.DiscardHandler), cache: map[int]*Schema{},
	}
	for id, s := range schemas {
		out, err := r.build(context.Background(), id, s)
		if err != nil {
			return nil, err
		}
		r.cache[id] = out
	}
	return r, nil
}

// SetBackoff sets the bounds of the wait between tries of an unreachable
// registry (250ms to 30s by default).
func (r *Registry) SetBackoff(lo, hi time.Duration) { r.minBackoff, r.maxBackoff = lo, hi }

// Keys and Values say which record parts are decoded.
func (r *Registry) Keys() bool { return r.keys }

// Values: see Keys.
func (r *Registry) Values() bool { return r.values }

// Stats are the registry's counters.
type Stats struct {
	Fetched int64 // schemas fetched and cached
	Missing int64 // ids the registry does not know
	Retries int64 // failed tries of an unreachable registry
	Waiting bool  // consumption is waiting for the registry now
	// Undeclared counts JSON Schema values decoded for typed files that
	// had properties their schema does not declare, which the files leave
	// out.
	Undeclared int64
}

// Stats returns the counters.
func (r *Registry) Stats() Stats {
	st := Stats{Fetched: r.fetched.Load(), Missing: r.missing.Load(), Retries: r.retries.Load(), Waiting: r.waiting.Load()}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, s := range r.cache {
		if s.jsonCols != nil {
			st.Undeclared += s.jsonCols.Undeclared()
		}
	}
	return st
}

// Lookup returns the cached schema of id, if Resolve fetched it.
func (r *Registry) Lookup(id int) (*Schema, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	s, ok := r.cache[id]
	return s, ok
}

var header sr.ConfluentHeader

// ID reads the schema id of a key or value in the Confluent wire format,
// and returns the bytes after the header. Protobuf message indexes are
// left in the rest: only the schema knows to expect them.
func ID(b []byte) (int, []byte, error) {
	id, rest, err := header.DecodeID(b)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: no schema registry header (magic byte 0 and a 4-byte schema id): %w", ErrUndecodable, err)
	}
	return id, rest, nil
}

// Parts returns the schema ids r carries in the parts this registry
// decodes; ok is false for a part not decoded, null (a null key, a
// tombstone) or without a header.
func (r *Registry) Parts(rec *kgo.Record) (key, value int, keyOK, valueOK bool) {
	if r.keys && rec.Key != nil {
		if id, _, err := ID(rec.Key); err == nil {
			key, keyOK = id, true
		}
	}
	if r.values && rec.Value != nil {
		if id, _, err := ID(rec.Value); err == nil {
			value, valueOK = id, true
		}
	}
	return key, value, keyOK, valueOK
}

// Resolve fetches the schemas of recs that are not cached yet. A registry
// that can't be reached, or answers with a server error, is retried with
// backoff until it answers or ctx ends; then Resolve returns ctx's error.
// An id the registry does not know is cached with Err set, as is a schema
// that can't be used: such records are for the error policy, and asking
// again would not change the answer. Refused credentials are returned as
// an error: no record can be decoded until they are fixed.
func (r *Registry) Resolve(ctx context.Context, recs []*kgo.Record) error {
	var want []int
	seen := map[int]bool{}
	for _, rec := range recs {
		k, v, kok, vok := r.Parts(rec)
		for _, p := range [...]struct {
			id int
			ok bool
		}{{k, kok}, {v, vok}} {
			if !p.ok || seen[p.id] {
				continue
			}
			seen[p.id] = true
			if _, ok := r.Lookup(p.id); !ok {
				want = append(want, p.id)
			}
		}
	}
	for _, id := range want {
		if r.cl == nil {
			r.mu.Lock()
			r.cache[id] = &Schema{ID: id, Err: fmt.Errorf("%w: schema id %d is not known", ErrUndecodable, id)}
			r.mu.Unlock()
			continue
		}
		s, err := r.fetchRetrying(ctx, id)
		if err != nil {
			return err
		}
		r.mu.Lock()
		r.cache[id] = s
		r.mu.Unlock()
	}
	return nil
}

// fetchRetrying fetches id until the registry answers.
func (r *Registry) fetchRetrying(ctx context.Context, id int) (*Schema, error) {
	wait := r.minBackoff
	for attempt := 1; ; attempt++ {
		s, err := r.fetch(ctx, id)
		if err == nil {
			if attempt > 1 {
				r.log.Info("schema registry answers again; consumption goes on", "schema_id", id, "tries", attempt)
			}
			r.waiting.Store(false)
			return s, nil
		}
		if !transient(err) {
			r.waiting.Store(false)
			return nil, err
		}
		if ctx.Err() != nil {
			r.waiting.Store(false)
			return nil, ctx.Err()
		}
		r.retries.Add(1)
		r.waiting.Store(true)
		r.log.Warn("schema registry unreachable; consumption of every partition waits for it, nothing is dropped",
			"schema_id", id, "try", attempt, "retry_in", wait, "err", err)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			r.waiting.Store(false)
			return nil, ctx.Err()
		case <-t.C:
		}
		wait = min(wait*2, r.maxBackoff)
	}
}

// errAuth is a refusal of the credentials: retrying can't help.
type errAuth struct{ err error }

func (e errAuth) Error() string { return e.err.Error() }
func (e errAuth) Unwrap() error { return e.err }

// transient reports whether err may pass by waiting: anything but an
// answer of the registry (refused credentials are not transient either).
func transient(err error) bool {
	var ae errAuth
	return !errors.As(err, &ae)
}

// fetch asks the registry for id once. It returns a Schema (maybe with Err
// set) when the registry answered, and an error when it did not, or
// refused the credentials.
func (r *Registry) fetch(ctx context.Context, id int) (*Schema, error) {
	s, err := r.cl.SchemaByID(ctx, id)
	if err != nil {
		return r.answer(id, err)
	}
	out, err := r.build(ctx, id, s)
	if err != nil {
		return nil, err
	}
	r.fetched.Add(1)
	return out, nil
}

// build parses a registered schema. It returns an error only when a
// reference could not be fetched for a reason that may pass.
func (r *Registry) build(ctx context.Context, id int, s sr.Schema) (*Schema, error) {
	out := &Schema{ID: id, Type: s.Type, Text: s.Schema}
	switch s.Type {
	case sr.TypeAvro:
		sch, err := r.parseAvro(ctx, s, map[string]bool{})
		if err != nil && !errors.Is(err, ErrUndecodable) {
			// A reference could not be fetched: missing (a broken
			// schema), or the registry did not answer (try again).
			if _, aerr := r.answer(id, err); aerr != nil {
				return nil, aerr
			}
		}
		if err != nil {
			out.Err = fmt.Errorf("%w: the Avro schema of id %d can't be used: %w", ErrUndecodable, id, err)
		}
		out.Avro = sch
	case sr.TypeJSON:
		// JSON Schema values are JSON after the header: text formats keep
		// them as they are; their columns are mapped from the schema
		// (package columns).
	case sr.TypeProtobuf:
		fd, err := r.parseProto(ctx, id, s)
		if err != nil && !errors.Is(err, ErrUndecodable) {
			if _, aerr := r.answer(id, err); aerr != nil {
				return nil, aerr
			}
		}
		if err != nil {
			out.Err = fmt.Errorf("%w: the Protobuf schema of id %d can't be used: %w", ErrUndecodable, id, err)
		}
		out.Proto = fd
	default:
		out.Err = fmt.Errorf("%w: schema id %d has the unknown schema type %q", ErrUndecodable, id, s.Type)
	}
	out.buildColumns(func(path string) {
		r.log.Warn("JSON Schema values have properties their schema does not declare; avro and parquet files can't hold them and leave them out (spillway_schema_registry_undeclared_total counts such values); declare them in the schema, or write jsonl to keep every property",
			"schema_id", id, "first", path)
	})
	return out, nil
}

// answer sorts out an error of a request: the registry's "no such schema"
// becomes a cached Schema with Err set; refused credentials become errAuth;
// anything else is returned as it is, to be retried.
func (r *Registry) answer(id int, err error) (*Schema, error) {
	var re *sr.ResponseError
	if !errors.As(err, &re) {
		return nil, err
	}
	switch {
	case re.ErrorCode == sr.ErrSchemaNotFound.Code || re.ErrorCode == sr.ErrSubjectNotFound.Code ||
		re.ErrorCode == sr.ErrVersionNotFound.Code || re.StatusCode == http.StatusNotFound:
		r.missing.Add(1)
		return &Schema{ID: id, Err: fmt.Errorf("%w: schema id %d does not exist in the registry (%v)", ErrUndecodable, id, err)}, nil
	case re.StatusCode == http.StatusUnauthorized || re.StatusCode == http.StatusForbidden:
		return nil, errAuth{fmt.Errorf("schema registry refused the credentials (HTTP %d): %w; check schema_registry.username and schema_registry.password", re.StatusCode, err)}
	}
	return nil, err
}

// parseAvro parses an Avro schema with its references, which are named
// types registered under other subjects: each is parsed first into one
// avro.SchemaCache, so that the schema's references to them resolve.
func (r *Registry) parseAvro(ctx context.Context, s sr.Schema, seen map[string]bool) (*avro.Schema, error) {
	var cache avro.SchemaCache
	if err := r.parseRefs(ctx, &cache, s.References, seen); err != nil {
		return nil, err
	}
	sch, err := cache.Parse(s.Schema)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrUndecodable, err)
	}
	return sch, nil
}

func (r *Registry) parseRefs(ctx context.Context, cache *avro.SchemaCache, refs []sr.SchemaReference, seen map[string]bool) error {
	for _, ref := range refs {
		if r.cl == nil {
			return fmt.Errorf("%w: reference %q: a registry without a client can't fetch references", ErrUndecodable, ref.Name)
		}
		k := fmt.Sprintf("%s/%d", ref.Subject, ref.Version)
		if seen[k] {
			continue
		}
		seen[k] = true
		ss, err := r.cl.SchemaByVersion(ctx, ref.Subject, ref.Version)
		if err != nil {
			return fmt.Errorf("reference %q (subject %s version %d): %w", ref.Name, ref.Subject, ref.Version, err)
		}
		if err := r.parseRefs(ctx, cache, ss.References, seen); err != nil {
			return err
		}
		if _, err := cache.Parse(ss.Schema.Schema); err != nil {
			return fmt.Errorf("%w: reference %q: %w", ErrUndecodable, ref.Name, err)
		}
	}
	return nil
}
