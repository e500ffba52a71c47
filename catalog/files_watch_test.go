package catalog_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/internal/eventually"
	"github.com/snodod/snodod/server"
)

// noticeWithin is how long a change may take to reach a subscriber: the
// issue's one second.
const noticeWithin = time.Second

// events collects the notifications of one subscription on a goroutine of
// its own, as a transport would write them, until stopped.
type events struct {
	mu     sync.Mutex
	got    []server.Event
	cancel context.CancelFunc
	done   chan struct{}
}

func collect(t *testing.T, next func(context.Context) (server.Event, error)) *events {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e := &events{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(e.done)
		for {
			ev, err := next(ctx)
			if err != nil {
				return
			}
			e.mu.Lock()
			e.got = append(e.got, ev)
			e.mu.Unlock()
		}
	}()
	t.Cleanup(e.stop)
	return e
}

func (e *events) stop() {
	e.cancel()
	<-e.done
}

// count returns how many events of method (about uri, when not "") came.
func (e *events) count(method, uri string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, ev := range e.got {
		if ev.Method == method && (uri == "" || strings.Contains(fmt.Sprint(ev.Params), uri)) {
			n++
		}
	}
	return n
}

// await waits up to within for count(method, uri) to reach n.
func (e *events) await(t *testing.T, within time.Duration, n int, method, uri string) {
	t.Helper()
	if !eventually.Within(within, func() bool { return e.count(method, uri) >= n }) {
		t.Fatalf("after %s: %d %s %s, want %d", within, e.count(method, uri), method, uri, n)
	}
}

// watched is a folder served with a legacy client subscribed to one of
// its files and a 2026 listen stream on the same file and on list
// changes, each collecting its events.
type watched struct {
	dir, file, uri string
	host           *catalog.Host
	srv            *server.Server
	legacy, modern *events
}

func watchedFolder(t *testing.T, extra string) *watched {
	t.Helper()
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	w := &watched{dir: dir}
	w.file = write(t, dir, "notes/a.md", "first")
	w.uri = "file://" + w.file
	cfg := loadConfig(t, dir, "[resources.notes]\npath = \"notes\"\n"+extra)
	w.host, w.srv = newHost(t, cfg, catalog.HostOptions{})
	legacy := newClient(t, w.srv, "2025-11-25", `{}`)
	result[map[string]any](t, legacy, t.Context(), "resources/subscribe", map[string]any{"uri": w.uri})
	w.legacy = collect(t, legacy.sess.Next)
	out := newClient(t, w.srv, v2026, `{}`).dispatch(t.Context(), "subscriptions/listen", map[string]any{"notifications": map[string]any{
		"resourcesListChanged": true, "resourceSubscriptions": []string{w.uri}}})
	if out.Err != nil || out.Stream == nil {
		t.Fatalf("listen: %+v", out)
	}
	t.Cleanup(func() { out.Stream.Close(server.Disconnected, "") })
	w.modern = collect(t, out.Stream.Next)
	return w
}

func TestFileUpdatesReachSubscribers(t *testing.T) {
	w := watchedFolder(t, "")
	if err := os.WriteFile(w.file, []byte("second"), 0o644); err != nil {
		t.Fatal(err)
	}
	w.legacy.await(t, noticeWithin, 1, "notifications/resources/updated", w.uri)
	w.modern.await(t, noticeWithin, 1, "notifications/resources/updated", w.uri)

	// Added and removed files change the list.
	added := write(t, w.dir, "notes/new/b.md", "b")
	w.legacy.await(t, noticeWithin, 1, "notifications/resources/list_changed", "")
	w.modern.await(t, noticeWithin, 1, "notifications/resources/list_changed", "")
	c := newClient(t, w.srv, "2025-06-18", `{}`)
	if got := listedNames(t, c); !slices.Equal(got, []string{"a.md", "new/b.md"}) {
		t.Errorf("after adding, listed %q", got)
	}
	if err := os.RemoveAll(filepath.Dir(added)); err != nil {
		t.Fatal(err)
	}
	w.legacy.await(t, noticeWithin, 2, "notifications/resources/list_changed", "")
	if got := listedNames(t, c); !slices.Equal(got, []string{"a.md"}) {
		t.Errorf("after removing, listed %q", got)
	}
	// An editor's atomic save (write a temporary file, rename it over the
	// original) is an update of the original.
	tmp := write(t, w.dir, "notes/.a.md.swp", "third")
	if err := os.Rename(tmp, w.file); err != nil {
		t.Fatal(err)
	}
	w.legacy.await(t, noticeWithin, 2, "notifications/resources/updated", w.uri)
}

