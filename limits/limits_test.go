package limits

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// Every field of Limits is described exactly once, with a default of its
// own type, a key, a flag and a description.
func TestAllDescribesEveryField(t *testing.T) {
	var ls Limits
	fields := map[any]string{}
	v := reflect.ValueOf(&ls).Elem()
	for i := range v.NumField() {
		fields[v.Field(i).Addr().Interface()] = v.Type().Field(i).Name
	}
	seen := map[string]bool{}
	for _, l := range All() {
		p := l.Field(&ls)
		name, ok := fields[p]
		if !ok || seen[name] {
			t.Errorf("%s: field %q unknown or described twice", l.Key, name)
		}
		seen[name] = true
		if reflect.TypeOf(p).Elem() != reflect.TypeOf(l.Default) {
			t.Errorf("%s: default %T for a %s field", l.Key, l.Default, reflect.TypeOf(p).Elem())
		}
		if !strings.Contains(l.Key, ".") || l.Flag == "" || !strings.HasSuffix(l.Description, ".") {
			t.Errorf("incomplete: %+v", l)
		}
		if want := strings.ReplaceAll(l.Leaf(), "_", "-"); l.Flag != want {
			t.Errorf("%s: flag %q, want %q", l.Key, l.Flag, want)
		}
	}
	if len(seen) != len(fields) {
		t.Errorf("%d fields, %d described", len(fields), len(seen))
	}
}

func TestDefaults(t *testing.T) {
	want := Limits{
		MaxLineBytes: 2_000_000, WriteTimeout: 5 * time.Second, MaxSubscriptions: 32,
		RequestTimeout: 30 * time.Second, RestartIntensity: 5, RestartWindow: 10 * time.Second,
		MaxConcurrency: 32, MaxQueue: 256, MaxSessions: 1024, MaxSessionsPerUID: 256, InitializeTimeout: 30 * time.Second,
		ShutdownGrace: 10 * time.Second, UpgradeGrace: 10 * time.Second,
		MaxBufferedBytes: 64_000_000, MaxPendingOutputBytes: 8_000_000,
	}
	if got := Defaults(); got != want {
		t.Errorf("Defaults() = %+v, want %+v", got, want)
	}
	// A set field stays, at its smallest valid value too.
	got := Limits{MaxLineBytes: 1, WriteTimeout: time.Nanosecond}.WithDefaults()
	want.MaxLineBytes, want.WriteTimeout = 1, time.Nanosecond
	if got != want {
		t.Errorf("WithDefaults kept %+v, want %+v", got, want)
	}
}

// Each negative field is refused with the message of docs/transport.md §15;
// zero (the default) and the smallest positive value are accepted.
func TestValidate(t *testing.T) {
	if err := (Limits{}).Validate(); err != nil {
		t.Errorf("zero limits: %v", err)
	}
	for _, l := range All() {
		var ls Limits
		switch p := l.Field(&ls).(type) {
		case *int:
			*p = 1
		case *time.Duration:
			*p = 1
		}
		if err := ls.Validate(); err != nil {
			t.Errorf("%s = 1: %v", l.Key, err)
		}
		switch p := l.Field(&ls).(type) {
		case *int:
			*p = -1
		case *time.Duration:
			*p = -1
		}
		err := ls.Validate()
		if want := l.Leaf() + " " + l.Allowed(); err == nil || err.Error() != want {
			t.Errorf("%s = -1: %v, want %q", l.Key, err, want)
		}
	}
	err := Limits{MaxLineBytes: -1, WriteTimeout: -time.Second}.Validate()
	want := "write_timeout must be a positive duration\nmax_line_bytes must be a positive integer"
	if err == nil || err.Error() != want || len(err.(interface{ Unwrap() []error }).Unwrap()) != 2 {
		t.Errorf("two invalid: %v, want %q", err, want)
	}
}

func TestAllowed(t *testing.T) {
	for _, tt := range []struct{ key, want string }{
		{"session.max_line_bytes", "must be a positive integer"},
		{"session.write_timeout", "must be a positive duration"},
	} {
		for _, l := range All() {
			if l.Key == tt.key && l.Allowed() != tt.want {
				t.Errorf("%s: %q, want %q", tt.key, l.Allowed(), tt.want)
			}
		}
	}
}
