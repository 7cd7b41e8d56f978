package naming

// AppendGroup appends the name of the group a record belongs to: the
// template rendered without {{start_offset}}. Records of one partition
// with the same group go to the same open file.
func (t *Template) AppendGroup(b []byte, v Vars) []byte {
	utc := v.Time.UTC()
	for _, p := range t.pieces {
		switch p.kind {
		case literal, offsetVar:
		case topicVar:
		case partitionVar:
		case yearVar:
			b = appendNum(b, int64(utc.Year()), true, 4)
		case monthVar:
			b = appendNum(b, int64(utc.Month()), true, 2)
		case dayVar:
			b = appendNum(b, int64(utc.Day()), true, 2)
		case hourVar:
			b = appendNum(b, int64(utc.Hour()), true, 2)
		}
	}
	return b
}
