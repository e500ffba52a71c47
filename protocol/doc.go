// Package protocol holds the wire format of snodod's MCP sessions: JSON-RPC
// 2.0 envelopes, bounded request ids, the strict line decoder and classifier
// (docs/transport.md §4 and §5), the frame encoder (§11.1), and the error codes
// and fixed error objects the transport writes (§6); and the rules of the
// three MCP versions both ends share: the version table and negotiation
// (versions.go, docs/protocol.md §1 and §2), method availability and
// capability gating per era (methods.go, §3), the 2026 _meta checks
// (meta.go, §5), the params the runtime reads before dispatch (params.go),
// serverInfo and clientInfo (Implementation), and the answers of requests a
// daemon restart interrupted (restart.go).
//
// Everything here is a pure function of its arguments. The package never
// does I/O, never starts a goroutine and never keeps per-connection state.
// What Decode returns aliases the line it was given, which then belongs to
// the message (the transport's lines are its own); the Append functions
// only append to the slice they are given. It imports the standard library
// only.
//
// Decode is the one place a line's bytes are judged, at both ends of a
// connection (DecodeFromServer is its client mode). It is stricter than
// encoding/json (duplicate member names, integer length, finiteness, nesting
// and UTF-8 are all checked in one pass), so that Message.Params may then be
// decoded with encoding/json by handlers without surprises. The same pass
// splits params, params._meta and params.arguments into members (Split)
// and applies the era rule, so that no later step splits them again. A
// compact line takes a fast path (fast.go) that only ever accepts, and
// only what the strict pass accepts, with the same parts: every other
// line, and every refusal, is the strict pass's (FuzzFastPath checks it).
package protocol
