package config

import (
	"fmt"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// convert turns a raw value from any layer into kind's Go type. Files give
// native values (TOML integers, JSON numbers, YAML lists); the environment
// and flags may give text, which is read the same way everywhere:
//
//   - duration: a time.Duration, or text time.ParseDuration accepts ("5s",
//     "1m30s"); a number is refused (it has no unit) unless it is 0.
//   - integer: any Go integer, an integral float (JSON numbers), or decimal
//     text.
//   - boolean: true or false, or that text.
//   - string: text. A date (TOML 2026-07-28, YAML's unquoted
//     2026-07-28) reads as its text, so unquoted versions work.
//   - list: a list whose entries convert, or text: comma-separated entries
//     with surrounding spaces trimmed; empty text is the empty list.
//
// ok is false when the value cannot be read as kind.
func convert(k kind, raw any) (v any, ok bool) {
	switch k {
	case kindDuration:
		return toDuration(raw)
	case kindInt:
		return toInt(raw)
	case kindString:
		return toString(raw)
	case kindStrings:
		items, ok := toList(raw)
		if !ok {
			return nil, false
		}
		out := make([]string, 0, len(items))
		for _, it := range items {
			s, ok := toString(it)
			if !ok {
				return nil, false
			}
			out = append(out, s)
		}
		return out, true
	case kindBool:
		return toBool(raw)
	case kindInts:
		items, ok := toList(raw)
		if !ok {
			return nil, false
		}
		out := make([]int, 0, len(items))
		for _, it := range items {
			n, ok := toInt(it)
			if !ok {
				return nil, false
			}
			out = append(out, n)
		}
		return out, true
	}
	return nil, false
}

func toDuration(raw any) (time.Duration, bool) {
	switch v := raw.(type) {
	case time.Duration:
		return v, true
	case string:
		d, err := time.ParseDuration(v)
		return d, err == nil
	}
	if n, ok := toInt(raw); ok && n == 0 {
		return 0, true
	}
	return 0, false
}

// unitless reports whether raw is a number or a number's text other than
// 0, which a duration key refuses with a hint about units.
func unitless(raw any) bool {
	switch v := raw.(type) {
	case string:
		f, err := strconv.ParseFloat(v, 64)
		return err == nil && f != 0
	case float32, float64, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64:
		return true
	}
	return false
}

func toInt(raw any) (int, bool) {
	switch v := raw.(type) {
	case int:
		return v, true
	case int8:
		return int(v), true
	case int16:
		return int(v), true
	case int32:
		return int(v), true
	case int64:
		return int(v), strconv.IntSize == 64 || (v >= math.MinInt && v <= math.MaxInt)
	case uint:
		return int(v), v <= math.MaxInt
	case uint8:
		return int(v), true
	case uint16:
		return int(v), true
	case uint32:
		return int(v), uint64(v) <= math.MaxInt
	case uint64:
		return int(v), v <= math.MaxInt
	case float32:
		return toInt(float64(v))
	case float64:
		if v != math.Trunc(v) || v < math.MinInt || v >= math.MaxInt {
			return 0, false
		}
		return int(v), true
	case string:
		n, err := strconv.ParseInt(v, 10, strconv.IntSize)
		return int(n), err == nil
	}
	return 0, false
}

// dateRE matches the text of a date, which TOML and YAML parse as a date
// when it is not quoted.
var dateRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}$`)

// toBool reads a boolean, or the text true or false.
func toBool(raw any) (bool, bool) {
	switch v := raw.(type) {
	case bool:
		return v, true
	case string:
		switch strings.TrimSpace(v) {
		case "true":
			return true, true
		case "false":
			return false, true
		}
	}
	return false, false
}

func toString(raw any) (string, bool) {
	switch v := raw.(type) {
	case string:
		return v, true
	case time.Time: // YAML's unquoted 2026-07-28
		if v.Location() == time.UTC && v.Truncate(24*time.Hour).Equal(v) {
			return v.Format(time.DateOnly), true
		}
	case fmt.Stringer: // TOML's LocalDate
		if s := v.String(); dateRE.MatchString(s) {
			return s, true
		}
	}
	return "", false
}

func toList(raw any) ([]any, bool) {
	switch v := raw.(type) {
	case []any:
		return v, true
	case []string:
		out := make([]any, len(v))
		for i, s := range v {
			out[i] = s
		}
		return out, true
	case []int:
		out := make([]any, len(v))
		for i, n := range v {
			out[i] = n
		}
		return out, true
	case string:
		if strings.TrimSpace(v) == "" {
			return []any{}, true
		}
		parts := strings.Split(v, ",")
		out := make([]any, len(parts))
		for i, p := range parts {
			out[i] = strings.TrimSpace(p)
		}
		return out, true
	}
	return nil, false
}

// literal renders a value as TOML: strings quoted, durations as quoted
// compact text ("30m"), numbers bare, lists in brackets, tables inline.
// `snodod config print`, Keys and the "got" of every message use it, so a
// value reads the same everywhere and can be pasted into a file.
func literal(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case string:
		return quote(v)
	case time.Duration:
		return quote(formatDuration(v))
	case time.Time:
		return v.Format(time.RFC3339Nano)
	case float64:
		if math.Abs(v) < 1e21 {
			return strconv.FormatFloat(v, 'f', -1, 64)
		}
		return strconv.FormatFloat(v, 'g', -1, 64)
	case []string:
		return listLiteral(v)
	case []int:
		return listLiteral(v)
	case []any:
		return listLiteral(v)
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + " = " + literal(v[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	}
	return fmt.Sprint(v)
}

func listLiteral[T any](items []T) string {
	parts := make([]string, len(items))
	for i, it := range items {
		parts[i] = literal(it)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// quote returns s as a TOML basic string (also valid JSON for the text
// configuration holds): control characters escaped, invalid UTF-8 replaced.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range strings.ToValidUTF8(s, string(utf8.RuneError)) {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// formatDuration is time.Duration.String without zero trailing units:
// 30m rather than 30m0s, 1h rather than 1h0m0s. time.ParseDuration reads it
// back to the same value.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
