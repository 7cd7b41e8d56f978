package partvalue

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	// The zone database built in, so that a configured time zone works in
	// images without /usr/share/zoneinfo (distroless, scratch). The
	// system's database is still preferred when there is one.
	_ "time/tzdata"
)

// LoadLocation returns the time zone named by a configuration value, in
// which a record's time is partitioned (see Civil). It takes an IANA name such as "UTC" or
// "Europe/Berlin" (with its daylight saving rules), and, as Aiven's
// file.name.timestamp.timezone does (Java's ZoneId), "Z" and fixed UTC
// offsets: "+05:30", "-0800", "+02", "UTC+01:00", "GMT-3". Java's
// three-letter ids such as "PST" are not taken, nor are offsets past ±18:00.
//
// "" and "Local" are refused: Local is the zone of the machine, so
// instances on differently configured hosts would file the same records
// under different names.
func LoadLocation(name string) (*time.Location, error) {
	switch name {
	case "":
		return nil, errors.New("time zone is empty")
	case "Local":
		return nil, errors.New(`time zone "Local" is the machine's own, which can differ between instances`)
	case "Z":
		return time.UTC, nil
	}
	if loc, ok := fixedZone(name); ok {
		return loc, nil
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		// time's message names no zone database, and ours is built in: the
		// name is unknown.
		return nil, fmt.Errorf("unknown time zone %q", name)
	}
	return loc, nil
}

// fixedZone parses "±hh", "±hhmm" or "±hh:mm", after an optional "UTC",
// "GMT" or "UT".
func fixedZone(name string) (*time.Location, bool) {
	s := name
	for _, p := range []string{"UTC", "GMT", "UT"} {
		if rest, ok := strings.CutPrefix(s, p); ok && rest != "" && (rest[0] == '+' || rest[0] == '-') {
			s = rest
			break
		}
	}
	if len(s) < 2 || (s[0] != '+' && s[0] != '-') {
		return nil, false
	}
	sign, s := s[0], s[1:]
	var hh, mm string
	switch {
	case len(s) == 1 || len(s) == 2:
		hh = s
	case len(s) == 4:
		hh, mm = s[:2], s[2:]
	case len(s) == 5 && s[2] == ':':
		hh, mm = s[:2], s[3:]
	default:
		return nil, false
	}
	h, ok := smallNum(hh)
	if !ok {
		return nil, false
	}
	m := 0
	if mm != "" {
		if m, ok = smallNum(mm); !ok || m > 59 {
			return nil, false
		}
	}
	secs := (h*60 + m) * 60
	if secs > 18*3600 {
		return nil, false
	}
	if sign == '-' {
		secs = -secs
	}
	if secs == 0 {
		return time.UTC, true
	}
	return time.FixedZone(fmt.Sprintf("%c%02d:%02d", sign, h, m), secs), true
}

func smallNum(s string) (int, bool) {
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, s != ""
}

// Civil returns the local date and hour of ts in loc: a record's time
// partition. It looks the zone up once and does the calendar arithmetic
// itself (Hinnant's civil_from_days), where ts.In(loc).Date() and .Hour()
// would look the zone up and split the time twice; a template's Group runs
// it once per record.
func Civil(ts time.Time, loc *time.Location) (year, month, day, hour int64) {
	_, off := ts.In(loc).Zone()
	sec := ts.Unix() + int64(off)
	days := floorDiv(sec, 86400)
	hour = (sec - days*86400) / 3600
	z := days + 719468 // days since 0000-03-01
	era := floorDiv(z, 146097)
	doe := z - era*146097                                  // day of the 400-year era, [0, 146096]
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365 // year of the era, [0, 399]
	doy := doe - (365*yoe + yoe/4 - yoe/100)               // day of the year from 1 March, [0, 365]
	mp := (5*doy + 2) / 153                                // month from March, [0, 11]
	day = doy - (153*mp+2)/5 + 1
	month = mp + 3
	if month > 12 {
		month -= 12
	}
	year = yoe + era*400
	if month <= 2 {
		year++
	}
	return year, month, day, hour
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}

// AppendPadded appends n in decimal, zero-padded to width; a negative n
// unpadded. A time unit's text (a year of 4 digits, a month of 2) is
// written so, and a name's padded numbers too.
func AppendPadded(b []byte, n int64, width int) []byte {
	if n < 0 {
		return strconv.AppendInt(b, n, 10)
	}
	var tmp [20]byte
	d := strconv.AppendInt(tmp[:0], n, 10)
	for i := len(d); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, d...)
}
