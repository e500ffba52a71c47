package upstream

import (
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/snodod/snodod/internal/syncbuf"
)

// A 2026 upstream's tool whose x-mcp-header annotations break SEP-2243's
// rules is left out of its catalog, with a warning naming it; the others
// are kept as they were listed, in order.
func TestValidParamHeaders(t *testing.T) {
	tools := []json.RawMessage{
		json.RawMessage(`{"name":"plain","inputSchema":{"type":"object"}}`),
		json.RawMessage(`{"name":"bad","inputSchema":{"type":"object","properties":{"where":{"type":"object","x-mcp-header":"Where"}}}}`),
		json.RawMessage(`{"name":"region","inputSchema":{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"}}}}`),
	}
	var logged syncbuf.Buffer
	kept := validParamHeaders(tools, slog.New(slog.NewTextHandler(&logged, nil)))
	if len(kept) != 2 || string(kept[0]) != string(tools[0]) || string(kept[1]) != string(tools[2]) {
		t.Errorf("kept %s", kept)
	}
	if log := logged.String(); !strings.Contains(log, "tool=bad") || !strings.Contains(log, "x-mcp-header") {
		t.Errorf("the log: %s", log)
	}
}
