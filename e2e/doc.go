// Package e2e holds black-box tests of the built snodod binary: the
// official MCP clients (the Go SDK, and the TypeScript SDK through Node)
// drive `snodod stdio --demo` over its standard input and output, at every
// protocol version each client speaks. The tests build the binary once,
// with the race detector, in TestMain; the package has no other code.
package e2e
