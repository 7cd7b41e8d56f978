package storage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gocloud.dev/blob"
)

// PreflightTimeout bounds the whole startup check, so that an endpoint that
// never answers (a firewall dropping packets, a wrong host) fails startup
// with a message instead of hanging it. Four small requests fit in it many
// times over, with the SDKs' own retries.
const PreflightTimeout = 30 * time.Second

// preflightPrefix starts the name of the probe object. It begins with a dot
// so that the local backend's List skips it, and no name template can match
// it (a template needs a numeric partition where "preflight" stands).
const preflightPrefix = ".spillway-preflight-"

// PreflightReport says what Preflight checked and what it could not clean.
type PreflightReport struct {
	// Probe is the key of the probe object that was written.
	Probe string
	// Leftover, when not nil, is why the probe object could not be
	// deleted: it stays in the bucket, harmless (no name template matches
	// it) but visible. Spillway never deletes objects otherwise, so a
	// policy without delete permission is legitimate: warn, don't fail.
	Leftover error
}

// Preflight checks, before any record is consumed, that the bucket can do
// what Spillway will ask of it: list under prefix (resuming from storage
// lists a partition's files), write a new object create-only under prefix,
// and read it back (resuming reads the last file). It then deletes the probe
// object. It takes at most PreflightTimeout, or ctx's deadline if sooner.
//
// The error, when not nil, says what to fix: a *FatalError for a missing
// bucket, refused credentials, a denied permission or a wrong region; or a
// plain error saying the store did not answer.
func (b *Bucket) Preflight(ctx context.Context, prefix string) (PreflightReport, error) {
	return b.preflight(ctx, prefix, PreflightTimeout)
}

func (b *Bucket) preflight(ctx context.Context, prefix string, timeout time.Duration) (PreflightReport, error) {
	var rnd [8]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return PreflightReport{}, fmt.Errorf("storage: preflight: %w", err)
	}
	rep := PreflightReport{Probe: prefix + preflightPrefix + hex.EncodeToString(rnd[:])}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var err error
	rep.Leftover, err = b.be.preflight(pctx, prefix, rep.Probe)
	if err == nil {
		return rep, nil
	}
	var fe *FatalError
	if errors.As(err, &fe) {
		return rep, fmt.Errorf("storage: %w", err)
	}
	if ctx.Err() == nil && pctx.Err() != nil {
		return rep, fmt.Errorf("storage: preflight: %s did not answer within %s (check the endpoint in storage.url and the network): %w", b.url, timeout, err)
	}
	return rep, fmt.Errorf("storage: preflight of %s: %w", b.url, err)
}

// preflightData is the probe's content, which says what it is to whoever
// finds one left over.
const preflightData = "spillway preflight: checks that this bucket is writable; safe to delete\n"

// preflight lists one key under prefix, writes the probe create-only, reads
// it back and deletes it. A failed delete is returned as leftover, not err.
func (r *remote) preflight(ctx context.Context, prefix, probe string) (leftover error, err error) {
	// One page of one key: listing must work, but the bucket may hold
	// millions of objects.
	if _, _, err := r.b.ListPage(ctx, blob.FirstPageToken, 1, &blob.ListOptions{Prefix: prefix}); err != nil {
		return nil, r.explain(err, fmt.Sprintf("list objects under %q", prefix))
	}
	err = r.b.WriteAll(ctx, probe, []byte(preflightData), &blob.WriterOptions{
		ContentType:                 "text/plain",
		DisableContentTypeDetection: true,
		IfNotExist:                  true, // what every real write sends
	})
	if err != nil {
		return nil, r.explain(err, fmt.Sprintf("write %q", probe))
	}
	got, err := r.b.ReadAll(ctx, probe)
	if err == nil && string(got) != preflightData {
		err = fmt.Errorf("read back %d bytes that differ from the %d written", len(got), len(preflightData))
	}
	if err != nil {
		// Delete anyway: the probe should not outlive a failed check.
		_ = r.b.Delete(ctx, probe)
		return nil, r.explain(err, fmt.Sprintf("read %q", probe))
	}
	if err := r.b.Delete(ctx, probe); err != nil {
		return r.explain(err, fmt.Sprintf("delete %q", probe)), nil
	}
	return nil, nil
}

// explain classifies err like wrap, and says which step failed. Missing
// credentials are recognised here only: at startup they are a
// configuration problem, while later the same error can be a passing
// failure to refresh them, which is for retries to handle.
func (r *remote) explain(err error, action string) error {
	if f := classify(err, r.name); f != nil {
		if f.Action == "" {
			c := *f
			c.Action = action
			return &c
		}
		return f
	}
	if detail, ok := noAWSCredentials(err); ok {
		return &FatalError{Kind: KindCredentials, Bucket: r.name, Code: codeNoCredentials, Detail: detail, backend: backendS3, err: err}
	}
	var dns *net.DNSError
	if errors.As(err, &dns) && dns.IsNotFound {
		return fmt.Errorf("can't %s: host %q does not exist (check the endpoint, or the account name, in storage.url): %w", action, dns.Name, r.wrap(err))
	}
	return fmt.Errorf("can't %s: %w", action, r.wrap(err))
}

// noAWSCredentials recognises the AWS SDK's error when its credential chain
// found nothing (it has no type of its own), and returns the chain's reason.
func noAWSCredentials(err error) (string, bool) {
	const marker = "get identity: get credentials: "
	msg := err.Error()
	i := strings.Index(msg, marker)
	if i < 0 {
		return "", false
	}
	return msg[i+len(marker):], true
}

// preflight checks that a file can be created, written, synced and
// removed in the directory of probe: the directory is created if needed,
// as every write would. A local probe is always removed.
func (l *local) preflight(_ context.Context, _, probe string) (leftover, err error) {
	return nil, l.probe(probe)
}

func (l *local) probe(probe string) error {
	p, err := l.path(probe)
	if err != nil {
		return err
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("can't create directory %s (check its parent's owner and mode): %w", dir, err)
	}
	if _, err := os.ReadDir(dir); err != nil {
		return fmt.Errorf("can't list directory %s: %w", dir, err)
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("can't create a file in %s (check the directory's owner and mode): %w", dir, err)
	}
	_, err = f.WriteString(preflightData)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if rerr := os.Remove(p); err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("can't write a file in %s: %w", dir, err)
	}
	return nil
}
