package config

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

// loadLayered loads a configuration with a value from each layer.
func loadLayered(t *testing.T) (*Config, string) {
	t.Helper()
	path := writeFile(t, "config.toml", "[http]\nlisten = \":8080\"\nallowed_origins = [\"https://a.example\"]\n[server]\ninstructions = \"say \\\"hi\\\"\\n\"\n")
	c := mustLoad(t, Options{
		File:      path,
		Env:       testEnv(t, "SNODOD_SESSION__WRITE_TIMEOUT=2s"),
		Overrides: map[string]any{"log.level": "debug"},
		Flags:     map[string]string{"log.level": "--log-level"},
	})
	return c, path
}

func TestPrint(t *testing.T) {
	c, path := loadLayered(t)
	var b bytes.Buffer
	if err := c.Print(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != len(specs) {
		t.Fatalf("%d lines, want one per key (%d):\n%s", len(lines), len(specs), b.String())
	}
	keys := make([]string, len(lines))
	for i, line := range lines {
		keys[i], _, _ = strings.Cut(line, " ")
	}
	if !slices.IsSorted(keys) {
		t.Errorf("keys not sorted: %q", keys)
	}
	for _, want := range []string{
		`http.listen = ":8080"  `, "# file " + path,
		`session.write_timeout = "2s"  `, "# env SNODOD_SESSION__WRITE_TIMEOUT",
		`log.level = "debug"  `, "# flag --log-level",
		`http.session_idle_timeout = "30m"  `,
		`server.instructions = "say \"hi\"\n"  `,
		`http.allowed_origins = ["https://a.example"]  `,
		`daemon.allowed_uids = []  `,
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, b.String())
		}
	}

	// The output is TOML: loaded as a file, it gives the same configuration.
	again := mustLoad(t, Options{File: writeFile(t, "printed.toml", b.String()), Env: testEnv(t)})
	if !reflect.DeepEqual(sectionsOf(again), sectionsOf(c)) {
		t.Errorf("reloaded:\n got %+v\nwant %+v", sectionsOf(again), sectionsOf(c))
	}
}

func TestPrintJSON(t *testing.T) {
	c, path := loadLayered(t)
	var b bytes.Buffer
	if err := c.PrintJSON(&b); err != nil {
		t.Fatal(err)
	}
	var got map[string]struct {
		Value  any    `json:"value"`
		Source string `json:"source"`
	}
	if err := json.Unmarshal(b.Bytes(), &got); err != nil {
		t.Fatalf("%v:\n%s", err, b.String())
	}
	if len(got) != len(specs) {
		t.Errorf("%d keys, want %d", len(got), len(specs))
	}
	for key, want := range map[string]struct {
		value  any
		source string
	}{
		"session.write_timeout":  {"2s", "env SNODOD_SESSION__WRITE_TIMEOUT"},
		"session.max_line_bytes": {2000000.0, "default"},
		"http.listen":            {":8080", "file " + path},
		"log.level":              {"debug", "flag --log-level"},
		"daemon.allowed_uids":    {[]any{}, "default"},
		"protocol.versions":      {[]any{"2026-07-28", "2025-11-25", "2025-06-18"}, "default"},
	} {
		if e := got[key]; !reflect.DeepEqual(e.Value, want.value) || e.Source != want.source {
			t.Errorf("%s = %#v from %q, want %#v from %q", key, e.Value, e.Source, want.value, want.source)
		}
	}
}

func TestLiteral(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{30 * time.Minute, `"30m"`},
		{time.Hour, `"1h"`},
		{90 * time.Minute, `"1h30m"`},
		{1500 * time.Millisecond, `"1.5s"`},
		{time.Duration(0), `"0s"`},
		{"tab\there \x01 \x7f é", `"tab\there \u0001 \u007F é"`},
		{"bad \xff", "\"bad \uFFFD\""},
		{[]string{}, "[]"},
		{[]any{1, "a"}, `[1, "a"]`},
		{2e6, "2000000"},
		{nil, "null"},
		{map[string]any{"b": 1, "a": "x"}, `{a = "x", b = 1}`},
	} {
		if got := literal(tc.v); got != tc.want {
			t.Errorf("literal(%#v) = %s, want %s", tc.v, got, tc.want)
		}
	}
	for _, d := range []time.Duration{time.Nanosecond, time.Minute, 61 * time.Minute, 25 * time.Hour, 10*time.Hour + 1} {
		if back, err := time.ParseDuration(formatDuration(d)); err != nil || back != d {
			t.Errorf("formatDuration(%v) = %q reads back as %v, %v", d, formatDuration(d), back, err)
		}
	}
}
