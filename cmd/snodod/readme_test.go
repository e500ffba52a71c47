//go:build unix

package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/snodod/snodod/daemon/control"
)

// readmeSection is the README's section "## title", up to the next one.
func readmeSection(t *testing.T, title string) string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "\n## "+title+"\n")
	if start < 0 {
		t.Fatalf(`README.md has no "## %s" section`, title)
	}
	section := text[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end+1]
	}
	return section
}

// TestReadmeTryIt runs the README's "Try it" lines through `snodod stdio
// --demo` and holds the README to what comes out: every
// answer it shows in full, the tool names it shows in order, and the
// number of tools it says --demo serves.
func TestReadmeTryIt(t *testing.T) {
	section := readmeSection(t, "Try it")
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

// TestReadmeClients holds the README's client section to the clients' own
// file shapes: every JSON snippet
// parses, each entry is the shape its client reads (mcpServers; VS Code's
// servers with a type; Zed's context_servers; the HTTP form), a command is
// an absolute path (GUI clients lack the login shell's PATH), and each
// entry is tried: its args start a session through a real daemon, its
// URL answers an initialize.
func TestReadmeClients(t *testing.T) {
	section := readmeSection(t, "Pointing an MCP client at snodod")

	dir := sockDir(t)
	p := startServe(t, dir, "--demo", "--http", "127.0.0.1:0")
	listen := serveHTTPAddr(t, p)

	type entry struct {
		Type    string            `json:"type"`
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Env     map[string]string `json:"env"`
		URL     string            `json:"url"`
	}
	shapes := map[string]bool{}
	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllStringSubmatch(section, -1)
	for _, block := range blocks {
		var file map[string]map[string]json.RawMessage
		if err := json.Unmarshal([]byte(block[1]), &file); err != nil {
			t.Errorf("a snippet is not JSON (%v):\n%s", err, block[1])
			continue
		}
		for key, servers := range file {
			for name, raw := range servers {
				dec := json.NewDecoder(strings.NewReader(string(raw)))
				dec.DisallowUnknownFields()
				var e entry
				if err := dec.Decode(&e); err != nil {
					t.Errorf("%s.%s: %v", key, name, err)
					continue
				}
				where := key + "." + name
				switch key {
				case "mcpServers", "context_servers":
				case "servers": // VS Code: the type is required
					if e.Type == "" {
						t.Errorf("%s: VS Code needs a type", where)
					}
				default:
					t.Errorf("%s: no client reads %q", where, key)
				}
				switch {
				case e.URL != "":
					shapes[key+" http"] = true
					if e.Type != "" && e.Type != "http" || e.Command != "" || key == "context_servers" {
						t.Errorf("%s: an HTTP entry has type http (or none, for Cursor) and no command: %+v", where, e)
					}
					tryURL(t, where, e.URL, listen)
				default:
					shapes[key+" stdio"] = true
					if e.Type != "" && e.Type != "stdio" || !filepath.IsAbs(e.Command) || len(e.Args) == 0 || e.Args[0] != "connect" {
						t.Errorf("%s: want an absolute command with args [connect …]: %+v", where, e)
					}
					if len(e.Args) == 1 && e.Env == nil { // the entries naming other sockets are not tried
						tryConnect(t, where, p, e.Args)
					}
				}
			}
		}
	}
	for _, want := range []string{"mcpServers stdio", "servers stdio", "context_servers stdio", "servers http", "mcpServers http"} {
		if !shapes[want] {
			t.Errorf("no snippet of the shape %q", want)
		}
	}
	// The commands of Claude Code.
	adds := regexp.MustCompile("`claude mcp add ([^`]*)`").FindAllStringSubmatch(section, -1)
	if len(adds) != 2 {
		t.Fatalf("%d `claude mcp add` commands, want the stdio and the HTTP one", len(adds))
	}
	for _, add := range adds {
		words := strings.Fields(add[1])
		if i := slices.Index(words, "--"); i >= 0 {
			if words[i+1] != "snodod" || i < 1 || words[i-1] != "snodod" {
				t.Errorf("claude mcp add %s: want NAME -- snodod connect", add[1])
			}
			tryConnect(t, "claude mcp add", p, words[i+2:])
			continue
		}
		if !slices.Contains(words, "--transport") || words[len(words)-2] != "snodod" {
			t.Errorf("claude mcp add %s: want --transport http snodod URL", add[1])
		}
		tryURL(t, "claude mcp add", words[len(words)-1], listen)
	}
}

// serveHTTPAddr is the address the daemon's HTTP listener bound.
func serveHTTPAddr(t *testing.T, p *serveProcess) string {
	t.Helper()
	st, err := (&control.Client{Socket: p.control}).Status(t.Context())
	if err != nil || st.HTTP == nil {
		t.Fatalf("status: %v, %+v", err, st)
	}
	return st.HTTP.Listen
}

// tryConnect runs `snodod ARGS` as the client would (with the test
// daemon's socket), and checks that an initialize is answered.
func tryConnect(t *testing.T, where string, p *serveProcess, args []string) {
	t.Helper()
	r := runIn(t, p.env, lines(initLine), append(slices.Clip(args), "--socket", p.socket)...)
	if r.status != 0 || !strings.HasPrefix(r.stdout, `{"jsonrpc":"2.0","id":1,"result":{`) {
		t.Errorf("%s: snodod %q: %d\n%s%s", where, args, r.status, r.stdout, r.stderr)
	}
}

// tryURL posts an initialize to url, its host and port those the test
// daemon listens on.
func tryURL(t *testing.T, where, url, listen string) {
	t.Helper()
	const readme = "http://127.0.0.1:8080"
	path, ok := strings.CutPrefix(url, readme)
	if !ok {
		t.Errorf("%s: URL %q, want one on %s", where, url, readme)
		return
	}
	req, err := http.NewRequestWithContext(t.Context(), "POST", "http://"+listen+path, strings.NewReader(initLine))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"protocolVersion":"2025-06-18"`) {
		t.Errorf("%s: POST %s: %d %s", where, url, resp.StatusCode, body)
	}
}
