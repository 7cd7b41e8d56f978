package budget

// Sizing is what a configuration's files cost in a Plan: the format's
// memory figures (format.Kind) and the store's (storage.FootprintOf),
// worked out once, so that a run and `config check` read the same
// numbers. The runner fills it in; budget only holds it, knowing neither
// formats nor stores.
type Sizing struct {
	// FlushBytes is where a buffering format (Avro blocks, Parquet row
	// groups) cuts in an open file: half of its share (Plan.FileShare).
	// SlotFlushBytes is the same in an encode slot, for a spooled file
	// encoded once closed (Plan.EncodeShare).
	FlushBytes, SlotFlushBytes int64
	// Files is how many hold an encoder at once at the most: the open
	// files (one when their number is derived), or with a spool the
	// encode slots. Spooled reports which.
	Files   int
	Spooled bool
	// FileCost is what each of them holds: Encoder (the format's fixed
	// memory and what it buffers up to its flush), plus the store's
	// Writer buffers and the Chunk it fills.
	FileCost, Encoder, Writer, Chunk int64
	// Uploads parts of UploadBytes each are in flight at the most.
	Uploads     int
	UploadBytes int64
}

// Need is the data budget the sizing takes at the least in p (Plan.Need).
func (s Sizing) Need(p Plan) int64 {
	return p.Need(s.Files, s.FileCost, s.Uploads, s.UploadBytes)
}
