package catalog

import (
	"encoding/json"
	bigmath "math/big"
	"regexp"
	"testing"
)

var canonicalDigits = regexp.MustCompile(`^(0|-?[1-9][0-9]*)$`)

// FuzzCanonicalInteger: whatever JSON number a client writes, the text an
// integer argument becomes is either the number as written (no integer,
// or too long) or decimal digits of exactly the same value, without
// leading zeros, fraction or exponent.
func FuzzCanonicalInteger(f *testing.F) {
	for _, s := range []string{"1", "1.0", "1e0", "1E+2", "100e-2", "-0.0", "-12.000", "0.5e1", "1.5", "1e400", "1e-400", "12345678901234567890e-10", "0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var n json.Number
		if json.Unmarshal([]byte(s), &n) != nil || string(n) != s {
			return // not a JSON number as a client sends one
		}
		got := string(canonicalInteger(n))
		if got == s {
			return // canonical already, or left as written
		}
		if !canonicalDigits.MatchString(got) || len(got) > maxIntegerDigits+1 {
			t.Fatalf("canonicalInteger(%s) = %q, not canonical digits", s, got)
		}
		a, _, err := bigmath.ParseFloat(s, 10, 4096, bigmath.ToNearestEven)
		b, _, err2 := bigmath.ParseFloat(got, 10, 4096, bigmath.ToNearestEven)
		if err != nil || err2 != nil || a.Cmp(b) != 0 {
			t.Fatalf("canonicalInteger(%s) = %s, another value (%v %v)", s, got, err, err2)
		}
	})
}
