package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync"
)

// -tools-file PATH: more tools, their definitions as a JSON array in the
// file, read once at start and listed after the others; a call to one
// echoes as echo does. A test rewrites the file and restarts the server
// to make it change what its tools say (docs/views.md, "Pinned
// definitions": a server whose description changes after a restart).

var toolsFile = flag.String("tools-file", "", "a JSON array of more tool definitions, read at start")

var fileTools = sync.OnceValue(func() []map[string]any {
	if *toolsFile == "" {
		return nil
	}
	b, err := os.ReadFile(*toolsFile)
	var tools []map[string]any
	if err == nil {
		err = json.Unmarshal(b, &tools)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tools-file:", err)
		os.Exit(2)
	}
	return tools
})

// fileTool reports whether name is one of the file's tools.
func fileTool(name string) bool {
	for _, t := range fileTools() {
		if t["name"] == name {
			return true
		}
	}
	return false
}
