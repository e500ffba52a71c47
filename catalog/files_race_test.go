package catalog_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/snodod/snodod/catalog"
	"github.com/snodod/snodod/protocol"
)

// TestFileSwappedForSymlink: a file listed as a regular file and then
// replaced by a symlink out of the folder is refused when read, and a
// file swapped back and forth between the two while it is read many times
// over (through its listed URI and through the template) is served only
// as the folder's own file, or refused: the check and the open are one
// openat2, so no swap can fall between them.
func TestFileSwappedForSymlink(t *testing.T) {
	tr := newTree(t)
	write(t, tr.notes, "swap.txt", "inside")
	cfg := loadConfig(t, tr.base, "[resources.notes]\npath = \"notes\"\n")
	_, srv := newHost(t, cfg, catalog.HostOptions{})
	c := newClient(t, srv, "2025-11-25", `{}`)

	list := result[struct{ Resources []listedResource }](t, c, t.Context(), "resources/list", nil)
	listed := false
	for _, r := range list.Resources {
		listed = listed || r.URI == tr.uri("swap.txt")
	}
	if !listed {
		t.Fatalf("swap.txt is not listed: %+v", list.Resources)
	}
	swap, regular, link := filepath.Join(tr.notes, "swap.txt"), filepath.Join(tr.base, "regular"), filepath.Join(tr.base, "link")
	if err := os.Symlink(filepath.Join(tr.base, "secret.txt"), link); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(link, swap); err != nil {
		t.Fatal(err)
	}
	_, perr := c.call(t.Context(), "resources/read", map[string]any{"uri": tr.uri("swap.txt")})
	if perr == nil || perr.Code != protocol.CodeInvalidParams || !strings.Contains(perr.Message, "a symlink leads outside") {
		t.Fatalf("read after the swap: %+v, want the symlink refused", perr)
	}

	// Swap it back and forth while reading, the links through each of
	// the ways out: relative, absolute, through the parent.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		targets := []string{"../secret.txt", filepath.Join(tr.base, "secret.txt"), "link-dir/secret.txt"}
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			_ = os.WriteFile(regular, []byte("inside"), 0o644)
			_ = os.Rename(regular, swap)
			_ = os.Symlink(targets[i%len(targets)], link)
			_ = os.Rename(link, swap)
		}
	}()
	served, refused := [2]int{}, 0
	for i := range 2000 {
		uri := tr.uri("swap.txt")
		if i%2 == 1 {
			uri = tr.uri("./swap.txt") // not a listed URI: the template serves it
		}
		raw, perr := c.call(t.Context(), "resources/read", map[string]any{"uri": uri})
		switch {
		case perr != nil:
			if perr.Code != protocol.CodeInvalidParams && perr.Code != protocol.CodeResourceNotFound {
				t.Fatalf("read %d: error %d %q", i, perr.Code, perr.Message)
			}
			refused++
		case strings.Contains(string(raw), "the secret"):
			t.Fatalf("read %d served the file outside the folder: %s", i, raw)
		case !strings.Contains(string(raw), `"text":"inside"`) && !strings.Contains(string(raw), `"text":""`):
			t.Fatalf("read %d: %s", i, raw)
		default:
			served[i%2]++
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("%d reads served the folder's file (%d through the template), %d were refused", served[0]+served[1], served[1], refused)
	if served[1] == 0 {
		t.Error("no read through the template was served: the test did not exercise it")
	}
}
