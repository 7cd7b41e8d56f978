package sink

// SizeWaits is how many times the poll side waited for an exact file size
// near max_bytes.
func (s *Sink) SizeWaits() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sizeWaits
}
