package budget

import "fmt"

// How Spillway divides its memory. This is the whole model: the rest of the
// code reads these shares through Plan and Budget, and never restates them.
//
//	memory_limit                  Plan.Process: what the process must stay under
//	├─ GOMEMLIMIT, 85%            Plan.GoLimit: the Go runtime collects harder above it
//	├─ the data budget, 1/2       Plan.Data: everything a Budget counts
//	│  ├─ fetches, 1/4            Plan.Reserved: the Kafka client's buffers and the
//	│  │                          records polled from them: Plan.Fetches fetches of
//	│  │                          Plan.FetchMax bytes, ×4 for decompression; one
//	│  │                          partition takes at most a quarter of a fetch
//	│  ├─ open files, 1/2         Plan.OpenFiles: per open file, its encoder and
//	│  │                          compressor, its storage writer's part buffers and
//	│  │                          the chunk it fills; the number of open files is
//	│  │                          derived from it (MaxOpenFiles). Avro blocks and
//	│  │                          Parquet row groups grow in it, counted as they
//	│  │                          grow, and are cut at half of a file's share
//	│  │                          (FileShare): OpenFiles / 16, or / max_open_files
//	│  └─ the rest, 1/4           encoded chunks waiting for storage, closed files
//	│                             being committed, and records queued for the
//	│                             open files' encoders (QueuedRecords): at most
//	│                             Plan.QueueBatches batches of QueueBatchBytes per
//	│                             file (16 full queues may take half of Data,
//	│                             more than this share: the watermarks, not the
//	│                             shares, bound the sum), less once the
//	│                             watermark stops fetching
//	└─ the other half             garbage from encoding waiting for a collection,
//	                              goroutine stacks, the binary, TLS and connection
//	                              buffers
//
// Records move from PolledRecords to QueuedRecords as the sink hands them to
// a file's encoder; during the Write that hands them over they are counted
// in both, so the reading may pass the limit by one poll. That is not more
// than memory may hold: the Kafka client fetches again as soon as a poll
// takes its buffered fetch, so while the poll is written, a refilled fetch
// share and the poll's records can both be in memory; and once the Write
// returns, the share goes back to FetchBuffers while the queued records
// still wait, which reads the same. Moving the bytes from one holder to the
// other batch by batch would lower the reading during the Write only. A
// record of QueueBatchBytes×4 or more is never queued: it is encoded while
// its Write waits, so a record larger than the room is counted once.
//
// Above 90% of the data budget (Plan.High) Spillway closes its larger files
// and stops fetching; below 70% (Plan.Low) it fetches again. The gap keeps
// pause and resume from flapping on every record.
//
// A record larger than the fetch share (Plan.RecordRoom) can't fit in it:
// the Kafka client returns a record whole, in a fetch of its own when it is
// that large. What the fetch share can't hold is counted apart, as
// PolledUnreserved, over the limit: waiting can't free it, only writing it
// can. Spillway writes such a record in pieces, each handed to storage
// before the next while the budget is over its limit, so that the record
// costs its own size and never a copy of it. The bound is then memory_limit
// plus the records held apart at once: those of the poll being written and
// those the Kafka client fetches meanwhile, one per fetch (Plan.Fetches in
// flight): with one broker, twice the largest record, and once when such
// records don't follow each other.
//
// With a spool (backpressure.spool_dir, package spool), open files stage
// their records on local disk and encode only when they close, so the
// open-files share is divided differently:
//
//	open files, 1/2 of Data        Plan.OpenFiles, as above
//	├─ encode slots, 1/2           EncodeSlots files encode at once, each
//	│                              with its encoder, compressor, storage
//	│                              writer and chunk, as an open file has
//	│                              without a spool; its blocks or row groups
//	│                              are cut at half of its share
//	│                              (EncodeShare: OpenFiles / 2 / slots),
//	│                              larger than FileShare, since only that
//	│                              many files encode at once
//	└─ spooled open files, 1/2     SpoolFileCost each (its struct, goroutine
//	                               and queue): MaxSpooledFiles of them
//
// A spooled file's records are in memory only while queued to its
// goroutine (QueuedRecords, as without a spool) and while one append copies
// them into a write; on disk they are SpooledRecords, against the disk
// limit, which has its own watermarks at the same 90% and 70%. A file's
// storage writer keeps its part buffers after its slot is free, until its
// upload ends (WriterBuffers, in the rest, as for closed files without a
// spool).
// The queue between the poll loop and each open file's encoder.
const (
	QueueBatchBytes = 256 << 10 // a batch is handed over at this size...
	QueueBatchRecs  = 512       // ...or this many records
	// MinQueueBatches is the least depth of a file's queue (Plan.QueueBatches),
	// and the depth where no plan sets it: 4 MiB of batches.
	MinQueueBatches = 16
	maxQueueBatches = 64
)

