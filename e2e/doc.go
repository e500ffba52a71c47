// Package e2e holds black-box tests of the built snodod binary. The
// official MCP clients (the Go SDK, and the TypeScript SDK through Node)
// drive `snodod stdio --demo` and `snodod connect` at every protocol
// version each client speaks; the daemon tests run `snodod serve` and
// reach it over its session socket, handed-over pipes and a pty, with
// restarts, slow readers, reloads, drains and crashes. The tests build the
// binary once, with the race detector, in TestMain; the package has no
// other code.
package e2e
