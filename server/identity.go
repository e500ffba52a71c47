package server

import (
	"encoding/json"

	"github.com/snodod/snodod/protocol"
)

// identity is what a server says about itself: serverInfo, instructions,
// and each version's {"io.modelcontextprotocol/serverInfo":…} _meta,
// encoded once because every 2026 result carries it (a json.RawMessage,
// kept boxed so that a result takes one without an allocation), with the
// serverInfo inside it, which a relayed result's _meta is given. It is
// immutable; a change swaps the whole value.
type identity struct {
	info         protocol.Implementation
	instructions string
	infoMeta     map[string]any
	infoJSON     map[string]json.RawMessage // each version's serverInfo
}

func (s *Server) identity() *identity { return s.ident.Load() }

// setIdentity replaces the identity, encoding the _meta of every enabled
// version from info.
func (s *Server) setIdentity(info protocol.Implementation, instructions string) error {
	id := &identity{info: info, instructions: instructions, infoMeta: map[string]any{}, infoJSON: map[string]json.RawMessage{}}
	for _, v := range s.versions.All() {
		projected, err := protocol.AppendValue(nil, projectInfo(info, v))
		if err != nil {
			return err
		}
		id.infoJSON[v] = projected
		id.infoMeta[v] = json.RawMessage(protocol.SetMember(nil, protocol.MetaServerInfo, projected))
	}
	s.ident.Store(id)
	return nil
}

// SetInfo replaces serverInfo; an empty Name or Version keeps the current
// one. Sessions see it in their next initialize or 2026 result. A view
// that relays another server (a pass-through of a hosted upstream) sets
// that server's once it is known.
func (s *Server) SetInfo(info protocol.Implementation) {
	cur := s.identity()
	if info.Name == "" {
		info.Name = cur.info.Name
	}
	if info.Version == "" {
		info.Version = cur.info.Version
	}
	if err := s.setIdentity(info, cur.instructions); err != nil {
		s.log.Error("server info cannot be encoded; the previous one stays", "err", err)
	}
}

// Instructions returns the instructions initialize and server/discover
// send now.
func (s *Server) Instructions() string { return s.identity().instructions }

// SetInstructions replaces the instructions sent by initialize and
// server/discover.
func (s *Server) SetInstructions(instructions string) {
	id := *s.identity()
	id.instructions = instructions
	s.ident.Store(&id)
}

// Advertise adds capabilities to those the catalog implies (a tool makes
// "tools", and so on), replacing what an earlier call added: a view of
// servers that are not running yet advertises what they will serve, so
// legacy clients, which read capabilities once, find it later. The
// listChanged flags follow the capabilities they belong to.
func (s *Server) Advertise(c protocol.ServerCapabilities) {
	s.mu.Lock()
	s.ext.advertised = c
	s.updateCapabilitiesLocked()
	s.mu.Unlock()
}

func orCapabilities(a, b protocol.ServerCapabilities) protocol.ServerCapabilities {
	a.Tools, a.Prompts, a.Resources = a.Tools || b.Tools, a.Prompts || b.Prompts, a.Resources || b.Resources
	a.Completions = a.Completions || b.Completions
	a.ResourcesSubscribe = a.ResourcesSubscribe || b.ResourcesSubscribe
	a.ToolsListChanged, a.PromptsListChanged, a.ResourcesListChanged = a.Tools, a.Prompts, a.Resources
	return a
}
