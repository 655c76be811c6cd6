package expr

import (
	"errors"
	"strings"
	"time"
)

// parseDate reads YYYY-MM-DD (year 0001 to 9999) into days since 1970-01-01.
func parseDate(s string) (int64, error) {
	y, m, d, rest, err := scanDate(s)
	if err != nil {
		return 0, err
	}
	if rest != "" {
		return 0, errors.New("want YYYY-MM-DD")
	}
	t := time.Date(y, time.Month(m), d, 0, 0, 0, 0, time.UTC)
	return floorDiv(t.Unix(), 86400), nil
}

func scanDate(s string) (y, m, d int, rest string, err error) {
	if len(s) < 10 || s[4] != '-' || s[7] != '-' {
		return 0, 0, 0, "", errors.New("want YYYY-MM-DD")
	}
	var ok1, ok2, ok3 bool
	y, ok1 = atoiN(s[0:4])
	m, ok2 = atoiN(s[5:7])
	d, ok3 = atoiN(s[8:10])
	if !ok1 || !ok2 || !ok3 {
		return 0, 0, 0, "", errors.New("want YYYY-MM-DD")
	}
	if y < 1 || m < 1 || m > 12 || d < 1 || d > daysIn(y, m) {
		return 0, 0, 0, "", errors.New("no such date")
	}
	return y, m, d, s[10:], nil
}

func daysIn(y, m int) int {
	return time.Date(y, time.Month(m)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// atoiN parses a run of ASCII digits (no sign).
func atoiN(s string) (int, bool) {
	if s == "" {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, true
}

// parseTimestamp reads YYYY-MM-DD[( |T)HH:MM:SS[.f{1,9}]][Z|±HH:MM|±HHMM|±HH]. It also
// returns the number of significant fractional digits, for the precision check.
func parseTimestamp(s string) (tsValue, int, error) {
	y, mo, d, rest, err := scanDate(s)
	if err != nil {
		return tsValue{}, 0, err
	}
	var h, mi, sec, nsec, fracDigits int
	if rest != "" && (rest[0] == ' ' || rest[0] == 'T' || rest[0] == 't') {
		r := rest[1:]
		if len(r) < 8 || r[2] != ':' || r[5] != ':' {
			return tsValue{}, 0, errors.New("want HH:MM:SS after the date")
		}
		var ok1, ok2, ok3 bool
		h, ok1 = atoiN(r[0:2])
		mi, ok2 = atoiN(r[3:5])
		sec, ok3 = atoiN(r[6:8])
		if !ok1 || !ok2 || !ok3 || h > 23 || mi > 59 || sec > 59 {
			return tsValue{}, 0, errors.New("no such time of day")
		}
		r = r[8:]
		if r != "" && r[0] == '.' {
			i := 1
			for i < len(r) && '0' <= r[i] && r[i] <= '9' {
				i++
			}
			digits := r[1:i]
			if digits == "" || len(digits) > 9 {
				return tsValue{}, 0, errors.New("want 1 to 9 fractional digits")
			}
			fracDigits = len(strings.TrimRight(digits, "0"))
			nsec, _ = atoiN(digits + strings.Repeat("0", 9-len(digits)))
			r = r[i:]
		}
		rest = r
	}
	ts := tsValue{
		wall: time.Date(y, time.Month(mo), d, h, mi, sec, 0, time.UTC).Unix(),
		nsec: int32(nsec),
	}
	if rest != "" {
		off, err := parseOffset(rest)
		if err != nil {
			return tsValue{}, 0, err
		}
		ts.hasOffset = true
		ts.offset = off
	}
	return ts, fracDigits, nil
}

// parseOffset reads Z, ±HH, ±HHMM or ±HH:MM into seconds east of UTC.
func parseOffset(s string) (int32, error) {
	if s == "Z" || s == "z" {
		return 0, nil
	}
	bad := errors.New("want a UTC offset like Z or +02:00 at the end")
	if len(s) < 3 || s[0] != '+' && s[0] != '-' {
		return 0, bad
	}
	sign := int32(1)
	if s[0] == '-' {
		sign = -1
	}
	r := s[1:]
	var hh, mm string
	switch {
	case len(r) == 2:
		hh = r
		mm = "00"
	case len(r) == 4:
		hh, mm = r[:2], r[2:]
	case len(r) == 5 && r[2] == ':':
		hh, mm = r[:2], r[3:]
	default:
		return 0, bad
	}
	h, ok1 := atoiN(hh)
	m, ok2 := atoiN(mm)
	if !ok1 || !ok2 || h > 23 || m > 59 {
		return 0, bad
	}
	return sign * int32(h*3600+m*60), nil
}

// instant returns the timestamp as nanoseconds-resolution (seconds, nanos) since the
// epoch, reading a literal without offset as wall-clock time in loc.
func (ts tsValue) instant(loc *time.Location) (sec int64, nsec int32) {
	if ts.hasOffset {
		return ts.wall - int64(ts.offset), ts.nsec
	}
	if loc == nil || loc == time.UTC {
		return ts.wall, ts.nsec
	}
	w := time.Unix(ts.wall, 0).UTC()
	t := time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), 0, loc)
	return t.Unix(), ts.nsec
}

// loadZone resolves an Arrow timestamp time zone: empty (none), an IANA name, or a
// fixed offset such as +07:00.
func loadZone(tz string) (*time.Location, error) {
	switch tz {
	case "", "UTC", "utc", "Z", "Etc/UTC", "+00:00", "-00:00", "+0000", "+00":
		return time.UTC, nil
	}
	if tz[0] == '+' || tz[0] == '-' {
		off, err := parseOffset(tz)
		if err != nil {
			return nil, err
		}
		return time.FixedZone(tz, int(off)), nil
	}
	return time.LoadLocation(tz)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
