package wire

import (
	"strconv"
	"strings"
)

// The protocol versions the harness measures.
const (
	V20250618 = "2025-06-18"
	V20260728 = "2026-07-28"
)

// Dialect writes the request lines of one protocol version. 2025-06-18
// requests are plain JSON-RPC after an initialize handshake; 2026-07-28
// requests carry the version and the client's capabilities in
// params._meta and need no handshake.
type Dialect struct {
	Version string
}

// Stateless reports whether the version needs no initialize handshake.
func (d Dialect) Stateless() bool { return d.Version >= V20260728 }

// Initialize is the initialize request (id 0) and the initialized
// notification that follows its answer.
func (d Dialect) Initialize() (request, initialized []byte) {
	return []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"` + d.Version +
			`","capabilities":{},"clientInfo":{"name":"mcpbench","version":"1"}}}` + "\n"),
		[]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
}

// Call appends a tools/call request line (newline included) for tool with
// the raw JSON object args to dst.
func (d Dialect) Call(dst []byte, id int64, tool, args string) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	dst = strconv.AppendInt(dst, id, 10)
	dst = append(dst, `,"method":"tools/call","params":{"name":"`...)
	dst = append(dst, tool...)
	dst = append(dst, `","arguments":`...)
	dst = append(dst, args...)
	if d.Stateless() {
		dst = append(dst, `,"_meta":{"io.modelcontextprotocol/protocolVersion":"`...)
		dst = append(dst, d.Version...)
		dst = append(dst, `","io.modelcontextprotocol/clientCapabilities":{}}`...)
	}
	return append(dst, "}}\n"...)
}

// Echo appends an echo call whose text is EchoText(id).
func (d Dialect) Echo(dst []byte, id int64) []byte {
	return d.Call(dst, id, "echo", `{"text":"`+EchoText(id)+`"}`)
}

// EchoText is the text the harness sends in echo call id: unique per call,
// so that an answer given to the wrong request shows.
func EchoText(id int64) string { return "bench-" + strconv.FormatInt(id, 10) }

// EchoOf appends an echo call whose text is n bytes of plain ASCII (no
// escaping), for the large-request measurements.
func (d Dialect) EchoOf(dst []byte, id int64, n int) []byte {
	return d.Call(dst, id, "echo", `{"text":"`+strings.Repeat("y", n)+`"}`)
}

// Cancel is the notifications/cancelled line for request id.
func Cancel(id int64) []byte {
	return []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":` +
		strconv.FormatInt(id, 10) + `,"reason":"mcpbench"}}` + "\n")
}
