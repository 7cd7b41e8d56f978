package datafile

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/iceberg-go"
	iceio "github.com/apache/iceberg-go/io"
)

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
			// (package iceberg checks the units), a boolean as one byte.
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
