package protocol

import "strings"

// Era is the dialect family a request is served under (docs/protocol.md §1.2):
// Legacy for 2025-11-25 and 2025-06-18, Modern for 2026-07-28.
type Era uint8

const (
	// Legacy is the era of requests without the 2026 version key: served
	// under the version negotiated by initialize.
	Legacy Era = iota
	// Modern is the era of requests whose params._meta holds
	// io.modelcontextprotocol/protocolVersion: served statelessly.
	Modern
)

// Which era serves each request method (docs/protocol.md §3.1). Methods absent
// from the table, the tasks/* family included, are served by neither.
const (
	inLegacy = 1 << Legacy
	inModern = 1 << Modern
	inBoth   = inLegacy | inModern
)

// requestMethods are the methods erasOf knows, for the decoder's table of
// shared method strings.
var requestMethods = [...]string{
	"initialize", "ping", "server/discover",
	"tools/list", "tools/call",
	"resources/list", "resources/templates/list", "resources/read", "resources/subscribe", "resources/unsubscribe",
	"prompts/list", "prompts/get", "completion/complete", "logging/setLevel", "subscriptions/listen",
}

// methodNotFound is -32601 "Method not found: <method>" (docs/protocol.md §3.2).
func methodNotFound(method string) *Error {
	return &Error{Code: CodeMethodNotFound, Message: "Method not found: " + method}
}

// Availability applies docs/protocol.md §3.2 to a request (a message with an id)
// for method in era, before capability gating (Gate). In order:
//
//   - any "notifications/…" method: -32600 "<method> must be a
//     notification, received request";
//   - sampling/createMessage, elicitation/create and roots/list, which only
//     a server may send: in Legacy -32600 "Method is not available in this
//     direction", in Modern -32600 "<method> is only valid as an embedded
//     MRTR input request";
//   - a method the era does not define (the §3.1 table: initialize, ping,
//     logging/setLevel, resources/subscribe and resources/unsubscribe are
//     legacy-only; server/discover and subscriptions/listen 2026-only;
//     tasks/* in neither) or an unknown one: -32601 "Method not found:
//     <method>".
//
// It returns nil when the era serves method.
func Availability(era Era, method string) *Error {
	if strings.HasPrefix(method, "notifications/") {
		return &Error{Code: CodeInvalidRequest, Message: method + " must be a notification, received request"}
	}
	switch method {
	case "sampling/createMessage", "elicitation/create", "roots/list":
		if era == Modern {
			return &Error{Code: CodeInvalidRequest, Message: method + " is only valid as an embedded MRTR input request"}
		}
		return &Error{Code: CodeInvalidRequest, Message: "Method is not available in this direction"}
	}
	if era > Modern || erasOf(method)&(1<<era) == 0 {
		return methodNotFound(method)
	}
	return nil
}

// erasOf says which eras serve method (the table of docs/protocol.md §3.1),
// by a switch: every request asks, and a switch on the string costs less
// than hashing it. Methods it does not list, the tasks/* family included,
// are served by neither.
func erasOf(method string) uint8 {
	switch method {
	case "tools/call", "tools/list", "resources/read", "resources/list", "resources/templates/list",
		"prompts/get", "prompts/list", "completion/complete":
		return inBoth
	case "ping", "initialize", "resources/subscribe", "resources/unsubscribe", "logging/setLevel":
		return inLegacy
	case "server/discover", "subscriptions/listen":
		return inModern
	}
	return 0
}

// ServerCapabilities is what the server advertises, as far as gating needs
// it (docs/protocol.md §3.3, §3.4): Tools, Prompts, Resources and Completions
// for the presence of each capability, the ListChanged flags and
// ResourcesSubscribe for tools.listChanged, prompts.listChanged,
// resources.listChanged and resources.subscribe.
type ServerCapabilities struct {
	Tools                bool
	Prompts              bool
	Resources            bool
	Completions          bool
	ResourcesSubscribe   bool
	ToolsListChanged     bool
	PromptsListChanged   bool
	ResourcesListChanged bool
}

// Gate applies the capability gating of docs/protocol.md §3.3 to a method that
// Availability accepted: -32601 "Method not found: <method>" when the
// capability the method needs is not advertised in caps, nil otherwise.
//
//   - tools/list, tools/call need Tools;
//   - prompts/list, prompts/get need Prompts;
//   - resources/list, resources/templates/list, resources/read need
//     Resources;
//   - resources/subscribe, resources/unsubscribe need ResourcesSubscribe;
//   - completion/complete needs Completions;
//   - subscriptions/listen needs any of ToolsListChanged,
//     PromptsListChanged, ResourcesListChanged or ResourcesSubscribe;
//   - every other method (ping, logging/setLevel, server/discover,
//     initialize) needs nothing.
func Gate(method string, caps ServerCapabilities) *Error {
	var advertised bool
	switch method {
	case "tools/list", "tools/call":
		advertised = caps.Tools
	case "prompts/list", "prompts/get":
		advertised = caps.Prompts
	case "resources/list", "resources/templates/list", "resources/read":
		advertised = caps.Resources
	case "resources/subscribe", "resources/unsubscribe":
		advertised = caps.ResourcesSubscribe
	case "completion/complete":
		advertised = caps.Completions
	case "subscriptions/listen":
		advertised = caps.ToolsListChanged || caps.PromptsListChanged ||
			caps.ResourcesListChanged || caps.ResourcesSubscribe
	default:
		return nil
	}
	if !advertised {
		return methodNotFound(method)
	}
	return nil
}
