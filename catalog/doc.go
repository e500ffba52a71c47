// Package catalog holds the tools snodod serves out of the box, registered
// through the server package's Go API exactly as user code registers its
// own.
//
// For now it has two catalogs: Demo, a fixed set of small tools (echo,
// sleep, big, fail, panic) that exercise the transport from outside, and
// Status, the daemon's own introspection. Their names and arguments are a
// public contract: later issues, tests and users rely on them.
//
// Tools built from configuration (exec tools, file resources, prompt
// templates) come with the config package. The catalog never does I/O on
// the session's device and never knows which transport serves it.
package catalog
