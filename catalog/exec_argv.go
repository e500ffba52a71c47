package catalog

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	"github.com/snodod/snodod/config"
)

// This file builds an exec tool's argv and stdin from the call's
// arguments (docs/config.md, "Tools"). Values are only ever placed as
// text inside the element where their placeholder stands: no shell, no
// globbing, no word splitting, no $VAR, so each value is exactly one
// element whatever it holds (spaces, quotes, ;|&$(), newlines, a leading
// -), except an array in an element that is exactly its placeholder,
// which becomes one element per item.

// callValues decodes a tools/call's arguments (validated already) and
// fills in the declared defaults of those left out. A number keeps its
// text as the client wrote it, except an integer argument's, which is
// written canonically: JSON Schema's integer is a value (1.0 and 1e0 are
// 1), and a program reads "1", not what a client's encoder made of it.
func callValues(raw json.RawMessage, declared []config.Argument) map[string]any {
	values := map[string]any{}
	if len(raw) > 0 {
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		_ = dec.Decode(&values) // validated against the input schema
	}
	for _, a := range declared {
		v, given := values[a.Name]
		switch n, isNumber := v.(json.Number); {
		case !given && a.Default != nil:
			values[a.Name] = a.Default
		case isNumber && a.Type == "integer":
			values[a.Name] = canonicalInteger(n)
		}
	}
	return values
}

// maxIntegerDigits bounds the digits canonicalInteger writes out: an
// exponent is a few bytes of JSON, its expansion is not.
const maxIntegerDigits = 400

// canonicalInteger writes a JSON number whose value is an integer in
// decimal digits, without a fraction or exponent ("1.0", "1e0", "10E-1"
// are "1"; "-0" is "0"). A number that is no integer, or would take more
// than maxIntegerDigits digits, stays as written.
func canonicalInteger(n json.Number) json.Number {
	s := string(n)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mantissa, exp := s, 0
	if i := strings.IndexAny(s, "eE"); i >= 0 {
		e, err := strconv.Atoi(strings.TrimPrefix(s[i+1:], "+"))
		if err != nil || e > maxIntegerDigits || e < -maxIntegerDigits {
			return n
		}
		mantissa, exp = s[:i], e
	}
	whole, frac, _ := strings.Cut(mantissa, ".")
	digits := whole + frac
	exp -= len(frac)
	if exp < 0 { // the last -exp digits are the fraction: all zeros, or no integer
		cut := len(digits) + exp
		if cut < 0 {
			cut = 0
		}
		if strings.Trim(digits[cut:], "0") != "" {
			return n
		}
		digits = digits[:cut]
	} else {
		digits += strings.Repeat("0", exp)
	}
	digits = strings.TrimLeft(digits, "0")
	switch {
	case len(digits) > maxIntegerDigits:
		return n
	case digits == "":
		return "0"
	case neg:
		return json.Number("-" + digits)
	}
	return json.Number(digits)
}

// expandArgs returns argv[1:]. An element that is exactly {{name}} is
// removed when name is absent (or null) and expands to one element per
// item of an array; any other element is removed when one of its
// placeholders is absent, so "--max={{n}}" never becomes "--max=".
func expandArgs(args []config.Text, values map[string]any) []string {
	out := make([]string, 0, len(args))
	for _, text := range args {
		if name, ok := text.Exact(); ok {
			switch v := values[name].(type) {
			case nil:
			case []any:
				for _, item := range v {
					out = append(out, valueText(item))
				}
			case []string:
				out = append(out, v...)
			default:
				out = append(out, valueText(v))
			}
			continue
		}
		if s, ok := render(text, values, ","); ok {
			out = append(out, s)
		}
	}
	return out
}

// expandStdin returns the text for standard input: absent arguments are
// empty, an array's items are one per line.
func expandStdin(text config.Text, values map[string]any) string {
	var b strings.Builder
	for _, p := range text {
		if p.Arg == "" {
			b.WriteString(p.Literal)
		} else {
			b.WriteString(joined(values[p.Arg], "\n"))
		}
	}
	return b.String()
}

// render writes text with its placeholders replaced; ok is false when one
// of them is absent.
func render(text config.Text, values map[string]any, sep string) (string, bool) {
	var b strings.Builder
	for _, p := range text {
		if p.Arg == "" {
			b.WriteString(p.Literal)
			continue
		}
		v, present := values[p.Arg]
		if !present || v == nil {
			return "", false
		}
		b.WriteString(joined(v, sep))
	}
	return b.String(), true
}

// joined is an array's items joined by sep, or valueText of anything else.
func joined(v any, sep string) string {
	switch v := v.(type) {
	case nil:
		return ""
	case []string:
		return strings.Join(v, sep)
	case []any:
		parts := make([]string, len(v))
		for i, item := range v {
			parts[i] = valueText(item)
		}
		return strings.Join(parts, sep)
	}
	return valueText(v)
}

// valueText is one value as text: a string as it is, a number as written,
// a boolean as true or false, anything else as compact JSON.
func valueText(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	case int:
		return strconv.Itoa(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case nil:
		return ""
	}
	b, _ := json.Marshal(v)
	return string(b)
}
