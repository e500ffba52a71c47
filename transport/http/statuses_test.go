package http_test

import (
	"maps"
	"testing"

	"github.com/snodod/snodod/internal/eventually"
)

// Stats.Statuses counts each response by its status once it has ended:
// a result (200), a refused Content-Type (415), an unknown path (404).
func TestStatusesCounted(t *testing.T) {
	e := newEnv(t, nil)
	if r := e.call(t, "1", "tools/list", "", ""); r.status != 200 {
		t.Fatalf("tools/list: %d %s", r.status, r.body)
	}
	if r := post(t, e.url, hdr("Content-Type", "text/plain"), "{}"); r.status != 415 {
		t.Fatalf("text/plain: %d %s", r.status, r.body)
	}
	if r := post(t, e.url+"/nowhere", hdr("Content-Type", "application/json"), "{}"); r.status != 404 {
		t.Fatalf("unknown path: %d %s", r.status, r.body)
	}
	want := map[int]uint64{200: 1, 404: 1, 415: 1}
	eventually.True(t, "the three responses counted", func() bool { return maps.Equal(e.handler.Stats().Statuses, want) })
}
