package avro

import "github.com/spillway/spillway/internal/format"

// Kind is the avro format: Avro Object Container Files, blocks cut by
// bytes and compressed inside the file by format.compression.
func Kind() format.Kind {
	return format.Kind{
		Name:             "avro",
		Ext:              "avro",
		CompressesInside: true,
		Envelope:         true,
		New:              newAvroFile,
		NewTyped:         newTypedAvroFile,
		Buffering: format.Buffering{
			DefaultFlush:      avroBlockBytes,
			MinFlush:          avroMinFlush,
			MaxFlush:          avroMaxFlush,
			Fixed:             avroFixed,
			MaxBuffered:       avroMaxBuffered,
			LargeRecordCopies: largeRecordCopies,
		},
	}
}

// Thresholds of a block: it is cut at half of an open file's share of the
// budget (format.Kind.FlushBytes), within these bounds. Avro blocks
// compress no better past 1 MiB (each is compressed on its own) and need
// not be larger.
const (
	avroMinFlush = 64 << 10
	avroMaxFlush = 1 << 20
)

// avroFixed is what an open avro file holds besides its block buffers
// (counted by Memory.Grow): the codec's state, and the schema and record
// state (some 25 KiB). Measured by TestWriterMemory (100 writers, each
// filled to just below its flush threshold, heap retained after GC, less
// what Grow reported; linux/amd64, Go 1.26, twmb/avro v1.9.1,
// klauspost/compress v1.20.4; go test -run TestWriterMemory -v
// ./internal/format/avro/), rounded up:
//
//	          retained    less Grow
//	none       350,568       22,888
//	gzip     1,506,288    1,113,072  (flate's tables and window)
//	zstd     2,735,360    2,358,528  (default level, 512 KiB window, low-memory mode)
//	snappy     620,905       30,674
func avroFixed(compression string) int64 {
	const state = 64 << 10
	switch compression {
	case "gzip":
		return state + 9<<17 // 1.125 MiB
	case "zstd":
		return state + 5<<19 // 2.5 MiB
	}
	return state
}

// largeRecordCopies (see format.Kind.LargeRecordCopies): the encoded
// block, and with a codec the compressed block too.
func largeRecordCopies(compression string) int64 {
	if compression == "" || compression == "none" {
		return 1
	}
	return 2
}
