package cancelled

import (
	"testing"

	"github.com/snodod/snodod/protocol"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name       string
		line       string
		ok         bool
		id, reason string // id as its JSON text
	}{
		{"id only", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}`, true, `7`, ""},
		{"string id and reason", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a","reason":"why"}}`, true, `"a"`, "why"},
		{"meta object", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"_meta":{}}}`, true, `1`, ""},
		{"no params", `{"jsonrpc":"2.0","method":"notifications/cancelled"}`, false, "", ""},
		{"no requestId", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"reason":"why"}}`, false, "", ""},
		{"requestId not an id", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":true}}`, false, "", ""},
		{"reason not a string", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":3}}`, false, "", ""},
		{"meta not an object", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"_meta":[]}}`, false, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			msg := protocol.Decode([]byte(tt.line))
			if msg.Kind != protocol.KindNotification {
				t.Fatalf("Decode: kind %v, want a notification", msg.Kind)
			}
			id, reason, ok := Parse(&msg.Split)
			if ok != tt.ok {
				t.Fatalf("Parse ok = %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			want, _ := protocol.ParseID([]byte(tt.id))
			if id != want || reason != tt.reason {
				t.Errorf("Parse = %v, %q; want %v, %q", id, reason, want, tt.reason)
			}
		})
	}
}
