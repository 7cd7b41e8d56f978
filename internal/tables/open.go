package tables

import (
	"context"
	"errors"
	"net/url"
	"strings"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/naming"
)

// ErrNoCatalog: this build has no Iceberg catalog to open.
var ErrNoCatalog = errors.New("iceberg.table is set, but this build has no Iceberg catalog yet (package iceberg, issue #24); unset iceberg.table")

// OpenCatalog opens iceberg.catalog. It is the seam package iceberg plugs
// into once merged, an adapter of a few lines: iceberg.Open(ctx,
// cfg.Iceberg, cfg.Warehouse()) as the Catalog, its *Table as Table,
// File mapped field for field. Until then it has nothing to open.
func OpenCatalog(ctx context.Context, cfg *config.Config) (Catalog, error) {
	return nil, ErrNoCatalog
}

// OptionsFor is the Committer's Options from cfg.
func OptionsFor(cfg *config.Config) Options {
	base := cfg.Storage.URL
	if u, err := url.Parse(base); err == nil {
		u.RawQuery = ""
		base = u.String()
	}
	base = strings.TrimSuffix(base, "/") + "/"
	warehouse := cfg.Warehouse()
	return Options{
		Table: cfg.Iceberg.Table,
		Base:  base,
		Location: func(name string) string {
			ns, table, _ := config.SplitTable(name)
			return naming.TableLocation(warehouse, ns, table)
		},
		Interval:        cfg.Iceberg.CommitInterval,
		MaxPendingBytes: VolumeFactor * int64(cfg.File.MaxBytes),
	}
}
