package protocol

import "testing"

// TestAvailability covers docs/protocol.md §3.1, §3.2 and cases 6, 22 and 27.
func TestAvailability(t *testing.T) {
	const (
		served = iota
		notFound
		notification
		direction
		embedded
	)
	tests := []struct {
		method         string
		legacy, modern int
	}{
		{"initialize", served, notFound},
		{"ping", served, notFound},
		{"server/discover", notFound, served},
		{"tools/list", served, served},
		{"tools/call", served, served},
		{"resources/list", served, served},
		{"resources/templates/list", served, served},
		{"resources/read", served, served},
		{"resources/subscribe", served, notFound},
		{"resources/unsubscribe", served, notFound},
		{"prompts/list", served, served},
		{"prompts/get", served, served},
		{"completion/complete", served, served},
		{"logging/setLevel", served, notFound},
		{"subscriptions/listen", notFound, served},
		{"tasks/get", notFound, notFound},
		{"tasks/result", notFound, notFound},
		{"tasks/list", notFound, notFound},
		{"tasks/cancel", notFound, notFound},
		{"tasks/update", notFound, notFound},
		{"foo/bar", notFound, notFound},
		{"acme/missing", notFound, notFound},
		{"", notFound, notFound},
		{"Tools/list", notFound, notFound},
		{"tools/list ", notFound, notFound},
		{"notifications", notFound, notFound},
		{"notifications/initialized", notification, notification},
		{"notifications/cancelled", notification, notification},
		{"notifications/progress", notification, notification},
		{"notifications/acme", notification, notification},
		{"notifications/", notification, notification},
		{"sampling/createMessage", direction, embedded},
		{"elicitation/create", direction, embedded},
		{"roots/list", direction, embedded},
	}
	for _, tt := range tests {
		for _, era := range []Era{Legacy, Modern} {
			want := tt.legacy
			if era == Modern {
				want = tt.modern
			}
			var code int64
			var message string
			switch want {
			case notFound:
				code, message = CodeMethodNotFound, "Method not found: "+tt.method
			case notification:
				code, message = CodeInvalidRequest, tt.method+" must be a notification, received request"
			case direction:
				code, message = CodeInvalidRequest, "Method is not available in this direction"
			case embedded:
				code, message = CodeInvalidRequest, tt.method+" is only valid as an embedded MRTR input request"
			}
			if want == served {
				if got := Availability(era, tt.method); got != nil {
					t.Errorf("Availability(%d, %q) = %s, want nil", era, tt.method, errorText(got))
				}
				continue
			}
			checkError(t, "Availability("+tt.method+")", Availability(era, tt.method), code, message)
		}
	}
	// Exact lines of cases 6 and 27.
	for _, tc := range []struct {
		era    Era
		method string
		want   string
	}{
		{Legacy, "foo/bar", `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found: foo/bar"}}`},
		{Legacy, "notifications/initialized", `{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"notifications/initialized must be a notification, received request"}}`},
		{Legacy, "sampling/createMessage", `{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Method is not available in this direction"}}`},
		{Modern, "elicitation/create", `{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"elicitation/create is only valid as an embedded MRTR input request"}}`},
		{Modern, "initialize", `{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found: initialize"}}`},
	} {
		if got := string(AppendError(nil, IntID(1), Availability(tc.era, tc.method))); got != tc.want+"\n" {
			t.Errorf("line for %q\n got %s\nwant %s", tc.method, got, tc.want)
		}
	}
	// An era outside the two serves nothing.
	checkError(t, "Availability(Era(2))", Availability(Era(2), "tools/list"), CodeMethodNotFound, "Method not found: tools/list")
}

// TestGate covers docs/protocol.md §3.3 and cases 13, 19, 28 and 39.
func TestGate(t *testing.T) {
	all := ServerCapabilities{
		Tools: true, Prompts: true, Resources: true, Completions: true, ResourcesSubscribe: true,
		ToolsListChanged: true, PromptsListChanged: true, ResourcesListChanged: true,
	}
	methods := []string{
		"initialize", "ping", "server/discover", "logging/setLevel", "tools/list", "tools/call",
		"prompts/list", "prompts/get", "resources/list", "resources/templates/list", "resources/read",
		"resources/subscribe", "resources/unsubscribe", "completion/complete", "subscriptions/listen",
		"acme/missing",
	}
	for _, method := range methods {
		if err := Gate(method, all); err != nil {
			t.Errorf("Gate(%q, all) = %s, want nil", method, errorText(err))
		}
	}
	ungated := map[string]bool{"initialize": true, "ping": true, "server/discover": true, "logging/setLevel": true, "acme/missing": true}
	for _, method := range methods {
		want := "Method not found: " + method
		if ungated[method] {
			want = ""
		}
		checkError(t, "Gate("+method+", none)", Gate(method, ServerCapabilities{}), CodeMethodNotFound, want)
	}

	tests := []struct {
		method string
		caps   ServerCapabilities
		served bool
	}{
		{"tools/list", ServerCapabilities{Tools: true}, true},
		{"tools/call", ServerCapabilities{Prompts: true, Resources: true, ToolsListChanged: true}, false}, // case 19: no tools
		{"prompts/get", ServerCapabilities{Prompts: true}, true},
		{"prompts/list", ServerCapabilities{Tools: true}, false},
		{"resources/read", ServerCapabilities{Resources: true}, true},
		{"resources/templates/list", ServerCapabilities{ResourcesSubscribe: true}, false},
		{"resources/subscribe", ServerCapabilities{Resources: true, ResourcesListChanged: true}, false}, // case 13
		{"resources/unsubscribe", ServerCapabilities{Resources: true, ResourcesSubscribe: true}, true},
		{"completion/complete", ServerCapabilities{Completions: true}, true},
		{"completion/complete", ServerCapabilities{Prompts: true}, false},
		{"subscriptions/listen", ServerCapabilities{ToolsListChanged: true}, true},
		{"subscriptions/listen", ServerCapabilities{PromptsListChanged: true}, true},
		{"subscriptions/listen", ServerCapabilities{ResourcesListChanged: true}, true},
		{"subscriptions/listen", ServerCapabilities{ResourcesSubscribe: true}, true},
		{"subscriptions/listen", ServerCapabilities{Tools: true, Prompts: true, Resources: true, Completions: true}, false}, // case 39
	}
	for _, tt := range tests {
		want := "Method not found: " + tt.method
		if tt.served {
			want = ""
		}
		checkError(t, "Gate("+tt.method+")", Gate(tt.method, tt.caps), CodeMethodNotFound, want)
	}
}

// The decoder's shared method strings are exactly the methods some era
// serves.
func TestRequestMethodsHaveEras(t *testing.T) {
	for _, m := range requestMethods {
		if erasOf(m) == 0 {
			t.Errorf("%s is listed but served by no era", m)
		}
	}
	for _, m := range []string{"tasks/get", "notifications/initialized", "", "Tools/call"} {
		if erasOf(m) != 0 {
			t.Errorf("%s is served by an era", m)
		}
	}
}
