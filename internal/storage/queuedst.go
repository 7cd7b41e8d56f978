package storage

import "github.com/spillway/spillway/internal/storage/partqueue"

// queueDst is w as the part queue's destination. A backend writer whose
// commit sends no part (commitHoldsNoPart) stays one behind it; a writer
// wrapped in faults is not one, so its commit waits for an upload slot.
func queueDst(w objectWriter) partqueue.Dst {
	if _, ok := w.(interface{ commitHoldsNoPart() }); ok {
		return noPartDst{dst{w}}
	}
	return dst{w}
}

type dst struct{ objectWriter }

func (d dst) Commit() error { return d.commit() }
func (d dst) Abort()        { d.abort() }

type noPartDst struct{ dst }

func (noPartDst) CommitHoldsNoPart() {}
