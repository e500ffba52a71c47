package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/snodod/snodod/protocol"
)

// encoder writes records by hand: encoding/json's reflection costs more
// than the rest of a record together. It is the writer goroutine's.
type encoder struct {
	secrets   []string
	arguments bool
	// The last clientInfo seen and its parse: a session sends the same
	// one each time.
	lastInfo []byte
	client   Client
	hasInfo  bool
	// The time to the second of the last record, and its text.
	second     int64
	secondText []byte
}

// appendRecord appends r's record and a newline to dst: the fields in
// Record's order, as Record's JSON encoding has them. r's bytes are in
// arena.
func (x *encoder) appendRecord(dst []byte, r *record, arena []byte) []byte {
	dst = append(dst, `{"time":"`...)
	dst = x.appendTime(dst, time.Unix(0, r.at))
	dst = append(dst, `","session":`...)
	var session uint64
	view := ""
	if c := r.caller; c != nil {
		session, view = c.Session, c.View
	}
	dst = strconv.AppendUint(dst, session, 10)
	if p := &r.peer; p.Known {
		dst = append(dst, `,"peer":{"uid":`...)
		dst = strconv.AppendInt(dst, int64(p.UID), 10)
		if p.PID != 0 {
			dst = append(dst, `,"pid":`...)
			dst = strconv.AppendInt(dst, int64(p.PID), 10)
		}
		if p.Exe != "" {
			dst = append(dst, `,"exe":`...)
			dst = appendString(dst, p.Exe)
		}
		dst = append(dst, '}')
	}
	var info []byte
	if r.hasInfo {
		info = r.info.of(arena)
	} else if r.state != nil {
		info = r.state.ClientInfo() // a legacy one is never changed in place
	}
	if ci, ok := x.clientInfo(info); ok {
		dst = append(dst, `,"client":{"name":`...)
		dst = appendString(dst, ci.Name)
		if ci.Version != "" {
			dst = append(dst, `,"version":`...)
			dst = appendString(dst, ci.Version)
		}
		dst = append(dst, '}')
	}
	dst = append(dst, `,"view":`...)
	dst = appendString(dst, view)
	dst = append(dst, `,"server":`...)
	dst = appendString(dst, r.owner)
	dst = append(dst, `,"method":"`...)
	dst = append(dst, methodNames[r.method]...)
	dst = append(dst, '"')
	p := splitParams(r.params.of(arena))
	switch r.method {
	case toolsCall:
		if len(p.name) > 0 {
			dst = append(dst, `,"tool":`...)
			dst = appendString(dst, p.name)
		}
	case promptsGet:
		if len(p.name) > 0 {
			dst = append(dst, `,"prompt":`...)
			dst = appendString(dst, p.name)
		}
	case resourcesRead:
		if len(p.uri) > 0 {
			dst = append(dst, `,"uri":`...)
			dst = appendString(dst, redactString(string(p.uri), x.secrets))
		}
	}
	if r.method != resourcesRead {
		mark := len(dst)
		dst = append(dst, `,"args_digest":"`...)
		if d, ok := appendDigest(dst, p.arguments); ok {
			dst = append(d, '"')
		} else {
			dst = dst[:mark]
		}
		if x.arguments && len(p.arguments) > 0 {
			if v, err := decode(p.arguments); err == nil {
				if b, err := canonical(redact(v, x.secrets)); err == nil {
					dst = append(dst, `,"arguments":`...)
					dst = append(dst, b...)
				}
			}
		}
	}
	dst = append(dst, `,"outcome":"`...)
	switch r.outcome {
	case outcomeTimedOut:
		dst = append(dst, `timed_out"`...)
	case outcomeCancelled:
		dst = append(dst, `cancelled"`...)
	case outcomeError:
		dst = append(dst, `error","code":`...)
		dst = strconv.AppendInt(dst, r.code, 10)
	default:
		dst = append(dst, `ok"`...)
	}
	dst = append(dst, `,"duration_ms":`...)
	dst = appendMillis(dst, time.Duration(r.dur).Microseconds())
	return append(dst, "}\n"...)
}

