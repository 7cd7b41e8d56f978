package formats

import (
	"fmt"
	"testing"

	"github.com/spillway/spillway/internal/testkit/outside"
)

// TestTypedPartition: with the registry typing values, the envelope's
// partition field is written by the typed Avro and Parquet writers (the
// Parquet one is what an Iceberg table's files with registry values go
// through), and python3-avro and DuckDB read each record's partition.
func TestTypedPartition(t *testing.T) {
	db := outside.NewDuckDB(t)
	reg := typedRegistry(t, "value")
	dir := t.TempDir()
	recs := orders(t)
	for i, r := range recs {
		r.Partition = int32(5 + i)
	}
	fields := []string{"key", "value", "offset", "timestamp", "headers", "partition"}
	avroPath := writeTemp(t, dir, "env.avro", encodeTyped(t, NewTyped(typedFormat("avro", true, fields...), reg), recs))
	pqPath := writeTemp(t, dir, "env.parquet", encodeTyped(t, NewTyped(typedFormat("parquet", true, fields...), reg), recs))

	files := outside.ReadAvroPython(t, avroPath)
	if len(files[0].Records) != len(recs) {
		t.Fatalf("python3-avro read %d records, want %d", len(files[0].Records), len(recs))
	}
	for i, r := range files[0].Records {
		if fmt.Sprint(r["partition"], r["offset"]) != fmt.Sprint(recs[i].Partition, recs[i].Offset) {
			t.Errorf("avro record %d: partition %v at offset %v, want %d at %d", i, r["partition"], r["offset"], recs[i].Partition, recs[i].Offset)
		}
	}

	res := db.Query(t, `SELECT "partition", "offset"::DOUBLE AS "offset", value.id AS id FROM read_parquet(`+outside.SQLString(pqPath)+`) ORDER BY "offset"`)[0]
	checkTypedRows(t, "parquet", res, []string{
		`{"partition":5,"offset":10,"id":"1"}`,
		`{"partition":6,"offset":11,"id":"2"}`,
		`{"partition":7,"offset":12,"id":"3"}`,
	})
}
