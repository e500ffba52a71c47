package config

import (
	"strings"
	"testing"
)

// TestUpstreamPinKeys: pin, pin_new and quarantine on an entry, and
// upstreams.pin as the default of entries that set no pin.
func TestUpstreamPinKeys(t *testing.T) {
	c := loadServers(t, `
[upstreams]
pin = true

[mcpServers.a]
command = "a"

[mcpServers.b]
command = "b"
pin = false

[mcpServers.c]
command = "c"
pin_new = "allow"
quarantine = true
`)
	got := map[string]Upstream{}
	for _, u := range c.MCPServers {
		got[u.Name] = u
	}
	if !c.Upstreams.Pin || !got["a"].Pin || got["b"].Pin || !got["c"].Pin {
		t.Errorf("pin: upstreams %t, a %t, b %t, c %t; want true, true, false, true", c.Upstreams.Pin, got["a"].Pin, got["b"].Pin, got["c"].Pin)
	}
	if got["a"].PinNew != "hold" || got["c"].PinNew != "allow" {
		t.Errorf("pin_new: a %q, c %q; want hold, allow", got["a"].PinNew, got["c"].PinNew)
	}
	if got["a"].Quarantine || !got["c"].Quarantine {
		t.Errorf("quarantine: a %t, c %t", got["a"].Quarantine, got["c"].Quarantine)
	}
	lines := serverProblems(t, "[mcpServers.a]\ncommand = \"a\"\npin_new = \"later\"\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "mcpServers.a.pin_new") {
		t.Errorf("a bad pin_new: %q", lines)
	}
}
