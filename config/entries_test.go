package config

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// probeEntries is an entry section that exists only in this package's
// tests: it records the table it was given and refuses entries named
// "bad", so the loader's part of the mechanism can be checked before any
// real section uses it.
var probeEntries struct {
	got map[string]any
	ctx entryContext
}

func init() {
	registerEntrySection(&entrySection{name: "probeEntries", decode: func(ctx entryContext, table map[string]any, c *Config) []Problem {
		probeEntries.got, probeEntries.ctx = table, ctx
		if _, bad := table["bad"]; bad {
			return []Problem{{Key: "probeEntries.bad", Message: "is refused", Source: ctx.Source}}
		}
		return nil
	}})
}

func TestEntrySectionsGetTheirTableWhole(t *testing.T) {
	for _, tc := range []struct{ name, file string }{
		{"config.toml", "[probeEntries.a]\nx = 1\n[probeEntries.\"b.c\"]\nenv = { \"K.V\" = \"1\" }\n"},
		{"config.yaml", "probeEntries:\n  a: {x: 1}\n  b.c:\n    env: {K.V: \"1\"}\n"},
		{"config.json", `{"probeEntries": {"a": {"x": 1}, "b.c": {"env": {"K.V": "1"}}}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, tc.name, tc.file)
			mustLoad(t, Options{File: path, Env: testEnv(t)})
			if got := slices.Sorted(maps.Keys(probeEntries.got)); !slices.Equal(got, []string{"a", "b.c"}) {
				t.Fatalf("entries = %v, want [a b.c] (a dotted name must stay one entry)", got)
			}
			env, _ := probeEntries.got["b.c"].(map[string]any)["env"].(map[string]any)
			if _, ok := env["K.V"]; !ok {
				t.Errorf("env table = %v, want the key K.V kept whole", env)
			}
			if probeEntries.ctx.File != path || probeEntries.ctx.Source != (Source{Kind: FromFile, Name: path}) {
				t.Errorf("context = %+v, want the file %s", probeEntries.ctx, path)
			}
		})
	}
}

func TestEntrySectionProblemsJoinTheOthers(t *testing.T) {
	path := writeFile(t, "config.toml", "[probeEntries.bad]\n[session]\nwrite_timeout = \"0s\"\n")
	_, err := Load(Options{File: path, Env: testEnv(t)})
	got := strings.Join(problemLines(t, err), "\n")
	for _, want := range []string{"probeEntries.bad: is refused", "session.write_timeout: must be a positive duration"} {
		if !strings.Contains(got, want) {
			t.Errorf("problems:\n%s\nwant a line with %q", got, want)
		}
	}
}

func TestEntrySectionNotATable(t *testing.T) {
	path := writeFile(t, "config.toml", "probeEntries = 3\n")
	_, err := Load(Options{File: path, Env: testEnv(t)})
	if got := strings.Join(problemLines(t, err), "\n"); !strings.Contains(got, "probeEntries: must be a table of entries, got 3") {
		t.Errorf("problems:\n%s", got)
	}
}

func TestNoFileGivesEntrySectionsNil(t *testing.T) {
	probeEntries.got = map[string]any{"stale": true}
	mustLoad(t, Options{Env: testEnv(t)})
	if probeEntries.got != nil {
		t.Errorf("table = %v, want nil without a file", probeEntries.got)
	}
}
