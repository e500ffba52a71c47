package config

import (
	"reflect"
	"testing"

	"github.com/snodod/snodod/limits"
)

func TestKeys(t *testing.T) {
	keys := Keys()
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k.Name] {
			t.Errorf("%s listed twice", k.Name)
		}
		seen[k.Name] = true
		if k.Type == "invalid" || k.Description == "" || k.Allowed == "" || k.Env != envName(k.Name) {
			t.Errorf("incomplete: %+v", k)
		}
	}
	// The Config struct and the key list are the same set: every leaf field
	// with a koanf tag is a key, and so is every field of Config.Limits.
	fields := 0
	ct := reflect.TypeFor[Config]()
	for i := range ct.NumField() {
		if f := ct.Field(i); f.Tag.Get("koanf") != "" || f.Type == reflect.TypeFor[limits.Limits]() {
			fields += f.Type.NumField()
		}
	}
	if fields != len(keys) {
		t.Errorf("%d Config fields, %d keys", fields, len(keys))
	}
	// Every default in Keys is what a load without file gives, before the
	// socket paths are expanded and the control socket is placed.
	c := mustLoad(t, Options{Env: testEnv(t)})
	for _, k := range keys {
		if k.Name == "daemon.socket" || k.Name == "daemon.control_socket" {
			continue
		}
		if got := literal(fieldValue(c, specByName[k.Name])); got != k.Default {
			t.Errorf("%s: loaded default %s, Keys says %s", k.Name, got, k.Default)
		}
	}
	if got := len(defaults().raw); got != len(keys) {
		t.Errorf("the defaults set %d keys, want %d", got, len(keys))
	}
	// Each limit's key is bound to its own field of Config.Limits.
	for _, l := range limits.All() {
		var c Config
		p := reflect.ValueOf(&c).Elem().FieldByIndex(specByName[l.Key].field).Addr().Interface()
		if p != l.Field(&c.Limits) {
			t.Errorf("%s is bound to another field", l.Key)
		}
	}
}

func TestSuggest(t *testing.T) {
	for name, want := range map[string][]string{
		"log.levl":              {"log.level"},
		"http.max_body_byte":    {"http.max_body_bytes"},
		"executor.max_sessions": {"daemon.max_sessions", "http.max_sessions"},
		"nothing.like.it":       nil,
		"a":                     nil,
	} {
		if got := suggest(name); !reflect.DeepEqual(got, want) {
			t.Errorf("suggest(%q) = %q, want %q", name, got, want)
		}
	}
}
