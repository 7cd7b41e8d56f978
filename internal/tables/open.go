package tables

import (
	"context"
	"errors"
	"fmt"

	"github.com/spillway/spillway/internal/config"
	"github.com/spillway/spillway/internal/iceberg"
	"github.com/spillway/spillway/internal/naming/tablepath"
)

// OpenCatalog opens iceberg.catalog: package iceberg's Catalog, over the
// warehouse config gives (storage.url + storage.prefix by default).
func OpenCatalog(ctx context.Context, cfg *config.Config) (Catalog, error) {
	c, err := iceberg.Open(ctx, cfg.Iceberg, cfg.IcebergWarehouse())
	if err != nil {
		return nil, err
	}
	return icebergCatalog{c: c, writer: cfg.Kafka.ClientID}, nil
}

// icebergCatalog is package iceberg's Catalog as a Catalog.
type icebergCatalog struct {
	c      *iceberg.Catalog
	writer string // recorded in each snapshot's summary
}

func (a icebergCatalog) Location(name string) string { return a.c.Location(name) }
func (a icebergCatalog) Close() error                { return a.c.Close() }

func (a icebergCatalog) Table(ctx context.Context, name string) (Table, error) {
	t, err := a.c.Table(ctx, name)
	if err != nil {
		return nil, err
	}
	t.SetWriter(a.writer)
	return icebergTable{t}, nil
}

// icebergTable is package iceberg's Table as a Table.
type icebergTable struct{ t *iceberg.Table }

func (a icebergTable) Held(ctx context.Context, topic, topicID string) (map[int32]int64, error) {
	return a.t.HeldOf(ctx, topic, topicID)
}

func (a icebergTable) Commit(ctx context.Context, files []File) error {
	fs := make([]iceberg.File, len(files))
	for i, f := range files {
		fs[i] = iceberg.File{Location: f.Location, Topic: f.Topic, TopicID: f.TopicID, Partition: f.Partition, First: f.First, End: f.End, Seq: f.Seq, Records: f.Records, Bytes: f.Bytes}
	}
	err := a.t.Commit(ctx, fs)
	if errors.Is(err, iceberg.ErrRefused) {
		return fmt.Errorf("%w (%w)", err, ErrPermanent)
	}
	return err
}

func (a icebergTable) Expire(ctx context.Context) (int, error) { return a.t.Expire(ctx) }

// OptionsFor is the Committer's Options from cfg.
func OptionsFor(cfg *config.Config) Options {
	// Where a key is, as the table names it (an azblob:// key is an
	// abfs:// location); config check has refused a storage.url it
	// can't say.
	base, _ := iceberg.TableBase(cfg.Storage.URL)
	base += "/"
	warehouse := cfg.Warehouse()
	return Options{
		Table: cfg.Iceberg.Table,
		Base:  base,
		Location: func(name string) string {
			ns, table, _ := config.SplitTable(name)
			return tablepath.Location(warehouse, ns, table)
		},
		Interval:        cfg.Iceberg.CommitInterval,
		MaxPendingBytes: VolumeFactor * int64(cfg.File.MaxBytes),
	}
}
