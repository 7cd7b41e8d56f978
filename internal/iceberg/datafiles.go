package iceberg

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
	"github.com/apache/iceberg-go/table"
	"golang.org/x/sync/errgroup"
)

// Data files are registered with their partition values as Spillway knows
// them, not as iceberg-go's AddFiles would derive them from the files'
// column bounds: a bucket of the key can't be read from bounds (a hash
// keeps no order, and the key column has none), and the Kafka partition
// is no column of the file. Spillway named each file from the values its
// records share (see naming.IcebergPartitionPath): its Kafka partition, its
// day or hour, its key's bucket, one Hive-style "field=value" folder each,
// so the file's path says them. The ledger's partition is checked against
// the path, and a time value against the file's bounds, so a file that
// doesn't hold what its path says is refused, naming the field.

// statsWorkers bounds the footers read at once: each is a ranged read of
// the file's tail, a round trip to object storage.
const statsWorkers = 8

// dataFiles builds the data file entries of files for tbl's current schema
// and spec: record count, size and column statistics from each file's
// Parquet footer (iceberg-go's reading of it, as AddFiles does), partition
// values from what Spillway wrote the file for.
func (t *Table) dataFiles(ctx context.Context, tbl *table.Table, files []File) ([]iceberg.DataFile, error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("iceberg: %s: FileIO: %w", t.name, t.c.scrub(err))
	}
	sc, spec, props := tbl.Schema(), tbl.Spec(), tbl.Properties()
	out := make([]iceberg.DataFile, len(files))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(statsWorkers)
	for i, f := range files {
		g.Go(func() error {
			// Unpartitioned: the statistics only; the partition values
			// are ours.
			st, err := table.FileToDataFile(gctx, literalIO{fs, tbl.Location()}, f.Location, sc, *iceberg.UnpartitionedSpec, 0, props)
			if err != nil {
				return fmt.Errorf("iceberg: %s: read the statistics of %s: %w", t.name, f.Location, t.c.scrub(err))
			}
			nested, err := nestedBounds(literalIO{fs, tbl.Location()}, f.Location, sc, spec)
			if err != nil {
				return fmt.Errorf("iceberg: %s: read the statistics of %s: %w", t.name, f.Location, t.c.scrub(err))
			}
			df, err := buildDataFile(sc, spec, f, st, nested...)
			if err != nil {
				return fmt.Errorf("iceberg: %s: %w (%w)", t.name, err, ErrRefused)
			}
			out[i] = df
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// buildDataFile is st (a file's statistics) with f's partition values in spec.
// nested are the bounds of the partition fields' sources nested in a
// struct (nestedBounds), which st lacks.
func buildDataFile(sc *iceberg.Schema, spec iceberg.PartitionSpec, f File, st iceberg.DataFile, nested ...rowGroupBounds) (iceberg.DataFile, error) {
	vals, types, err := partitionValues(sc, spec, f, st, nested)
	if err != nil {
		return nil, err
	}
	b, err := iceberg.NewDataFileBuilder(spec, iceberg.EntryContentData, f.Location, iceberg.ParquetFile,
		vals, types, nil, st.Count(), st.FileSizeBytes())
	if err != nil {
		return nil, fmt.Errorf("file %s: %w", f.Location, err)
	}
	b.ColumnSizes(st.ColumnSizes()).ValueCounts(st.ValueCounts()).NullValueCounts(st.NullValueCounts()).
		NaNValueCounts(st.NaNValueCounts()).LowerBoundValues(st.LowerBoundValues()).
		UpperBoundValues(st.UpperBoundValues()).SplitOffsets(st.SplitOffsets())
	return b.Build(), nil
}

// partitionValues are f's values of spec's fields, by partition field id
// (nil for a null value), and the Avro logical type of those that have
// one (a day is a date).
func partitionValues(sc *iceberg.Schema, spec iceberg.PartitionSpec, f File, st iceberg.DataFile, nested []rowGroupBounds) (map[int]any, map[int]string, error) {
	vals, types := map[int]any{}, map[int]string{}
	if spec.NumFields() == 0 {
		return vals, types, nil
	}
	folders := pathValues(f.Location)
	for _, pf := range spec.Fields() {
		src, ok := sc.FindFieldByID(pf.SourceID())
		if !ok {
			return nil, nil, fmt.Errorf("partition field %s: the table's schema has no column %d", pf.Name, pf.SourceID())
		}
		text, ok := folders[pf.Name]
		if !ok {
			return nil, nil, fmt.Errorf("file %s is in no %s=<value> folder, so its value of the partition field %s is unknown; its table was created with another iceberg.partition_by, so write to a new table or set partition_by to the table's spec (%s)", f.Location, pf.Name, pf.Name, spec.String())
		}
		var v any
		var err error
		switch tr := pf.Transform.(type) {
		case iceberg.IdentityTransform, iceberg.TruncateTransform:
			name, _ := sc.FindColumnName(src.ID)
			if name != partitionColumn {
				if v, err = valueOf(src, pf, text); err != nil {
					return nil, nil, fmt.Errorf("file %s: %w", f.Location, err)
				}
				if err := checkBounds(pf, src, st, nested, v); err != nil {
					return nil, nil, fmt.Errorf("file %s: %w", f.Location, err)
				}
				if _, ok := src.Type.(iceberg.DateType); ok {
					types[pf.FieldID] = "date"
				}
				break
			}
			if src.Name != partitionColumn {
				return nil, nil, fmt.Errorf("partition field %s: identity of %s is not one Spillway knows a file's value of", pf.Name, src.Name)
			}
			if text != strconv.Itoa(int(f.Partition)) {
				return nil, nil, fmt.Errorf("file %s of Kafka partition %d is in the folder %s=%s", f.Location, f.Partition, pf.Name, text)
			}
			v = f.Partition
			// Files hold the column since it is in the envelope; older
			// ones have no bounds of it, which contradict nothing.
			if err := checkBounds(pf, src, st, nested, v); err != nil {
				return nil, nil, fmt.Errorf("file %s of Kafka partition %d (its ledger entry): %w", f.Location, f.Partition, err)
			}
		case iceberg.BucketTransform:
			if text != "null" {
				n, perr := strconv.ParseInt(text, 10, 32)
				if perr != nil || n < 0 || int(n) >= tr.NumBuckets {
					return nil, nil, fmt.Errorf("file %s: %s=%s is not a bucket of %d", f.Location, pf.Name, text, tr.NumBuckets)
				}
				v = int32(n)
			}
		case iceberg.YearTransform, iceberg.MonthTransform, iceberg.DayTransform, iceberg.HourTransform:
			if v, err = timeValue(pf, text); err != nil {
				return nil, nil, fmt.Errorf("file %s: %w", f.Location, err)
			}
			if err := checkBounds(pf, src, st, nested, v); err != nil {
				return nil, nil, fmt.Errorf("file %s: %w", f.Location, err)
			}
			if _, ok := pf.Transform.(iceberg.DayTransform); ok {
				types[pf.FieldID] = "date"
			}
		default:
			return nil, nil, fmt.Errorf("partition field %s: transform %s is not one Spillway lays files out by", pf.Name, pf.Transform)
		}
		vals[pf.FieldID] = v
	}
	return vals, types, nil
}

// pathValues are the "name=value" folders of location, the last one of a
// name winning (the partition folders come last, after the table's).
func pathValues(location string) map[string]string {
	out := map[string]string{}
	segs := strings.Split(location, "/")
	for _, s := range segs[:len(segs)-1] {
		if k, v, ok := strings.Cut(s, "="); ok {
			out[k] = v
		}
	}
	return out
}

// timeValue parses a time transform's folder value, as naming renders it
// in UTC (year: yyyy, month: yyyy-MM, day: yyyy-MM-dd, hour:
// yyyy-MM-dd-HH), into Iceberg's partition value: years, months, days or
// hours since 1970-01-01 UTC (a day as an iceberg.Date).
func timeValue(pf iceberg.PartitionField, text string) (any, error) {
	layouts := map[string]string{"year": "2006", "month": "2006-01", "day": "2006-01-02", "hour": "2006-01-02-15"}
	kind := pf.Transform.String()
	layout, ok := layouts[kind]
	if !ok {
		return nil, fmt.Errorf("partition field %s: transform %s has no folder layout", pf.Name, kind)
	}
	ts, err := time.ParseInLocation(layout, text, time.UTC)
	if err != nil {
		return nil, fmt.Errorf("%s=%s is not a %s (%s)", pf.Name, text, kind, layout)
	}
	switch kind {
	case "year":
		return int32(ts.Year() - 1970), nil
	case "month":
		return int32((ts.Year()-1970)*12 + int(ts.Month()) - 1), nil
	case "day":
		return iceberg.Date(ts.Unix() / 86400), nil
	}
	return int32(ts.Unix() / 3600), nil
}

// checkBounds refuses a file whose source column bounds transform to
// another value than want: a file that holds records of another day or
// hour than its folder says would be skipped by a reader filtering on it.
// A top-level column's bounds are st's; a nested one's (a field of the
// value) are each row group's from nested, as st has none for it.
func checkBounds(pf iceberg.PartitionField, src iceberg.NestedField, st iceberg.DataFile, nested []rowGroupBounds, want any) error {
	sides := []boundSide{{"lowest", st.LowerBoundValues()}, {"highest", st.UpperBoundValues()}}
	for _, rg := range nested {
		sides = append(sides, boundSide{"lowest", rg.lower}, boundSide{"highest", rg.upper})
	}
	for _, side := range sides {
		raw, ok := side.bounds[src.ID]
		if !ok {
			continue // no bounds (an all-null column): nothing to contradict
		}
		if truncatedBound(src, raw) {
			continue // a cut bound says less than the value
		}
		lit, err := iceberg.LiteralFromBytes(src.Type, raw)
		if err != nil {
			return fmt.Errorf("the %s %s does not decode: %w", side.name, src.Name, err)
		}
		got := pf.Transform.Apply(iceberg.Optional[iceberg.Literal]{Valid: true, Val: lit})
		if !got.Valid || fmt.Sprint(got.Val.Any()) != fmt.Sprint(want) {
			return fmt.Errorf("the partition field %s is %v by the file's folder, but its %s %s (%s) is in %v: a file must hold one value of each partition field", pf.Name, want, side.name, src.Name, lit, got.Val)
		}
	}
	return nil
}

type boundSide struct {
	name   string
	bounds map[int][]byte
}

// rowGroupBounds are one row group's lowest and highest values of columns,
// by field id, in Iceberg's single-value serialization.
type rowGroupBounds struct{ lower, upper map[int][]byte }

// nestedBounds reads, from loc's Parquet footer, each row group's bounds of
// the partition sources of spec that are nested in a struct (the fields
// of a registry-typed value, value.country). iceberg-go's statistics
// (FileToDataFile) keep only counts for a nested column, never bounds
// (its metrics plan turns a nested field's truncate or full mode into
// counts), so without these the folder of a value field would go
// unchecked. Only their check uses them: the manifest keeps iceberg-go's
// statistics. Nil when spec has no nested source.
func nestedBounds(fs iceio.IO, loc string, sc *iceberg.Schema, spec iceberg.PartitionSpec) ([]rowGroupBounds, error) {
	want := map[int]bool{}
	for _, pf := range spec.Fields() {
		if name, ok := sc.FindColumnName(pf.SourceID()); ok && strings.Contains(name, ".") {
			want[pf.SourceID()] = true
		}
	}
	if len(want) == 0 {
		return nil, nil
	}
	f, err := fs.Open(loc)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", loc, err)
	}
	defer f.Close()
	rdr, err := file.NewParquetReader(f)
	if err != nil {
		return nil, fmt.Errorf("read the Parquet footer of %s: %w", loc, err)
	}
	defer rdr.Close()
	md := rdr.MetaData()
	cols := map[int]int{} // column index → field id
	for i := range md.Schema.NumColumns() {
		if id := int(md.Schema.Column(i).SchemaNode().FieldID()); want[id] {
			cols[i] = id
		}
	}
	var out []rowGroupBounds
	for g := range md.NumRowGroups() {
		rg := md.RowGroup(g)
		b := rowGroupBounds{lower: map[int][]byte{}, upper: map[int][]byte{}}
		for i, id := range cols {
			cc, err := rg.ColumnChunk(i)
			if err != nil {
				return nil, fmt.Errorf("%s: row group %d: %w", loc, g, err)
			}
			if ok, err := cc.StatsSet(); err != nil || !ok {
				continue // no statistics: nothing to contradict
			}
			stats, err := cc.Statistics()
			if err != nil || stats == nil || !stats.HasMinMax() {
				continue
			}
			// Plain-encoded min and max (a byte array without its
			// length) are Iceberg's single-value serialization of the
			// types a folder holds: string and binary bytes, int, date
			// and long little-endian, a timestamp in microseconds
			// (checkUnits), a boolean as one byte.
			b.lower[id], b.upper[id] = stats.EncodeMin(), stats.EncodeMax()
		}
		out = append(out, b)
	}
	return out, nil
}

// truncatedBound: a string or binary bound that may have been cut (Iceberg
// keeps the first 16 characters of a string bound by default, and
// increments the upper's last), so a transform of it need not be the
// file's value.
func truncatedBound(src iceberg.NestedField, raw []byte) bool {
	switch src.Type.(type) {
	case iceberg.BinaryType, iceberg.FixedType:
		return true
	case iceberg.StringType:
		return utf8.RuneCount(raw) >= 16
	}
	return false
}

// valueOf parses an identity or truncate partition value of a value field
// from its folder text, as naming renders it (Iceberg's human string,
// URL-encoded; "null" is the null value, the string "null" is written
// %6Eull), into the partition value of src's type.
func valueOf(src iceberg.NestedField, pf iceberg.PartitionField, text string) (any, error) {
	if text == "null" {
		return nil, nil
	}
	s, err := url.QueryUnescape(text)
	if err != nil {
		return nil, fmt.Errorf("%s=%s does not URL-decode: %w", pf.Name, text, err)
	}
	bad := func(err error) (any, error) {
		return nil, fmt.Errorf("%s=%s is not a %s: %w", pf.Name, text, src.Type, err)
	}
	switch src.Type.(type) {
	case iceberg.StringType:
		return s, nil
	case iceberg.Int32Type:
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil {
			return bad(err)
		}
		return int32(n), nil
	case iceberg.Int64Type:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return bad(err)
		}
		return n, nil
	case iceberg.BooleanType:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return bad(err)
		}
		return b, nil
	case iceberg.DateType:
		ts, err := time.ParseInLocation("2006-01-02", s, time.UTC)
		if err != nil {
			return bad(err)
		}
		return iceberg.Date(ts.Unix() / 86400), nil
	case iceberg.BinaryType, iceberg.FixedType:
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return bad(err)
		}
		return b, nil
	}
	return nil, fmt.Errorf("partition field %s: %s of a %s column is not one Spillway lays files out by", pf.Name, pf.Transform, src.Type)
}
