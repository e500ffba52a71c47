package config

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestViewsDocExample loads the example of docs/views.md: every field of a
// view, decoded as the page says.
func TestViewsDocExample(t *testing.T) {
	b, err := os.ReadFile("../docs/views.md")
	if err != nil {
		t.Fatal(err)
	}
	var tomls []string
	for _, ex := range fenced(string(b), "toml") {
		if strings.Contains(ex, "[views.") {
			tomls = append(tomls, ex)
		}
	}
	if len(tomls) != 1 {
		t.Fatalf("docs/views.md has %d TOML examples of [views.NAME], want 1", len(tomls))
	}
	c := mustLoad(t, Options{File: writeFile(t, "config.toml", tomls[0]), Env: testEnv(t)})
	if got := c.ViewNames(); !reflect.DeepEqual(got, []string{"readers", "review"}) {
		t.Fatalf("views %v", got)
	}
	r := c.View("review")
	ro := true
	want := View{Name: "review", Servers: []string{"github"},
		Tools:        Filter{Include: []string{"gh__get_*", "gh__list_*", "gh__search_*"}},
		Rename:       map[string]string{"gh__search_repositories": "search_repos"},
		Override:     map[string]ViewOverride{"search_repos": {Description: ptr("Search GitHub repositories by keyword."), Annotations: annotationsMap{"readOnlyHint": ro, "openWorldHint": ro}}},
		Instructions: ptr("Read GitHub; never write to it."), AllowedUIDs: []int{1001}}
	if !reflect.DeepEqual(*r, want) {
		t.Errorf("review:\n got %+v\nwant %+v", *r, want)
	}
	if rd := c.View("readers"); rd.Servers != nil || !rd.Holds("fs") || !rd.Holds("github") || rd.Tools.Allows("gh__create_issue") || !rd.Tools.Allows("fs__read_file") {
		t.Errorf("readers: %+v", rd)
	}
}

func ptr(s string) *string { return &s }

// TestViewProblems: every problem of every view at once, each naming its
// field.
func TestViewProblems(t *testing.T) {
	path := writeFile(t, "config.toml", `
[mcpServers.a]
command = "/bin/true"

[views.v]
servers = ["a", "nope"]
rename = { "a__x" = "y", "a__z" = "y" }
tools = ["[bad"]
max_tools = 2
allowed_uids = ["me"]
colour = "red"

[views.v.override.y]
annotations = { readOnlyHint = 1 }

[views."bad name"]
`)
	_, err := Load(Options{File: path, Env: testEnv(t)})
	if err == nil {
		t.Fatal("loaded")
	}
	for _, want := range []string{
		`views.v.servers: names "nope", which is no mcpServers entry; the configured ones are a`,
		`views.v.rename.a__z: renames to "y" as "a__x" does`,
		`views.v.tools: entries must be globs`,
		`views.v.max_tools: must be 0 (upstreams.max_tools applies) or an integer of at least 3 (search_tools, call_tool and one more), got 2`,
		`views.v.allowed_uids: entries must be user ids`,
		`unknown key "views.v.colour"`,
		`views.v.override.y.annotations.readOnlyHint: must be true, false or a string`,
		`is not a valid view name`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}
