package protocol

import (
	"encoding/json"
	"testing"
)

// DecodeFromServer judges every line exactly as Decode does (kind, id,
// error, method, params): one decoder for both ends of a connection.
func TestDecodeFromServerAgrees(t *testing.T) {
	for _, tc := range decodeCases {
		t.Run(tc.name, func(t *testing.T) {
			server, client := Decode([]byte(tc.line)), DecodeFromServer([]byte(tc.line))
			if client.Kind != server.Kind || client.ID != server.ID || client.Err != server.Err || client.Method != server.Method ||
				string(client.Params) != string(server.Params) || string(client.Result) != string(server.Result) ||
				string(client.ErrorObject) != string(server.ErrorObject) {
				t.Fatalf("DecodeFromServer(%.80q) = %+v; Decode gives %+v", tc.line, client, server)
			}
			if len(client.Members) != len(server.Members) {
				t.Errorf("Members: %d, Decode splits %d", len(client.Members), len(server.Members))
			}
		})
	}
}

// What a server sends is read by the MCP client, not the runtime: its
// params are split into members, but neither _meta nor arguments are
// split, no era is judged and no progress token is read.
func TestDecodeFromServerSplit(t *testing.T) {
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{"messages":[],"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","progressToken":1},"arguments":{"a":1}}}`,
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,"progress":1,"_meta":{"progressToken":2}}}`,
	} {
		m := DecodeFromServer([]byte(line))
		if m.Kind != KindRequest && m.Kind != KindNotification {
			t.Fatalf("%s: kind %d", line, m.Kind)
		}
		if m.Meta != nil || m.MetaObject || m.Arguments != nil || m.ArgumentsObject || m.Modern || m.ProgressToken != nil {
			t.Errorf("%s: split as a client's request: %+v", line, m.Split)
		}
		if _, ok := m.Members.Get("_meta"); !ok || len(m.Members) != 3 {
			t.Errorf("%s: members %v", line, m.Members)
		}
	}
	m := DecodeFromServer([]byte(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,"progress":1.5}}`))
	var progress float64
	if tok := m.Members.Value("progressToken"); string(tok) != "7" || json.Unmarshal(m.Members.Value("progress"), &progress) != nil || progress != 1.5 {
		t.Errorf("progress members %v", m.Members)
	}
}
