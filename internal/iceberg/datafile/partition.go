package datafile

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
)

// buildDataFile is st (a file's statistics) with f's partition values in spec.
// nested are the bounds of the partition fields' sources nested in a
// struct (nestedBounds), which st lacks.
func buildDataFile(sc *iceberg.Schema, spec iceberg.PartitionSpec, kafkaColumn string, f File, st iceberg.DataFile, nested ...rowGroupBounds) (iceberg.DataFile, error) {
	vals, types, err := partitionValues(sc, spec, kafkaColumn, f, st, nested)
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
// one (a day is a date). kafkaColumn is the Kafka partition's column.
func partitionValues(sc *iceberg.Schema, spec iceberg.PartitionSpec, kafkaColumn string, f File, st iceberg.DataFile, nested []rowGroupBounds) (map[int]any, map[int]string, error) {
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
			if name != kafkaColumn {
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
			if src.Name != kafkaColumn {
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
