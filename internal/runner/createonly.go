package runner

import (
	"fmt"
	"log/slog"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/storage"
)

// createOnlyPolicy decides what the storage preflight's finding on
// create-only writes means for this run. A store that ignores them stops
// startup (storage.conditional_writes: required), or, acknowledged
// (unsafe_ignore), gives a warning that is logged and shown on /status.
// A one-object-per-key template replaces its objects by design: nothing
// it writes relies on them.
func createOnlyPolicy(cfg *config.Config, bucket *storage.Bucket, pf storage.PreflightReport, latestPerKey bool, log *slog.Logger) (warning string, err error) {
	unsafe := cfg.Storage.ConditionalWrites == "unsafe_ignore"
	switch {
	case !pf.CreateOnlyIgnored:
		if unsafe {
			log.Info("storage.conditional_writes: unsafe_ignore is set, but the store refuses a second create-only write as it should; the setting is not needed")
		}
		return "", nil
	case latestPerKey:
		log.Info("the store ignores create-only writes; a one-object-per-key template replaces its objects anyway, so nothing relies on them")
		return "", nil
	case unsafe:
		return fmt.Sprintf("storage: %s; running anyway because storage.conditional_writes is unsafe_ignore, so %s",
			bucket.CreateOnlyIgnoredMessage(pf), storage.CreateOnlyLoss), nil
	}
	return "", fmt.Errorf("storage: %s. Without create-only writes %s. Use a store that supports conditional writes, or set storage.conditional_writes: unsafe_ignore to run without these protections",
		bucket.CreateOnlyIgnoredMessage(pf), storage.CreateOnlyLoss)
}
