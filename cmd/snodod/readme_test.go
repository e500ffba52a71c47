package main

import (
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestReadmeTryIt runs the README's "Try it" lines through `snodod stdio
// --demo` and holds the README to what comes out (issue 9, bug 6): every
// answer it shows in full, the tool names it shows in order, and the
// number of tools it says --demo serves.
func TestReadmeTryIt(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "\n## Try it\n")
	if start < 0 {
		t.Fatal(`README.md has no "## Try it" section`)
	}
	section := text[start:]
	section = section[:strings.Index(section[1:], "\n## ")+1]
	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(section, -1)
	if len(blocks) < 2 {
		t.Fatalf(`"Try it" has %d json blocks, want the requests and the answers`, len(blocks))
	}
	requests, answers := blocks[0][1], strings.Split(strings.TrimSpace(blocks[1][1]), "\n")

	r := runSnodod(t, requests, "stdio", "--demo")
	if r.status != 0 {
		t.Fatalf("exit status %d, stderr:\n%s", r.status, r.stderr)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var m struct{ ID json.RawMessage }
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("answer %q: %v", line, err)
		}
		if m.ID != nil {
			got[string(m.ID)] = line
		}
	}
	for _, want := range answers {
		var m struct{ ID json.RawMessage }
		if strings.Contains(want, "…") {
			// Abbreviated: the names it shows, in their order.
			id := regexp.MustCompile(`^\{"jsonrpc":"2.0","id":(\d+)`).FindStringSubmatch(want)
			if id == nil {
				t.Fatalf("abbreviated answer without an id: %s", want)
			}
			names := regexp.MustCompile(`\{"name":"([^"]+)",…\}`).FindAllStringSubmatch(want, -1)
			var list struct {
				Result struct{ Tools []struct{ Name string } }
			}
			if err := json.Unmarshal([]byte(got[id[1]]), &list); err != nil {
				t.Fatalf("answer %s: %v: %s", id[1], err, got[id[1]])
			}
			for i, n := range names {
				if i >= len(list.Result.Tools) || list.Result.Tools[i].Name != n[1] {
					t.Errorf("README shows tool %d as %q; tools/list has %v", i, n[1], list.Result.Tools)
				}
			}
			count := regexp.MustCompile(`among the (\d+)`).FindStringSubmatch(section)
			if count == nil {
				t.Fatal(`"Try it" does not say how many tools --demo serves ("among the N")`)
			}
			if n, _ := strconv.Atoi(count[1]); n != len(list.Result.Tools) {
				t.Errorf("README says --demo serves %d tools; tools/list has %d", n, len(list.Result.Tools))
			}
			continue
		}
		if err := json.Unmarshal([]byte(want), &m); err != nil {
			t.Fatalf("README answer %q: %v", want, err)
		}
		if m.ID == nil {
			continue // a progress notification: its values depend on timing
		}
		if got[string(m.ID)] != want {
			t.Errorf("README shows\n%s\nsnodod answers\n%s", want, got[string(m.ID)])
		}
	}
}
