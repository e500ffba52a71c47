// Package catalog holds what snodod serves besides hosted servers,
// registered through the server package's Go API exactly as user code
// registers its own.
//
//   - Demo, a fixed set of small tools (echo, sleep, big, fail, panic) that
//     exercise the transport from outside, Everything, the conformance
//     fixture, and Status, the daemon's own introspection. Their names and
//     arguments are a public contract: later issues, tests and users rely
//     on them.
//   - The tools, resources and prompts of the configuration's [tools],
//     [resources] and [prompts] entries (docs/config.md): exec tools
//     (exec*.go: a program run in a process group of its own, its argv built
//     from the arguments without a shell), file resources (files*.go: a
//     folder's files, confined to it at every read, watched with fsnotify)
//     and prompt templates (prompts.go).
//
// Host owns the daemon's server across reloads and replaces the configured
// items in place (configured.go), so running sessions are told of the lists
// that changed; Check holds the checks `snodod config check` adds to the
// config package's.
//
// The catalog never does I/O on the session's device and never knows which
// transport serves it.
package catalog
