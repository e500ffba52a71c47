// Package framing is the NDJSON framing both ends of snodod share: the
// session transport (transport/stdio) reading a client's lines and writing
// its frames, and the MCP client (mcpclient) reading a hosted server's
// stdout and writing its stdin (docs/transport.md §3 and §11).
//
// Reading: a Source fills buffers from a device (pooled while the device
// waits, for a descriptor); a Splitter cuts what it reads into lines of at
// most a limit, holding at most the limit of an unfinished line whatever
// the peer sends, optionally drawing on a Budget shared by many
// connections; a Scanner is a Splitter read on its caller's goroutine.
// Writing: a Writer writes frames whole to a device, trying a non-blocking
// write first and waiting, within a timeout, only for what the device did
// not take at once. A Budget counts, besides its Splitters' unfinished
// lines, the output its callers have committed and not yet written; they
// charge it themselves (stdio's output), so that lines and output share
// one bound.
//
// It lives in the module's internal/ rather than transport/internal/
// because mcpclient, outside transport/, imports it too.
//
// The package knows bytes and lines only: what a line means is protocol's
// (protocol.Decode), and what is done with it the caller's. It never
// closes a device it is given.
package framing
