package datafile

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
)

// TestTimeValue: a time folder, as naming renders it, parses to the value
// iceberg-go's transform gives a timestamp inside it.
func TestTimeValue(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 3, 1, 13, 4, 0, 0, time.UTC)
	lit := iceberg.Optional[iceberg.Literal]{Valid: true, Val: iceberg.TimestampLiteral(at.UnixMicro())}
	for _, tt := range []struct {
		tr   iceberg.Transform
		text string
	}{
		{iceberg.YearTransform{}, "2026"},
		{iceberg.MonthTransform{}, "2026-03"},
		{iceberg.DayTransform{}, "2026-03-01"},
		{iceberg.HourTransform{}, "2026-03-01-13"},
	} {
		pf := iceberg.PartitionField{Name: "timestamp_x", Transform: tt.tr}
		got, err := timeValue(pf, tt.text)
		if err != nil {
			t.Fatal(err)
		}
		if want := tt.tr.Apply(lit).Val.Any(); fmt.Sprint(got) != fmt.Sprint(want) || fmt.Sprintf("%T", got) != fmt.Sprintf("%T", want) {
			t.Errorf("%s of %s = %v (%T), want %v (%T)", tt.tr, tt.text, got, got, want, want)
		}
	}
}
