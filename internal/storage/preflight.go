package storage

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/spillway/spillway/internal/naming"
	"github.com/spillway/spillway/internal/storage/remote"
	"github.com/spillway/spillway/internal/storage/storeerr"
)

// PreflightTimeout bounds the whole startup check, so that an endpoint that
// never answers (a firewall dropping packets, a wrong host) fails startup
// with a message instead of hanging it. Its few small requests (nine at
// most, on S3) fit in it many times over, with the SDKs' own retries.
const PreflightTimeout = 30 * time.Second

// preflightPrefix starts the base name of the probe object, which lives in
// the prefix's state directory (naming.StateDir) beside the ledger: Hive,
// Spark, Trino and DuckDB skip a directory starting with '_', verify skips
// the state directory and dot names, and the local backend's List skips
// dot names. The ledger lists only its own subdirectory, so a probe left
// over is never taken for an entry.
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
	// CreateOnlyIgnored is set when the store accepted a second
	// create-only write of the probe: it ignores conditional writes (an
	// S3-compatible store without If-None-Match), so a commit can replace
	// an object instead of failing with ErrExists. See CreateOnlyLoss for
	// what that costs.
	CreateOnlyIgnored bool
	// ignoredBy is the write the store took, for the message; "" is a
	// second write like the first.
	ignoredBy string
}

// CreateOnlyLoss says what is lost on a store that ignores create-only
// writes (PreflightReport.CreateOnlyIgnored), for the message that refuses
// to start and the warning of a run that goes on regardless.
const CreateOnlyLoss = "fencing against a paused previous owner of a partition is gone " +
	"(an instance that stalls past kafka.session_timeout and wakes up replaces the ledger entries and files its successor wrote, " +
	"so records are lost or written twice, silently), " +
	"and an object another writer put under the name of a Spillway file is silently replaced"

// createOnlyRequest names what a create-only write sends to the store of
// scheme, for messages.
func createOnlyRequest(scheme string) string {
	switch scheme {
	case "s3":
		return "If-None-Match: *"
	case "gs":
		return "ifGenerationMatch=0"
	case "azblob":
		return "If-None-Match: *"
	case "file":
		return "link(2), which never replaces"
	}
	return "create-only"
}

// CreateOnlyIgnoredMessage says what the preflight saw when
// rep.CreateOnlyIgnored is set: which store, which probe, which request.
func (b *Bucket) CreateOnlyIgnoredMessage(rep PreflightReport) string {
	again := rep.ignoredBy
	if again == "" {
		again = "wrote it again the same way"
	}
	return fmt.Sprintf("%s ignores create-only writes: the preflight wrote %q with %s, then %s, and the store took that too instead of refusing it as taken",
		b.url, rep.Probe, createOnlyRequest(b.scheme), again)
}

// Preflight checks, before any record is consumed, that the bucket can do
// what Spillway will ask of it: list under prefix (resuming from storage
// lists a partition's files), write a new object create-only under prefix,
// read it back (resuming reads the last file), and refuse a second
// create-only write of it, and on S3 a create-only multipart upload to it
// too (PreflightReport.CreateOnlyIgnored when the store took either). It
// then deletes the probe object, whose name is random: many instances may
// check one prefix at once. It takes at most PreflightTimeout, or ctx's
// deadline if sooner.
//
// The error, when not nil, says what to fix: a *storeerr.FatalError for a missing
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
	rep := PreflightReport{Probe: prefix + naming.StateDir + "/" + preflightPrefix + hex.EncodeToString(rnd[:])}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := b.be.preflight(pctx, prefix, &rep)
	if err == nil {
		return rep, nil
	}
	var fe *storeerr.FatalError
	if errors.As(err, &fe) {
		return rep, fmt.Errorf("storage: %w", err)
	}
	if ctx.Err() == nil && pctx.Err() != nil {
		return rep, fmt.Errorf("storage: preflight: %s did not answer within %s (check the endpoint in storage.url and the network): %w", b.url, timeout, err)
	}
	return rep, fmt.Errorf("storage: preflight of %s: %w", b.url, err)
}

// preflightData is the probe's content (remote.ProbeData).
const preflightData = remote.ProbeData

// writeAgain writes probe, which exists, create-only once more through
// be's own writer, the path of every data file and ledger entry, and
// reports whether the store took it: a store that honours create-only
// writes refuses with ErrExists. Spillway's fencing rests on that refusal,
// and an S3-compatible store that ignores If-None-Match gives no sign of
// it otherwise.
func writeAgain(ctx context.Context, be backend, probe string) (accepted bool, err error) {
	w, err := be.newWriter(ctx, probe, nil, writeOpts{})
	if err != nil {
		return false, err
	}
	if _, err := w.Write([]byte(preflightData)); err != nil {
		w.abort()
		return false, err
	}
	err = w.commit()
	if errors.Is(err, ErrExists) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, nil
}
