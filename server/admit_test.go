package server

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/snodod/snodod/protocol"
)

func allVersions(t *testing.T) protocol.Versions {
	t.Helper()
	v, err := protocol.ParseVersions(nil)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func splitOf(t *testing.T, params string) *protocol.Split {
	t.Helper()
	var raw json.RawMessage
	if params != "" {
		raw = json.RawMessage(params)
	}
	s, ok := protocol.SplitParams(raw)
	if !ok {
		t.Fatalf("params %s do not split", params)
	}
	return &s
}

// AdmitModern runs docs/protocol.md §5.2 steps 2 to 8 in their order, the
// transport's step 6 between steps 5 and 7, and refuses each step as the
// runtime's Dispatch does for a request it admits itself (stdio's).
func TestAdmitModernSteps(t *testing.T) {
	const caps = `"io.modelcontextprotocol/clientCapabilities":{}`
	errHeader := &protocol.Error{Code: protocol.CodeHeaderMismatch, Message: "step 6"}
	for _, tt := range []struct {
		name, params string
		checked      bool   // step 6 runs
		want         string // the refusal's message, "" for none
	}{
		{"no _meta", `{}`, false, "Required request _meta is missing"},
		{"no params", ``, false, "Required request _meta is missing"},
		{"_meta not an object", `{"_meta":[]}`, false, "_meta must be an object"},
		{"step 3", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` + caps + `,"bad key":1}}`, false, "_meta contains an invalid key or non-JSON value"},
		{"step 4", `{"_meta":{` + caps + `}}`, false, "Missing required io.modelcontextprotocol/protocolVersion metadata"},
		{"step 5", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, false, "Missing required io.modelcontextprotocol/clientCapabilities metadata"},
		{"step 7", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"1900-01-01",` + caps + `}}`, true, "Unsupported protocol version"},
		{"step 8", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` + caps + `,"io.modelcontextprotocol/logLevel":"loud"}}`, true, "Invalid MCP request log level"},
		{"admitted", `{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` + caps + `}}`, true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			split := splitOf(t, tt.params)
			var checked []string
			a, aerr := AdmitModern(split, allVersions(t), func(version string) *protocol.Error {
				checked = append(checked, version)
				return nil
			})
			if got := len(checked) == 1; got != tt.checked {
				t.Errorf("step 6 ran %d times, want it to run: %v", len(checked), tt.checked)
			}
			switch {
			case tt.want == "" && aerr != nil:
				t.Fatalf("refused: %v", aerr)
			case tt.want == "":
				if a == nil || a.meta.ProtocolVersion != protocol.Version2026 {
					t.Fatalf("admission %+v", a)
				}
				return
			case aerr == nil || aerr.Err.Message != tt.want:
				t.Fatalf("refusal %v, want %q", aerr, tt.want)
			}
			if tt.checked {
				// Step 6 comes before step 7: its refusal wins.
				_, aerr := AdmitModern(split, allVersions(t), func(string) *protocol.Error { return errHeader })
				if aerr == nil || aerr.Err != errHeader {
					t.Errorf("with step 6 refusing: %v", aerr)
				}
			}
			if !split.Modern {
				return // HTTP routes these by header; the runtime never sees them as 2026
			}
			// The runtime refuses alike what it admits itself.
			s, err := New(Options{})
			if err != nil {
				t.Fatal(err)
			}
			o := s.Dispatch(context.Background(), &Request{ID: protocol.IntID(1), Method: "ping", Params: json.RawMessage(tt.params), Split: split})
			if o.Err == nil || o.Err.Message != tt.want {
				t.Errorf("Dispatch answered %+v, want %q", o, tt.want)
			}
		})
	}
}

// A request admitted before the executor is not checked again: Dispatch
// takes its metadata from the Admission, unless the Server enables other
// versions than the admission checked against, when it checks again.
func TestDispatchTakesTheAdmission(t *testing.T) {
	const meta = `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
	admitted := splitOf(t, `{"_meta":{`+meta+`,"io.modelcontextprotocol/clientInfo":{"name":"admitted","version":"1"}}}`)
	a, aerr := AdmitModern(admitted, allVersions(t), nil)
	if aerr != nil {
		t.Fatal(aerr)
	}
	// The params the runtime would decode name another client: what
	// the Observer is told shows which metadata the runtime used.
	params := `{"_meta":{` + meta + `,"io.modelcontextprotocol/clientInfo":{"name":"decoded","version":"1"}}}`
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := newEndRecorder()
	s.SetObserver(rec)
	req := &Request{ID: protocol.IntID(1), Method: "server/discover", Params: json.RawMessage(params), Split: splitOf(t, params), Admission: a}
	if o := s.Dispatch(context.Background(), req); o.Err != nil {
		t.Fatal(o.Err)
	}
	if got := string(rec.last(t).ClientInfo); got != `{"name":"admitted","version":"1"}` {
		t.Errorf("the runtime used the clientInfo %s, not the admission's", got)
	}

	legacyOnly, err := New(Options{Versions: []string{"2025-11-25"}})
	if err != nil {
		t.Fatal(err)
	}
	if o := legacyOnly.Dispatch(context.Background(), req); o.Err == nil || o.Err.Code != protocol.CodeUnsupportedVersion {
		t.Errorf("a Server without 2026 answered an admission made with it %+v, want -32022", o)
	}
}
