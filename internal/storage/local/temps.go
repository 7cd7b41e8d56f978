package local

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// ownedTmpPrefix marks the temp files of writes with an owner
// (WriteOptions.Owner). The final name doesn't say which partition writes
// it, so the temp file's name says so instead: ownedTmpPrefix, ownerTag,
// ".", a random suffix. RemoveAbandoned never takes them for its own
// (their prefix differs from TempPrefix).
const ownedTmpPrefix = ".spillway-tmp@"

// ownerTag is what an owned temp file's name holds of its owner: 64 bits
// of its SHA-256, in hex. A topic name alone may take 249 of a file name's
// 255 bytes, so the owner can't be written out; two owners of one
// directory share a tag with odds of about n²/2⁶⁵ for n owners.
func ownerTag(owner string) string {
	sum := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(sum[:8])
}

// RemoveAbandoned deletes temp files left by a process that died while
// writing, whose final key starts with prefix and belongs(key) says is
// ours, never those of writes this process still has open.
func (l *Dir) RemoveAbandoned(ctx context.Context, prefix string, belongs func(key string) bool) error {
	return l.walkTemps(ctx, prefix, func(p, key, name string) bool {
		name, ok := strings.CutPrefix(name, TempPrefix)
		if !ok {
			return false
		}
		// Strip CreateTemp's random suffix.
		if i := strings.LastIndexByte(name, '.'); i > 0 {
			name = name[:i]
		}
		final := path.Join(path.Dir(key), name)
		return strings.HasPrefix(final, prefix) && belongs(final)
	})
}

// RemoveOwned deletes the temp files of owned writes (ownedTmpPrefix)
// under prefix whose owner is one of owners, never those of writes this
// process still has open.
func (l *Dir) RemoveOwned(ctx context.Context, prefix string, owners []string) error {
	tags := make(map[string]bool, len(owners))
	for _, o := range owners {
		tags[ownerTag(o)] = true
	}
	return l.walkTemps(ctx, prefix, func(_, _, name string) bool {
		rest, ok := strings.CutPrefix(name, ownedTmpPrefix)
		if !ok {
			return false
		}
		tag, _, ok := strings.Cut(rest, ".")
		return ok && tags[tag]
	})
}

// walkTemps removes the hidden files, under the directories whose keys can
// start with prefix, that remove(path, key, base name) accepts, except
// those this process is writing. A file's temp file is in its final
// directory, which can be any directory under the prefix's (a template
// with a variable before {{start_offset}}, or a "/" after it): the walk
// goes into every directory whose keys can start with prefix, and into no
// other.
func (l *Dir) walkTemps(ctx context.Context, prefix string, remove func(p, key, name string) bool) error {
	start := l.root
	if i := strings.LastIndex(prefix, "/"); i >= 0 {
		var err error
		if start, err = l.path(prefix[:i]); err != nil {
			return err
		}
	}
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rel, err := filepath.Rel(l.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if d.IsDir() {
			if p != start && !strings.HasPrefix(key+"/", prefix) {
				return fs.SkipDir
			}
			return nil
		}
		if !strings.HasPrefix(d.Name(), ".") || !remove(p, key, d.Name()) {
			return nil
		}
		l.mu.Lock()
		ours := l.writing[p]
		l.mu.Unlock()
		if ours {
			return nil
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
	return err
}
