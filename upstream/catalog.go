package upstream

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"time"

	"github.com/snodod/snodod/mcpclient"
	"github.com/snodod/snodod/protocol"
)

// catalog is what an upstream serves, as its last listing found it (all
// pages), with what its handshake said; it is also the on-disk cache's
// content (cache.go). It is immutable once made.
type catalog struct {
	Era          string            `json:"era"`
	Version      string            `json:"version"`
	ServerInfo   json.RawMessage   `json:"serverInfo,omitempty"`
	Capabilities json.RawMessage   `json:"capabilities,omitempty"`
	Instructions string            `json:"instructions,omitempty"`
	Tools        []json.RawMessage `json:"tools"`
	Prompts      []json.RawMessage `json:"prompts"`
	Resources    []json.RawMessage `json:"resources"`
	Templates    []json.RawMessage `json:"resourceTemplates"`
	// Truncated says which lists were cut at List's bounds, one sentence
	// each ("tools/list has more than 10000 items"), for status.
	Truncated []string  `json:"truncated,omitempty"`
	Listed    time.Time `json:"listed"`
}

// The list methods, by kind.
var listMethods = []struct {
	method, capability string
	field              func(*catalog) *[]json.RawMessage
}{
	{"tools/list", "tools", func(c *catalog) *[]json.RawMessage { return &c.Tools }},
	{"prompts/list", "prompts", func(c *catalog) *[]json.RawMessage { return &c.Prompts }},
	{"resources/list", "resources", func(c *catalog) *[]json.RawMessage { return &c.Resources }},
	{"resources/templates/list", "resources", func(c *catalog) *[]json.RawMessage { return &c.Templates }},
}

// listCatalog lists everything the upstream declares (every page), log
// receiving the tools left out (validParamHeaders). A list
// the upstream refuses with an error response is empty (it declared the
// capability and serves nothing); an exit or a timeout fails the listing.
func listCatalog(ctx context.Context, conn *mcpclient.Conn, log *slog.Logger) (*catalog, error) {
	cat := &catalog{Era: conn.Era(), Version: conn.Version(), ServerInfo: conn.ServerInfo(),
		Capabilities: conn.Capabilities(), Instructions: conn.Instructions(), Listed: time.Now()}
	caps := parseCapabilities(cat.Capabilities)
	for _, lm := range listMethods {
		if !caps.has(lm.capability) {
			continue
		}
		items, cut, err := listBounded(ctx, conn, lm.method, log)
		var perr *protocol.Error
		if errors.As(err, &perr) {
			items, err = nil, nil
		}
		if err != nil {
			return nil, err
		}
		*lm.field(cat) = items
		if cut != "" {
			cat.Truncated = append(cat.Truncated, cut)
		}
	}
	return cat, nil
}

// relist replaces one kind of cat's items with a fresh listing.
func relist(ctx context.Context, conn *mcpclient.Conn, cat *catalog, method string, log *slog.Logger) (*catalog, error) {
	items, cut, err := listBounded(ctx, conn, method, log)
	if err != nil {
		return nil, err
	}
	next := *cat
	next.Listed = time.Now()
	next.Truncated = nil
	for _, t := range cat.Truncated {
		if !strings.HasPrefix(t, method+" ") {
			next.Truncated = append(next.Truncated, t)
		}
	}
	if cut != "" {
		next.Truncated = append(next.Truncated, cut)
	}
	for _, lm := range listMethods {
		if lm.method == method {
			*lm.field(&next) = items
		}
	}
	return &next, nil
}

// listBounded is conn.List with a cut list kept: its items, and cut
// saying why it was cut ("" when it was not).
func listBounded(ctx context.Context, conn *mcpclient.Conn, method string, log *slog.Logger) (items []json.RawMessage, cut string, err error) {
	items, err = conn.List(ctx, method)
	var lc *mcpclient.ListCutError
	if errors.As(err, &lc) {
		cut, err = lc.Reason+"; the rest is not served", nil
	}
	if method == "tools/list" && conn.Era() == mcpclient.Era2026 {
		items = validParamHeaders(items, log)
	}
	return items, cut, err
}

// validParamHeaders leaves out of a 2026 upstream's tools those whose
// x-mcp-header annotations break the rules (SEP-2243: a client omits
// them, with a warning), so that no client of snodod sees them.
func validParamHeaders(tools []json.RawMessage, log *slog.Logger) []json.RawMessage {
	kept := tools[:0:0]
	for _, t := range tools {
		var tool struct {
			Name        string          `json:"name"`
			InputSchema json.RawMessage `json:"inputSchema"`
		}
		_ = json.Unmarshal(t, &tool)
		if err := mcpclient.CheckParamHeaders(tool.InputSchema); err != nil {
			log.Warn("tool left out: its x-mcp-header annotations are invalid", "tool", tool.Name, "reason", err.Error())
			continue
		}
		kept = append(kept, t)
	}
	return kept
}

// capabilities is an upstream's capabilities object, as far as views need it.
type capabilities struct {
	Tools     *listChanged `json:"tools"`
	Prompts   *listChanged `json:"prompts"`
	Resources *struct {
		listChanged
		Subscribe bool `json:"subscribe"`
	} `json:"resources"`
	Completions *struct{} `json:"completions"`
	Logging     *struct{} `json:"logging"`
}

type listChanged struct {
	ListChanged bool `json:"listChanged"`
}

func parseCapabilities(raw json.RawMessage) capabilities {
	var c capabilities
	_ = json.Unmarshal(raw, &c) // not an object: nothing declared
	return c
}

func (c capabilities) has(name string) bool {
	switch name {
	case "tools":
		return c.Tools != nil
	case "prompts":
		return c.Prompts != nil
	case "resources":
		return c.Resources != nil
	}
	return false
}

// itemKey reads an item's name (tools, prompts), uri (resources) or
// uriTemplate (templates).
func itemKey(item json.RawMessage, member string) (string, bool) {
	m, ok := protocol.Members(item)
	if !ok {
		return "", false
	}
	s, ok := protocol.String(m[member])
	return s, ok && s != ""
}
