package server

import (
	"encoding/json"
	"maps"
	"slices"
)

// This file holds the catalog changes that catalogs built from
// configuration need beyond catalog.go: many resources as one change,
// removing templates, the names registered, and checking a schema before
// registering it.

// ResourceItem is one resource and its handler, for AddResources.
type ResourceItem struct {
	Resource *Resource
	Handler  ResourceHandler
}

// AddResources registers every item, replacing resources with the same
// URIs, as one catalog change: subscribed sessions are told once that the
// resource list changed, rather than once per resource (a folder's files).
// It panics on an item without a URI or a handler, as AddResource does.
func (s *Server) AddResources(items ...ResourceItem) {
	entries := make([]*resourceEntry, len(items))
	for i, it := range items {
		if it.Resource == nil || it.Resource.URI == "" || it.Handler == nil {
			panic("server: AddResources needs resources with a URI and a handler")
		}
		entries[i] = &resourceEntry{resource: *it.Resource, handler: it.Handler}
	}
	s.change(func() {
		for _, e := range entries {
			s.resources[e.resource.URI] = e
		}
	}, change{kind: changeResources})
}

// RemoveResourceTemplates removes the templates with these URI templates,
// and their completions.
func (s *Server) RemoveResourceTemplates(uriTemplates ...string) {
	s.change(func() {
		for _, t := range uriTemplates {
			delete(s.templates, t)
		}
	}, change{kind: changeResources})
}

// ToolNames returns the names of the registered tools, sorted.
func (s *Server) ToolNames() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Sorted(maps.Keys(s.tools))
}

// ResourceCount returns how many resources and resource templates are
// registered.
func (s *Server) ResourceCount() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.resources) + len(s.templates)
}

// PromptNames returns the names of the registered prompts, sorted.
func (s *Server) PromptNames() []string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Sorted(maps.Keys(s.prompts))
}

// CheckSchema reports why AddTool would refuse raw as a tool's input or
// output schema, or nil: catalogs built from configuration check their
// schemas this way before registering anything, so a bad one is a
// configuration problem rather than a panic.
func CheckSchema(raw json.RawMessage) error {
	_, err := compileSchema(raw)
	return err
}