// listedNames returns the names of every resource listed, all pages. A
// change while it pages invalidates the cursor: it starts again.
func listedNames(t *testing.T, c *client) []string {
	t.Helper()
	var names []string
	params := map[string]any{}
	for {
		raw, perr := c.call(t.Context(), "resources/list", params)
		if perr != nil && params["cursor"] != nil && perr.Message == "Invalid pagination cursor" {
			names, params = nil, map[string]any{}
			continue
		}
		if perr != nil {
			t.Fatalf("resources/list: %+v", perr)
		}
		var page struct {
			Resources  []listedResource
			NextCursor string
		}
		mustDecode(t, raw, &page)
		for _, r := range page.Resources {
			names = append(names, r.Name)
		}
		if page.NextCursor == "" {
			return names
		}
		params = map[string]any{"cursor": page.NextCursor}
	}
}

// TestFileBurstIsCoalesced writes one subscribed file 1,000 times and
// creates 1,000 files: the subscribers get about one notification per
// coalescing window, not one per event.
func TestFileBurstIsCoalesced(t *testing.T) {
	w := watchedFolder(t, "")
	start := time.Now()
	for i := range 1000 {
		if err := os.WriteFile(w.file, []byte(fmt.Sprint(i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 1000 {
		write(t, w.dir, fmt.Sprintf("notes/burst/%04d.md", i), "x")
	}
	elapsed := time.Since(start)
	c := newClient(t, w.srv, "2025-06-18", `{}`)
	eventually.Within(eventually.Timeout, func() bool { return len(listedNames(t, c)) >= 1001 })
	if n := len(listedNames(t, c)); n != 1001 {
		t.Fatalf("%d files listed after the burst, want 1001", n)
	}
	time.Sleep(3 * catalog.CoalesceWindow) // the last window's notifications
	// One window per CoalesceWindow of the burst, and the window that was
	// open when it ended.
	bound := 2 + int(elapsed/catalog.CoalesceWindow)
	for name, e := range map[string]*events{"legacy": w.legacy, "listen": w.modern} {
		updates, lists := e.count("notifications/resources/updated", w.uri), e.count("notifications/resources/list_changed", "")
		if updates < 1 || updates > bound || lists < 1 || lists > bound {
			t.Errorf("%s: %d updates and %d list changes for a burst of %s, want 1 to %d of each", name, updates, lists, elapsed, bound)
		}
	}
}

func TestFileWatchBudget(t *testing.T) {
	dir, _ := filepath.EvalSymlinks(t.TempDir())
	for _, rel := range []string{"r/a/1.md", "r/b/2.md", "r/c/3.md"} {
		write(t, dir, rel, "x")
	}
	cfg := loadConfig(t, dir, "[resources.r]\npath = \"r\"\nmax_watched_dirs = 2\n")
	h, srv := newHost(t, cfg, catalog.HostOptions{})
	want := "resources.r: more than 2 folders; changes in the others are not announced (max_watched_dirs = 2)"
	if got := h.Warnings(); !slices.Equal(got, []string{want}) {
		t.Errorf("warnings = %q, want %q", got, want)
	}
	// Beyond the budget files are still listed and read.
	if got := listedNames(t, newClient(t, srv, "2025-06-18", `{}`)); len(got) != 3 {
		t.Errorf("listed %q, want all three", got)
	}
	// The status tool says so too.
	status := callTool(t, newClient(t, srv, "2025-11-25", `{}`), t.Context(), "status", nil).text(t)
	if !strings.HasSuffix(status, "\nwarning: "+want) {
		t.Errorf("status = %q, want it to end with the warning", status)
	}
}

// TestReloadStopsWatches: a folder a reload removes is no longer served or
// watched (the leak check of TestMain sees its goroutine end), and a
// changed one is watched under its new settings.
func TestReloadStopsWatches(t *testing.T) {
	w := watchedFolder(t, "")
	cfg := loadConfig(t, w.dir, "")
	if _, err := w.host.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	w.legacy.await(t, noticeWithin, 1, "notifications/resources/list_changed", "")
	if err := os.WriteFile(w.file, []byte("after"), 0o644); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * catalog.CoalesceWindow)
	if n := w.legacy.count("notifications/resources/updated", ""); n != 0 {
		t.Errorf("%d updates from a folder the reload removed", n)
	}
	c := newClient(t, w.srv, "2025-06-18", `{}`)
	if _, perr := c.call(t.Context(), "resources/read", map[string]any{"uri": w.uri}); perr == nil {
		t.Error("a removed folder's file is still served")
	}
}
