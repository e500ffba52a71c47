package catalog_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/server"
)

// relayView stands in for the hosted servers' aggregated view: Attach
// relays one upstream tool, memory__read_graph, and refresh relays it
// again (as a reload does), keeping what the server refused.
type relayView struct {
	mu      sync.Mutex
	srv     *server.Server
	refused map[string][]string
}

func (v *relayView) attach(srv *server.Server) {
	v.mu.Lock()
	v.srv = srv
	v.mu.Unlock()
	v.refresh()
}

func (v *relayView) refresh() {
	v.mu.Lock()
	defer v.mu.Unlock()
	handler := func(context.Context, *server.RawRequest) (*server.RawResult, error) {
		return &server.RawResult{Result: json.RawMessage(`{"content":[]}`)}, nil
	}
	v.refused = v.srv.ReplaceRelayed(map[string]server.RelayedItems{"memory": {Tools: []server.RawTool{{
		Name: "memory__read_graph", Definition: json.RawMessage(`{"name":"read_graph","description":"upstream","inputSchema":{"type":"object"}}`), Handler: handler,
	}}}})
}

// A configured tool named as an upstream's tool in the aggregated view
// (docs/upstreams.md §2): the daemon's own catalog wins and the upstream's
// item is refused by the view (status shows it as collided), at the first
// Apply and at a reload alike; it is never refused itself, as the
// relayed name was before ("taken by a tool snodod serves itself"). A
// reload that removes the configured tool gives the name back.
func TestConfiguredToolWinsOverRelayed(t *testing.T) {
	dir := t.TempDir()
	own := "[tools.memory__read_graph]\ncommand = [\"/bin/echo\", \"own\"]\ndescription = \"own\"\n"
	view := &relayView{}
	h, srv := newHost(t, loadConfig(t, dir, own), catalog.HostOptions{Attach: view.attach})
	c := newClient(t, srv, "2025-11-25", `{}`)
	want := map[string][]string{"memory": {"tool memory__read_graph"}}
	check := func(when, description string, refused map[string][]string) {
		t.Helper()
		list := result[struct {
			Tools []struct{ Name, Description string }
		}](t, c, t.Context(), "tools/list", nil)
		listed := ""
		for _, tool := range list.Tools {
			if tool.Name == "memory__read_graph" {
				listed += tool.Description
			}
		}
		if listed != description {
			t.Errorf("%s: memory__read_graph is listed as %q, want %q once", when, listed, description)
		}
		view.mu.Lock()
		defer view.mu.Unlock()
		if len(view.refused) != len(refused) || !slices.Equal(view.refused["memory"], refused["memory"]) {
			t.Errorf("%s: the view refused %v, want %v", when, view.refused, refused)
		}
	}
	check("first apply", "own", want)

	// A reload keeps the server, whose catalog holds the relayed items.
	if again, err := h.Apply(loadConfig(t, dir, own)); err != nil || again != srv {
		t.Fatalf("reload with the same tool: %v (same server %v)", err, again == srv)
	}
	view.refresh()
	check("reload", "own", want)

	if _, err := h.Apply(loadConfig(t, dir, "# no tools\n")); err != nil {
		t.Fatal(err)
	}
	view.refresh()
	check("reload without the tool", "upstream", map[string][]string{})

	if _, err := h.Apply(loadConfig(t, dir, own)); err != nil {
		t.Fatalf("reload adding the tool back, over the relayed one: %v", err)
	}
	view.refresh()
	check("reload adding it back", "own", want)
}

// A reload logs only the warnings it adds (the leading "-" warning was
// logged at every reload): config check prints them all.
func TestHostWarnsOnce(t *testing.T) {
	dir := t.TempDir()
	var logged []string
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		logged = append(logged, string(p))
		return len(p), nil
	}), nil))
	h := catalog.NewHost(catalog.HostOptions{Logger: log})
	t.Cleanup(h.Close)
	one := "[tools.ls]\ncommand = [\"/bin/ls\", \"{{dir}}\"]\ninput.dir = {}\n"
	two := one + "[tools.cat]\ncommand = [\"/bin/cat\", \"{{file}}\"]\ninput.file = {}\n"
	for i, text := range []string{one, one, two, two} {
		if _, err := h.Apply(loadConfig(t, dir, text)); err != nil {
			t.Fatalf("apply %d: %v", i, err)
		}
	}
	var warned []string
	for _, line := range logged {
		if strings.Contains(line, "level=WARN") {
			warned = append(warned, line)
		}
	}
	if len(warned) != 2 || !strings.Contains(warned[0], "tools.ls.command") || !strings.Contains(warned[1], "tools.cat.command") {
		t.Errorf("warnings logged over four applies:\n%s\nwant tools.ls's once, then tools.cat's once", strings.Join(warned, ""))
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