// appendTime appends t in TimeFormat, the part to the second made once
// a second.
func (x *encoder) appendTime(dst []byte, t time.Time) []byte {
	t = t.UTC()
	if sec := t.Unix(); sec != x.second || x.secondText == nil {
		x.second = sec
		x.secondText = t.Truncate(time.Second).AppendFormat(x.secondText[:0], "2006-01-02T15:04:05")
	}
	dst = append(dst, x.secondText...)
	ms := t.Nanosecond() / 1e6
	return append(dst, '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), 'Z')
}

// appendMillis appends us microseconds as milliseconds, a decimal
// number with at most three decimals and no trailing zeros (as
// strconv's shortest float for the same value).
func appendMillis(dst []byte, us int64) []byte {
	if us < 0 {
		dst = append(dst, '-')
		us = -us
	}
	dst = strconv.AppendInt(dst, us/1000, 10)
	frac := us % 1000
	if frac == 0 {
		return dst
	}
	digits := [3]byte{byte('0' + frac/100), byte('0' + frac/10%10), byte('0' + frac%10)}
	n := 3
	for digits[n-1] == '0' {
		n--
	}
	dst = append(dst, '.')
	return append(dst, digits[:n]...)
}

// clientInfo parses raw, remembering the last one.
func (x *encoder) clientInfo(raw []byte) (Client, bool) {
	if len(raw) == 0 {
		return Client{}, false
	}
	if !bytes.Equal(raw, x.lastInfo) {
		x.lastInfo = append(x.lastInfo[:0], raw...)
		x.client = Client{}
		x.hasInfo = json.Unmarshal(raw, &x.client) == nil && x.client.Name != ""
	}
	return x.client, x.hasInfo
}

// params are what a record takes of a request's params.
type params struct {
	name, uri []byte // unescaped
	arguments []byte
}

// splitParams finds name, uri and arguments at the top of raw, an
// object; a malformed one yields what was found before the fault.
func splitParams(raw []byte) params {
	var p params
	protocol.EachMember(raw, func(key, v json.RawMessage) bool {
		switch string(key) {
		case `"name"`:
			p.name = jsonString(v)
		case `"uri"`:
			p.uri = jsonString(v)
		case `"arguments"`:
			p.arguments = v
		}
		return true
	})
	return p
}

// jsonString is the string a JSON string literal holds (v's own bytes
// when it has no escape), nil for another value.
func jsonString(v []byte) []byte {
	if len(v) < 2 || v[0] != '"' {
		return nil
	}
	if bytes.IndexByte(v, '\\') < 0 {
		return v[1 : len(v)-1]
	}
	var s string
	_ = json.Unmarshal(v, &s)
	return []byte(s)
}

// digest is Digest without the error: raw as it is when it is canonical
// already (most clients' encoders make it so), else through canonical.
func digest(raw []byte) (string, bool) {
	b, ok := appendDigest(nil, raw)
	return string(b), ok
}

// appendDigest appends digest's text to dst.
func appendDigest(dst, raw []byte) ([]byte, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	if !isCanonical(raw) {
		d, err := Digest(raw)
		return append(dst, d...), err == nil
	}
	sum := sha256.Sum256(raw)
	dst = append(dst, "sha256:"...)
	return hex.AppendEncode(dst, sum[:]), true
}

// isCanonical reports whether raw is one JSON value exactly as canonical
// writes it: no white space outside strings, each object's keys in
// order and without escapes, strings with only the escapes canonical
// makes (\" \\ \n \r \t) and no other control character, valid UTF-8
// without U+2028 and U+2029. It may say false of a canonical value
// (then canonical is asked), never true of another.
func isCanonical(raw []byte) bool {
	end, ok := canonicalValue(raw, 0)
	return ok && end == len(raw)
}

func canonicalValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch c := b[i]; {
	case c == '"':
		return canonicalString(b, i)
	case c == '{':
		i++
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		var prev []byte
		for first := true; ; first = false {
			if i >= len(b) || b[i] != '"' {
				return 0, false
			}
			kEnd, ok := canonicalString(b, i)
			if !ok {
				return 0, false
			}
			key := b[i+1 : kEnd-1]
			if bytes.IndexByte(key, '\\') >= 0 || !first && bytes.Compare(prev, key) >= 0 {
				return 0, false
			}
			prev = key
			if kEnd >= len(b) || b[kEnd] != ':' {
				return 0, false
			}
			vEnd, ok := canonicalValue(b, kEnd+1)
			if !ok || vEnd >= len(b) {
				return 0, false
			}
			switch b[vEnd] {
			case ',':
				i = vEnd + 1
			case '}':
				return vEnd + 1, true
			default:
				return 0, false
			}
		}
	case c == '[':
		i++
		if i < len(b) && b[i] == ']' {
			return i + 1, true
		}
		for {
			vEnd, ok := canonicalValue(b, i)
			if !ok || vEnd >= len(b) {
				return 0, false
			}
			switch b[vEnd] {
			case ',':
				i = vEnd + 1
			case ']':
				return vEnd + 1, true
			default:
				return 0, false
			}
		}
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	case c == '-' || c >= '0' && c <= '9':
		j := i
		for j < len(b) && (b[j] >= '0' && b[j] <= '9' || b[j] == '-' || b[j] == '+' || b[j] == '.' || b[j] == 'e' || b[j] == 'E') {
			j++
		}
		if !json.Valid(b[i:j]) {
			return 0, false
		}
		return j, true
	}
	return 0, false
}

func literal(b []byte, i int, lit string) (int, bool) {
	if len(b)-i >= len(lit) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return 0, false
}

func canonicalString(b []byte, i int) (int, bool) {
	for j := i + 1; j < len(b); {
		c := b[j]
		switch {
		case c == '"':
			return j + 1, true
		case c == '\\':
			if j+1 >= len(b) {
				return 0, false
			}
			switch b[j+1] {
			case '"', '\\', 'n', 'r', 't':
				j += 2
			default:
				return 0, false
			}
		case c < 0x20:
			return 0, false
		case c < utf8.RuneSelf:
			j++
		default:
			r, size := utf8.DecodeRune(b[j:])
			if r == utf8.RuneError || r == '\u2028' || r == '\u2029' {
				return 0, false
			}
			j += size
		}
	}
	return 0, false
}

// appendString appends s as a JSON string (as canonical writes it).
func appendString[S string | []byte](dst []byte, s S) []byte {
	for i := 0; i < len(s); i++ {
		if !plainByte[s[i]] {
			b, _ := canonical(string(s))
			return append(dst, b...)
		}
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// plainByte is true for the bytes a JSON string holds as they are:
// printable ASCII but " and \.
var plainByte = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()
