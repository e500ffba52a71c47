package config

import (
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The one engine that decodes the entries of every entry section
// ([tools.NAME], [resources.NAME], [prompts.NAME], [mcpServers.NAME]): the
// keyed engine of keys.go carried over to tables of entries, with the same
// conversions (values.go) and the same "<allowed>, got <value>" wording.
//
// An entry is a struct whose fields are tagged `key:"NAME[,OPTION…]"`; an
// embedded struct without a tag lends its fields (programEntry). decode
// sets the fields a table gives, leaving the others as the caller
// prepared them (the defaults), and reports every problem at once, keyed
// by the field's dotted path ("tools.grep.timeout"): a wrong type or
// value, and every key no field has, as `unknown key "…"` with a
// suggestion when one is close.
//
// A field is read by its Go type: string, bool, int (a number that is
// integral; text is refused, as a file writes numbers bare), time.Duration
// (text with a unit), []string (a list; text is refused, as it is usually
// a list written wrong), a struct (a table, decoded the same way), a
// pointer to any of these (nil when absent), a map of structs (a table of
// tables, such as input.NAME), a slice of structs (a list of tables), or
// any type with a decodeEntry method, which reads the value itself
// (commandLine, envTable, InheritEnv, Filter…). Options:
//
//	positive  an int >= 1, a duration > 0
//	never     a duration that may also be "0s" (never, off)
//	oneof=a|b a string that must be one of these
//	alias=k   k is read as this field too, for the spelling of clients
//	          (envFile); giving both is a problem

// entryValue is a field type that decodes its value itself.
type entryValue interface {
	decodeEntry(f field, raw any)
}

// defaulter is an entry type with defaults of its own, set before a table
// is decoded into it (a map or list of tables makes its elements fresh).
type defaulter interface {
	setDefaults()
}

// entryDecoder collects the problems of one section's entries.
type entryDecoder struct {
	problems []Problem
}

// field is one value being decoded: where it is and whom to tell.
type field struct {
	d    *entryDecoder
	key  string // the dotted path: tools.grep.timeout
	src  Source
	note string // appended to every message: " (imported from FILE)"
}

func (f field) child(name string) field {
	f.key += "." + tomlKey(name)
	return f
}

// problem records an error about f.
func (f field) problem(msg string) {
	f.d.problems = append(f.d.problems, Problem{Key: f.key, Message: msg + f.note, Source: f.src})
}

// warn records a warning about f: reported by config check, logged by the
// daemon, and the configuration still loads.
func (f field) warn(msg string) {
	f.d.problems = append(f.d.problems, Problem{Key: f.key, Message: msg + f.note, Source: f.src, Warning: true})
}

// unknown records a key that no field has.
func (f field) unknown(name string, known []string) {
	key := f.key + "." + tomlKey(name)
	f.d.problems = append(f.d.problems, Problem{Key: key, Source: f.src, Unknown: true,
		Message: fmt.Sprintf("unknown key %q%s", key, f.note) + didYouMean(nearest(name, known), func(s string) string { return strconv.Quote(f.key + "." + tomlKey(s)) })})
}

// errors counts the problems recorded that are not warnings.
func (d *entryDecoder) errors() int {
	n := 0
	for _, p := range d.problems {
		if !p.Warning {
			n++
		}
	}
	return n
}

// knownFields, when set (by the docs test), is told each table's known
// keys as it is decoded, so the test can compare them with docs/config.md.
var knownFields func(prefix string, known []string)

// table decodes raw, which must be a table, into dst (a pointer to a
// struct); it reports whether raw was a table.
func (f field) table(raw any, dst any) bool {
	v := reflect.ValueOf(dst).Elem()
	t, ok := raw.(map[string]any)
	if !ok {
		f.problem("must be a table, got " + literal(raw))
		return false
	}
	fields := entryFields(v.Type())
	var known []string
	for _, ef := range fields {
		known = append(known, ef.name)
	}
	if knownFields != nil {
		knownFields(f.key, known)
	}
	for _, ef := range fields {
		val, present := t[ef.name]
		present = present && val != nil // YAML's "key:" with nothing after it
		if ef.alias != "" {
			if av, ok := t[ef.alias]; ok && av != nil {
				if present {
					f.child(ef.alias).problem("is another spelling of " + ef.name + "; keep one of them")
					continue
				}
				val, present = av, true
			}
		}
		if !present {
			continue
		}
		name := ef.name
		if _, own := t[name]; !own {
			name = ef.alias
		}
		f.child(name).value(val, v.FieldByIndex(ef.index), ef.opts)
	}
	for _, k := range slices.Sorted(maps.Keys(t)) {
		if !slices.ContainsFunc(fields, func(ef entryField) bool { return ef.name == k || ef.alias == k }) {
			f.unknown(k, known)
		}
	}
	return true
}

// value decodes raw into v, a settable field of the Go type that says how.
func (f field) value(raw any, v reflect.Value, opts tagOptions) {
	if ev, ok := v.Addr().Interface().(entryValue); ok {
		ev.decodeEntry(f, raw)
		return
	}
	switch t := v.Type(); {
	case t == reflect.TypeFor[time.Duration]():
		if d, ok := f.duration(raw, opts.never); ok {
			v.SetInt(int64(d))
		}
	case t.Kind() == reflect.Pointer:
		elem := reflect.New(t.Elem())
		if d, ok := elem.Interface().(defaulter); ok {
			d.setDefaults()
		}
		before := f.d.errors()
		f.value(raw, elem.Elem(), opts)
		if f.d.errors() == before {
			v.Set(elem)
		}
	case t.Kind() == reflect.String:
		s, ok := toString(raw)
		switch {
		case !ok:
			f.problem("must be a string, got " + literal(raw))
		case opts.oneOf != nil && !slices.Contains(opts.oneOf, s):
			f.problem("must be " + join(quoteAll(opts.oneOf), "or") + ", got " + literal(raw))
		default:
			v.SetString(s)
		}
	case t.Kind() == reflect.Bool:
		if b, ok := raw.(bool); ok {
			v.SetBool(b)
		} else {
			f.problem("must be true or false, got " + literal(raw))
		}
	case t.Kind() == reflect.Int:
		if n, ok := f.integer(raw, opts.positive); ok {
			v.SetInt(int64(n))
		}
	case t == reflect.TypeFor[[]string]():
		if list, ok := stringList(raw); ok {
			v.Set(reflect.ValueOf(list))
		} else {
			f.problem("must be a list of strings, got " + literal(raw))
		}
	case t.Kind() == reflect.Struct:
		f.table(raw, v.Addr().Interface())
	case t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		table, ok := raw.(map[string]any)
		if !ok {
			f.problem("must be a table, got " + literal(raw))
			return
		}
		m := reflect.MakeMapWithSize(t, len(table))
		for _, name := range slices.Sorted(maps.Keys(table)) {
			elem := reflect.New(t.Elem())
			if d, ok := elem.Interface().(defaulter); ok {
				d.setDefaults()
			}
			if f.child(name).table(table[name], elem.Interface()) {
				m.SetMapIndex(reflect.ValueOf(name), elem.Elem())
			}
		}
		v.Set(m)
	case t.Kind() == reflect.Slice:
		items, ok := raw.([]any)
		if !ok {
			f.problem("must be a list of tables, got " + literal(raw))
			return
		}
		s := reflect.MakeSlice(t, 0, len(items))
		for i, it := range items {
			elem := reflect.New(t.Elem())
			if d, ok := elem.Interface().(defaulter); ok {
				d.setDefaults()
			}
			at := f
			at.key += fmt.Sprintf("[%d]", i)
			if at.table(it, elem.Interface()) {
				s = reflect.Append(s, elem.Elem())
			}
		}
		v.Set(s)
	default:
		panic("config: no entry decoding for " + t.String())
	}
}

// integer reads a number that is integral: an integer, or an integral
// float (JSON numbers). Text is refused: a file writes numbers bare.
func (f field) integer(raw any, positive bool) (int, bool) {
	n, ok := toInt(raw)
	if _, text := raw.(string); text || !ok || positive && n < 1 {
		if positive {
			f.problem("must be a positive integer, got " + literal(raw))
		} else {
			f.problem("must be an integer, got " + literal(raw))
		}
		return 0, false
	}
	return n, true
}

// duration reads text time.ParseDuration accepts, > 0, or also 0 when
// never is set.
func (f field) duration(raw any, never bool) (time.Duration, bool) {
	d, ok := toDuration(raw)
	if ok && (d > 0 || never && d == 0) {
		return d, true
	}
	f.problem(durationRule(raw, never) + ", got " + literal(raw))
	return 0, false
}

// durationRule is what a positive duration allows, said the same way for
// every key and field: with the hint about units when raw is a bare
// number, and "0s" when never is allowed.
func durationRule(raw any, never bool) string {
	allowed := "must be a positive duration"
	if unitless(raw) {
		allowed += ` with a unit, such as "30s"`
	}
	if never {
		allowed += `, or "0s" for never`
	}
	return allowed
}

// entryField is one tagged field of an entry struct.
type entryField struct {
	name, alias string
	index       []int
	opts        tagOptions
}

type tagOptions struct {
	positive, never bool
	oneOf           []string
}

// entryFields lists t's tagged fields, those of embedded untagged structs
// included, in declaration order.
func entryFields(t reflect.Type) []entryField {
	var out []entryField
	for i := range t.NumField() {
		sf := t.Field(i)
		tag, tagged := sf.Tag.Lookup("key")
		if !tagged {
			if sf.Anonymous && sf.Type.Kind() == reflect.Struct {
				for _, ef := range entryFields(sf.Type) {
					ef.index = append([]int{i}, ef.index...)
					out = append(out, ef)
				}
			}
			continue
		}
		parts := strings.Split(tag, ",")
		ef := entryField{name: parts[0], index: []int{i}}
		for _, o := range parts[1:] {
			switch k, v, _ := strings.Cut(o, "="); k {
			case "positive":
				ef.opts.positive = true
			case "never":
				ef.opts.never = true
			case "oneof":
				ef.opts.oneOf = strings.Split(v, "|")
			case "alias":
				ef.alias = v
			default:
				panic("config: unknown tag option " + o + " on " + t.String() + "." + sf.Name)
			}
		}
		out = append(out, ef)
	}
	return out
}

// eachEntry decodes every entry of section's table, in name order: it
// checks the entry's name (kind words it: "tool") and calls decode with
// the entry's field.
func eachEntry(d *entryDecoder, section, kind string, src Source, table map[string]any, decode func(f field, name string, raw any)) {
	for _, name := range slices.Sorted(maps.Keys(table)) {
		f := field{d: d, key: section + "." + tomlKey(name), src: src}
		if !entryName.MatchString(name) {
			f.problem("is not a valid " + kind + " name: " + entryNameRule)
		}
		decode(f, name, table[name])
	}
}

// entryName is what the names of entries and tool arguments may be:
// letters, digits, _, - and ., as MCP recommends for tool names, at most
// 64 bytes, so that they fit in an aggregated view's composed names and
// on command lines (snodod connect NAME).
var entryName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

const entryNameRule = "names may use only letters, digits, _, - and ., at most 64 of them"

// nearest returns the one candidate within two edits of name (ignoring
// case, and - for _), if exactly one is closest, or the one candidate
// name is a prefix of.
func nearest(name string, candidates []string) []string {
	n := strings.ReplaceAll(strings.ToLower(name), "-", "_")
	var near []string
	best := 3
	for _, c := range candidates {
		switch d := distance(n, strings.ToLower(c)); {
		case d < best:
			best, near = d, []string{c}
		case d == best:
			near = append(near, c)
		}
	}
	if len(near) == 1 && best < max(len(n)/2, 2) {
		return near
	}
	var longer []string // readOnly for readOnlyHint
	for _, c := range candidates {
		if len(n) >= 3 && strings.HasPrefix(strings.ToLower(c), n) {
			longer = append(longer, c)
		}
	}
	if len(longer) == 1 {
		return longer
	}
	return nil
}

func quoteAll(values []string) []string {
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = strconv.Quote(v)
	}
	return out
}

// stringList reads a list of strings. Unlike a keyed list, an entry's is
// never text: args = "one" is a mistake, not a list of one.
func stringList(v any) ([]string, bool) {
	if _, text := v.(string); text {
		return nil, false
	}
	list, ok := convert(kindStrings, v)
	if !ok {
		return nil, false
	}
	return list.([]string), true
}

// kindOfValue names a value's type without showing it (for secrets).
func kindOfValue(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a table"
	case []any:
		return "a list"
	case bool:
		return "a boolean"
	case string:
		return "a string"
	case nil:
		return "null"
	}
	return "a number"
}