// QueueBatches is how many batches handed over and not yet encoded a file
// may hold: a share of half the data budget among 16 files, from
// MinQueueBatches to 64 batches (4 to 16 MiB; 16 MiB with the default 1 GiB
// memory_limit, 4 MiB at 256 MiB). When a file's queue is full, the poll
// waits on that file while the others may run dry, so a shallow queue
// leaves cores idle: in an execution trace of 16 files compressed with
// zstd on 2 cores, the poll waited on one full queue for 29% of the run
// with 16 batches, and the run used 1.3 of 2 cores; 64 batches made it
// about 1.2 times faster (docs/bench.md). Queued records are polled
// records, held, not copied, and counted in the budget (QueuedRecords): the
// depth moves them, it adds no memory the watermarks don't see. It is
// bounded by the budget so that a small one is not pushed to its
// watermark, which closes files early, by queues alone.
func (p Plan) QueueBatches() int {
	n := p.Data / 2 / bufferingFiles / QueueBatchBytes
	return int(min(max(n, MinQueueBatches), maxQueueBatches))
}

const (
	goLimitPercent    = 85
	dataShare         = 2 // Data = Process / 2
	fetchShare        = 4 // Reserved = Data / 4
	openFilesShare    = 2 // OpenFiles = Data / 2
	concurrentFetches = 2
	decompression     = 4  // a fetch may decompress to this many times its size
	partitionShare    = 4  // one partition's share of a fetch
	bufferingFiles    = 16 // open files whose blocks or row groups fill at once, by default
	maxFetch          = 64 << 20
	minPartitionFetch = 1 << 20
	highPercent       = 90
	lowPercent        = 70
)

// Plan splits a process memory limit into the parts Spillway sizes from it;
// see the division above.
type Plan struct {
	Process int64 // the limit the process must stay under
	GoLimit int64 // GOMEMLIMIT
	Data    int64 // the byte budget for record data

	FetchMax          int32 // kgo FetchMaxBytes
	FetchPartitionMax int32 // kgo FetchMaxPartitionBytes
	Fetches           int   // kgo MaxConcurrentFetches
	Reserved          int64 // fetch buffers reserved inside Data

	OpenFiles int64 // the share of Data that open files may take
	High, Low int64 // the watermarks, in bytes of Data

	// RecordCopies is how many copies of a record larger than a block or
	// row group the file format holds at once while it writes it, besides
	// the record (format.LargeRecordCopies); 0 for the text formats, which
	// stream it. The caller sets it from the format.
	RecordCopies int64
}

// NewPlan divides a process memory limit.
func NewPlan(process int64) (Plan, error) {
	if process < MinMemoryLimit {
		return Plan{}, fmt.Errorf("memory limit %d bytes is below the minimum of %dMiB", process, MinMemoryLimit>>20)
	}
	p := Plan{Process: process, GoLimit: process * goLimitPercent / 100, Data: process / dataShare, Fetches: concurrentFetches}
	fetch := min(p.Data/fetchShare/concurrentFetches/decompression, maxFetch)
	p.FetchMax = int32(fetch)
	p.FetchPartitionMax = int32(min(max(fetch/partitionShare, minPartitionFetch), fetch))
	p.Reserved = concurrentFetches * fetch * decompression
	p.OpenFiles = openFilesBytes(p.Data)
	p.High, p.Low = watermarks(p.Data)
	return p, nil
}

// RecordRoom is the largest record the data budget holds within its limit:
// the share reserved for fetched records. A larger one is counted apart
// (PolledUnreserved), over the limit.
func (p Plan) RecordRoom() int64 { return p.Reserved }

// MaxOpenFiles is how many open files of fileCost bytes each (see
// Plan.OpenFiles) the plan allows, at least one.
func (p Plan) MaxOpenFiles(fileCost int64) int { return maxOpenFiles(p.OpenFiles, fileCost) }

