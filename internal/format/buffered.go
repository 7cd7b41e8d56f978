package format

// Memory says how an avro or parquet encoder bounds and counts what it
// buffers: the open block or row group (encoded values, compressed pages)
// is the part of an open file's memory that grows with its records, so it
// is counted as it grows, not guessed, and cut at a byte threshold the
// caller derives from the budget. See docs/design.md, "Memory of the typed
// formats".
type Memory struct {
	// FlushBytes is the size at which the open block or row group is
	// written out: encoded bytes for avro, parquet-go's estimate of the row
	// group (compressed pages plus values not yet in a page) for parquet.
	// 0 means Kind.DefaultFlushBytes.
	FlushBytes int64
	// Grow, when set, is told every change in what the encoder buffers
	// beyond FixedMemory: positive as a block or row group grows, negative
	// as it is written out. After Close the changes sum to zero. It is
	// called on the goroutine that calls Encode and Close.
	Grow func(delta int64)
}

// BufferCount is an encoder's side of Memory: its threshold, and what it
// told Grow so far. The avro and parquet encoders keep one.
type BufferCount struct {
	Flush int64 // the threshold
	grow  func(int64)
	// step: changes smaller than this are told with a later one, so that
	// an encoder that sees its size after every record does not take the
	// budget's lock for each (the budget counts the step in FixedMemory).
	step     int64
	reported int64
}

// NewBufferCount counts for an encoder given m, whose format's default
// threshold is defaultFlush, telling Grow of changes of step or more.
func NewBufferCount(m Memory, defaultFlush, step int64) BufferCount {
	flush := m.FlushBytes
	if flush <= 0 {
		flush = defaultFlush
	}
	return BufferCount{Flush: flush, grow: m.Grow, step: step}
}

// Set tells Grow that the encoder now buffers held bytes: at once when it
// is nothing (a block or row group went out), else once it moved by step.
func (c *BufferCount) Set(held int64) {
	d := held - c.reported
	if d == 0 || (held != 0 && d < c.step && -d < c.step) {
		return
	}
	c.reported = held
	if c.grow != nil {
		c.grow(d)
	}
}