// FileShare is one open file's share of Plan.OpenFiles, from which a
// format that buffers blocks or row groups sizes them: the share divided
// among maxOpenFiles files when that is set, else among 16, so that 16
// files filling their row groups at once stay within the share. More open
// files than that may fill at once: their buffers are counted as they
// grow, and the watermarks close the largest files, as for any memory.
func (p Plan) FileShare(maxOpenFiles int) int64 {
	n := int64(bufferingFiles)
	if maxOpenFiles > 0 {
		n = int64(maxOpenFiles)
	}
	return p.OpenFiles / n
}

// SpoolFileCost is what an open file staged on the spool holds in memory:
// its bookkeeping, its goroutine's stack and its queue's channel, all but
// the records queued to it, which are counted as they are queued.
const SpoolFileCost = 16 << 10

// encodeSlotsShare: encode slots take this fraction of Plan.OpenFiles with
// a spool, spooled open files the rest.
const encodeSlotsShare = 2

// MaxSpooledFiles is how many open files a spool allows: the half of
// Plan.OpenFiles that encode slots leave, at SpoolFileCost each.
func (p Plan) MaxSpooledFiles() int {
	return maxOpenFiles(p.OpenFiles-p.OpenFiles/encodeSlotsShare, SpoolFileCost)
}

// EncodeShare is one encode slot's share of Plan.OpenFiles with a spool,
// from which a format that buffers blocks or row groups sizes them, as
// from FileShare without a spool.
func (p Plan) EncodeShare(slots int) int64 {
	return p.OpenFiles / encodeSlotsShare / int64(max(slots, 1))
}

// Need is the data budget a storage configuration takes at the least: the
// fetch share, files open files of fileCost bytes each, and uploads parts of
// partSize in flight. Above p.Data, the budget can't hold it: opening a file
// or waiting for uploads takes Spillway over its limit.
func (p Plan) Need(files int, fileCost int64, uploads int, partSize int64) int64 {
	return p.Reserved + int64(files)*fileCost + int64(uploads)*partSize
}

func (p Plan) String() string {
	return fmt.Sprintf("process limit %dMiB, GOMEMLIMIT %dMiB, data budget %dMiB (fetch %dx%dKiB, records up to %dMiB within the limit)",
		p.Process>>20, p.GoLimit>>20, p.Data>>20, p.Fetches, p.FetchMax>>10, p.RecordRoom()>>20)
}

func openFilesBytes(data int64) int64 { return data / openFilesShare }

func watermarks(limit int64) (high, low int64) {
	return limit * highPercent / 100, limit * lowPercent / 100
}

func maxOpenFiles(share, fileCost int64) int {
	if fileCost <= 0 {
		fileCost = 1
	}
	return int(max(share/fileCost, 1))
}

// ProcessFor is the smallest memory limit whose plan has room for a record
// of size bytes (RecordRoom) and for the copies of it the format holds while
// it writes it (copies, see Plan.RecordCopies) in the open files' share,
// where they are counted; ok is false when no limit has: the fetch share
// stops growing once the fetch size reaches its cap.
func ProcessFor(size, copies int64) (limit int64, ok bool) {
	return SmallestLimit(func(p Plan) bool { return p.RecordRoom() >= size && p.OpenFiles >= copies*size })
}

// heldApart is how many records larger than RecordRoom the process may hold
// beyond the budget at once with one broker: the one being written and the
// next, fetched meanwhile (see the division above).
const heldApart = 2

// LargeRecordMultiple is the multiple of the largest record to give the
// process over memory_limit when records larger than RecordRoom follow each
// other: the two held apart, and the copies of one the format holds while
// it writes it, which the budget counts but can't refuse. Measured in a
// memory cgroup for every format (docs/memory.md).
func (p Plan) LargeRecordMultiple() int64 { return heldApart + p.RecordCopies }

// SmallestLimit is the smallest memory limit, in whole MiB, whose plan
// fits; ok is false when none up to 1TiB does. fits must not turn false as
// the limit grows.
func SmallestLimit(fits func(Plan) bool) (limit int64, ok bool) {
	plan := func(mib int64) Plan {
		p, _ := NewPlan(mib << 20)
		return p
	}
	lo, hi := int64(MinMemoryLimit>>20), int64(MinMemoryLimit>>20)
	for !fits(plan(hi)) {
		if hi >= 1<<20 {
			return 0, false
		}
		lo, hi = hi+1, hi*2
	}
	for lo < hi {
		if mid := (lo + hi) / 2; fits(plan(mid)) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return hi << 20, true
}
