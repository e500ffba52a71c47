package protocol

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// errorText renders an error (or nil) for comparisons and messages.
func errorText(e *Error) string {
	if e == nil {
		return "<nil>"
	}
	return strings.TrimSuffix(string(AppendError(nil, ID{}, e)), "\n")
}

// checkError fails unless got is exactly {code, message} without data, or
// nil when message is "".
func checkError(t *testing.T, what string, got *Error, code int64, message string) {
	t.Helper()
	if message == "" {
		if got != nil {
			t.Errorf("%s = %s, want nil", what, errorText(got))
		}
		return
	}
	if got == nil || got.Code != code || got.Message != message || got.Data != nil {
		t.Errorf("%s = %s, want code %d %q without data", what, errorText(got), code, message)
	}
}

// withMeta builds params holding a _meta object with the given members.
func withMeta(members string) json.RawMessage {
	return json.RawMessage(`{"_meta":{` + members + `}}`)
}

// metaFull is META of docs/transport.md §16 with extra members.
func metaFull(extra string) json.RawMessage {
	m := `"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}`
	if extra != "" {
		m += "," + extra
	}
	return withMeta(m)
}

const (
	version2026 = `"io.modelcontextprotocol/protocolVersion":"2026-07-28"`
	capsEmpty   = `"io.modelcontextprotocol/clientCapabilities":{}`
)

func TestDecodeModernMetaErrors(t *testing.T) {
	tests := []struct {
		name    string
		params  string
		message string
	}{
		{"no params", "", "Required request _meta is missing"},
		{"null params", "null", "Required request _meta is missing"},
		{"no _meta", `{}`, "Required request _meta is missing"},
		{"other members only", `{"name":"echo"}`, "Required request _meta is missing"},
		{"_meta number", `{"_meta":5}`, msgMetaObject},
		{"_meta null", `{"_meta":null}`, msgMetaObject},
		{"_meta list", `{"_meta":[]}`, msgMetaObject},
		{"_meta string", `{"_meta":"x"}`, msgMetaObject},
		{"bad key (case 26)", string(withMeta(version2026 + "," + capsEmpty + `,"bad/key/again":1`)), "_meta contains an invalid key or non-JSON value"},
		{"bad key before missing version", string(withMeta(`"-a/x":1`)), "_meta contains an invalid key or non-JSON value"},
		{"empty key", string(withMeta(version2026 + "," + capsEmpty + `,"":1`)), "_meta contains an invalid key or non-JSON value"},
		{"no version", `{"_meta":{}}`, "Missing required io.modelcontextprotocol/protocolVersion metadata"},
		{"no version, caps only", string(withMeta(capsEmpty)), "Missing required io.modelcontextprotocol/protocolVersion metadata"},
		{"version 5 (case 25)", string(withMeta(`"io.modelcontextprotocol/protocolVersion":5,` + capsEmpty)), "io.modelcontextprotocol/protocolVersion must be a string"},
		{"version null", string(withMeta(`"io.modelcontextprotocol/protocolVersion":null,` + capsEmpty)), "io.modelcontextprotocol/protocolVersion must be a string"},
		{"version object", string(withMeta(`"io.modelcontextprotocol/protocolVersion":{}`)), "io.modelcontextprotocol/protocolVersion must be a string"},
		{"version 5 without caps", string(withMeta(`"io.modelcontextprotocol/protocolVersion":5`)), "io.modelcontextprotocol/protocolVersion must be a string"},
		{"version only (case 25)", string(withMeta(version2026)), "Missing required io.modelcontextprotocol/clientCapabilities metadata"},
		{"unsupported version without caps (case 25)", string(withMeta(`"io.modelcontextprotocol/protocolVersion":"1900-01-01"`)), "Missing required io.modelcontextprotocol/clientCapabilities metadata"},
		{"caps list (case 25)", string(withMeta(version2026 + `,"io.modelcontextprotocol/clientCapabilities":[]`)), msgCapabilitiesObject},
		{"caps null", string(withMeta(version2026 + `,"io.modelcontextprotocol/clientCapabilities":null`)), msgCapabilitiesObject},
		{"caps string", string(withMeta(version2026 + `,"io.modelcontextprotocol/clientCapabilities":"x"`)), msgCapabilitiesObject},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var params json.RawMessage
			if tt.params != "" {
				params = json.RawMessage(tt.params)
			}
			m, err := decodeMeta(params)
			if m != nil {
				t.Errorf("metadata = %+v, want nil", m)
			}
			checkError(t, "decodeMeta("+tt.params+")", err, CodeInvalidParams, tt.message)
		})
	}
	if _, err := decodeMeta(json.RawMessage(`[]`)); err != ErrParamsType {
		t.Errorf("decodeMeta([]) = %s, want ErrParamsType", errorText(err))
	}
}

func TestDecodeModernMeta(t *testing.T) {
	params := metaFull(`"progressToken":7,"io.modelcontextprotocol/logLevel":"debug","io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/skills":{"x":1},"com.example/trace":"abc"`)
	m, err := decodeMeta(params)
	if err != nil {
		t.Fatalf("decodeModernMeta: %s", errorText(err))
	}
	if m.ProtocolVersion != Version2026 || string(m.ClientCapabilities) != `{}` ||
		string(m.ClientInfo) != `{"name":"c","version":"1"}` || m.LogLevel != "debug" ||
		string(m.ProgressToken) != `7` {
		t.Errorf("metadata = %+v", m)
	}
	if len(m.Members) != 7 || string(m.Members.Value("com.example/trace")) != `"abc"` || string(m.Members.Value("io.modelcontextprotocol/skills")) != `{"x":1}` {
		t.Errorf("Members = %v", m.Members)
	}
	if err := m.Check(mustVersions(t)); err != nil {
		t.Errorf("Check = %s, want nil", errorText(err))
	}

	// No clientInfo (case 25), logLevel or progressToken: all absent.
	m, err = decodeMeta(metaFull(""))
	if err != nil {
		t.Fatalf("decodeModernMeta: %s", errorText(err))
	}
	if m.ClientInfo != nil || m.LogLevel != "" || m.ProgressToken != nil || len(m.Members) != 2 {
		t.Errorf("metadata = %+v, want only version and capabilities", m)
	}
	if err := m.Check(mustVersions(t)); err != nil {
		t.Errorf("Check = %s, want nil", errorText(err))
	}

	// An unsupported version still decodes: its refusal is Check's (step 7).
	m, err = decodeMeta(withMeta(`"io.modelcontextprotocol/protocolVersion":"1900-01-01",` + capsEmpty))
	if err != nil || m.ProtocolVersion != "1900-01-01" {
		t.Errorf("decodeModernMeta = %+v, %s", m, errorText(err))
	}
}

func TestValidMetaKey(t *testing.T) {
	tests := []struct {
		key  string
		want bool
	}{
		{"x", true},
		{"progressToken", true},
		{"io.modelcontextprotocol/protocolVersion", true},
		{"io.modelcontextprotocol/skills", true},
		{"a.b-c/x_y.z", true},
		{"a/x", true},
		{"A9/0", true},
		{"a-1.b2/9x", true},
		{"x.y", true},
		{"x_y-z.0", true},
		{"bad/key/again", false},
		{"-a/x", false},
		{"a-/x", false},
		{"1a/x", false},
		{"a./x", false},
		{".a/x", false},
		{"a..b/x", false},
		{"a_b/x", false},
		{"a/x-", false},
		{"a/-x", false},
		{"a/_x", false},
		{"a/x.", false},
		{"a/", false},
		{"/x", false},
		{"/", false},
		{"", false},
		{"-x", false},
		{"x-", false},
		{"_", false},
		{"a b", false},
		{"é", false},
		{"a/é", false},
	}
	for _, tt := range tests {
		if got := validMetaKey(tt.key); got != tt.want {
			t.Errorf("validMetaKey(%q) = %v, want %v", tt.key, got, tt.want)
		}
		if tt.key == MetaProtocolVersion {
			continue // a member name Decode would refuse as a duplicate
		}
		_, err := decodeMeta(metaFull(`"` + tt.key + `":1`))
		if got := err == nil; got != tt.want {
			t.Errorf("decodeModernMeta with key %q: %s, want accepted %v", tt.key, errorText(err), tt.want)
		}
	}
}

// TestCheckUnsupportedVersion pins case 24 byte for byte.
func TestCheckUnsupportedVersion(t *testing.T) {
	all := mustVersions(t)
	legacyOnly := mustVersions(t, Version20251125, Version20250618)
	tests := []struct {
		name    string
		version string
		enabled Versions
		want    string
	}{
		{"unknown", "1900-01-01", all, `{"jsonrpc":"2.0","id":"r","error":{"code":-32022,"message":"Unsupported protocol version","data":{"requested":"1900-01-01","supported":["2026-07-28"]}}}`},
		{"legacy version", "2025-11-25", all, `{"jsonrpc":"2.0","id":"r","error":{"code":-32022,"message":"Unsupported protocol version","data":{"requested":"2025-11-25","supported":["2026-07-28"]}}}`},
		{"2026 disabled", "2026-07-28", legacyOnly, `{"jsonrpc":"2.0","id":"r","error":{"code":-32022,"message":"Unsupported protocol version","data":{"requested":"2026-07-28","supported":[]}}}`},
		{"empty", "", all, `{"jsonrpc":"2.0","id":"r","error":{"code":-32022,"message":"Unsupported protocol version","data":{"requested":"","supported":["2026-07-28"]}}}`},
		{"escaped echo", "v<1>\"\u2028", all, `{"jsonrpc":"2.0","id":"r","error":{"code":-32022,"message":"Unsupported protocol version","data":{"requested":"v<1>\"\u2028","supported":["2026-07-28"]}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v, _ := json.Marshal(tt.version)
			// A bad progressToken too: step 7 comes before step 8.
			m, err := decodeMeta(withMeta(`"io.modelcontextprotocol/protocolVersion":` + string(v) + "," + capsEmpty + `,"progressToken":1.5`))
			if err != nil {
				t.Fatalf("decodeModernMeta: %s", errorText(err))
			}
			got := string(AppendError(nil, StringID("r"), m.Check(tt.enabled)))
			if got != tt.want+"\n" {
				t.Errorf("error line\n got %s\nwant %s", got, tt.want)
			}
		})
	}
}

// TestCheckMetadata covers §5.2 step 8 and case 26.
func TestCheckMetadata(t *testing.T) {
	const (
		ok    = ""
		level = "Invalid MCP request log level"
		info  = "Invalid client info metadata"
		caps  = "Invalid client capabilities metadata"
		token = "progressToken must be a string of at most 256 bytes or an int64 integer"
	)
	long := strings.Repeat("x", MaxIDBytes)
	ci := func(v string) string { return `"io.modelcontextprotocol/clientInfo":` + v }
	ll := func(v string) string { return `"io.modelcontextprotocol/logLevel":` + v }
	cc := func(v string) string { return `"io.modelcontextprotocol/clientCapabilities":` + v }
	tests := []struct {
		members string // besides the version, and capabilities {} unless given
		message string
	}{
		{`"progressToken":"pt"`, ok},
		{`"progressToken":7`, ok},
		{`"progressToken":-9223372036854775808`, ok},
		{`"progressToken":"` + long + `"`, ok},
		{`"progressToken":{}`, token},
		{`"progressToken":1.5`, token},
		{`"progressToken":true`, token},
		{`"progressToken":null`, token},
		{`"progressToken":[]`, token},
		{`"progressToken":"` + long + `x"`, token},
		{`"progressToken":9223372036854775808`, token},
		{ll(`"debug"`), ok},
		{ll(`"emergency"`), ok},
		{ll(`"verbose"`), level},
		{ll(`"DEBUG"`), level},
		{ll(`""`), level},
		{ll(`5`), level},
		{ll(`null`), level},
		{ci(`{"name":"c","version":"1"}`), ok},
		{ci(`{"name":"c","version":"1","title":"C","description":"d","websiteUrl":"https://example.com/x","icons":[],"extra":1}`), ok},
		{ci(`{"name":"c","version":"1","icons":[{"src":"https://example.com/i.png","sizes":["48x48"]}]}`), ok},
		{ci(`{"name":"","version":""}`), ok},
		{ci(`{"name":"c","version":"1","title":7}`), info},
		{ci(`{"name":"c","version":"1","websiteUrl":"not a uri"}`), info},
		{ci(`{"name":"c","version":"1","websiteUrl":"/relative"}`), info},
		{ci(`{"name":"c","version":"1","websiteUrl":5}`), info},
		{ci(`{"name":"c","version":"1","description":null}`), info},
		{ci(`{"name":"c","version":"1","icons":"x"}`), info},
		{ci(`{"name":"c","version":"1","icons":[1]}`), info},
		{ci(`{"name":"c","version":"1","icons":[{}]}`), info},
		{ci(`{"name":"c","version":"1","icons":[{"src":5}]}`), info},
		{ci(`{"version":"1"}`), info},
		{ci(`{"name":"c"}`), info},
		{ci(`{"name":"c","version":1}`), info},
		{ci(`null`), info},
		{ci(`[]`), info},
		{ci(`"c"`), info},
		{cc(`{"roots":{"listChanged":true}}`), ok},
		{cc(`{"sampling":{"context":{},"tools":{}},"elicitation":{"form":{},"url":{}}}`), ok},
		{cc(`{"experimental":{"x":1},"unknown":5,"tasks":true}`), ok},
		{cc(`{"extensions":{"io.modelcontextprotocol/ui":{},"com.example/x":true}}`), ok},
		{cc(`{"sampling":{"tools":true}}`), caps},
		{cc(`{"sampling":{"context":null}}`), caps},
		{cc(`{"elicitation":{"form":1}}`), caps},
		{cc(`{"elicitation":{"url":"x"}}`), caps},
		{cc(`{"extensions":{"unprefixed":{}}}`), caps},
		{cc(`{"extensions":{"/x":{}}}`), caps},
		{cc(`{"extensions":{"a/b/c":{}}}`), caps},
		{cc(`{"extensions":[]}`), caps},
		{cc(`{"roots":true}`), caps},
		{cc(`{"sampling":null}`), caps},
		{cc(`{"elicitation":[]}`), caps},
		{cc(`{"experimental":"x"}`), caps},
		// The order of step 8: token, level, info, capabilities.
		{`"progressToken":1.5,` + ll(`"verbose"`), token},
		{ll(`"verbose"`) + "," + ci(`{}`), level},
		{ci(`{}`) + "," + cc(`{"roots":1}`), info},
	}
	enabled := mustVersions(t)
	for _, tt := range tests {
		members := version2026 + "," + tt.members
		if !strings.Contains(tt.members, "clientCapabilities") {
			members += "," + capsEmpty
		}
		m, err := decodeMeta(withMeta(members))
		if err != nil {
			t.Errorf("decodeMeta(%s) = %s", members, errorText(err))
			continue
		}
		checkError(t, "Check("+tt.members+")", m.Check(enabled), CodeInvalidParams, tt.message)
	}
}

func TestCheckLegacyMeta(t *testing.T) {
	const (
		object = "_meta must be an object"
		tasks  = "Tasks and multi-round-trip inputs are not supported"
		token  = "progressToken must be a string of at most 256 bytes or an int64 integer"
	)
	tests := []struct {
		params  string
		message string
	}{
		{"", ""},
		{"null", ""},
		{`{}`, ""},
		{`{"_meta":{}}`, ""},
		{`{"_meta":{"progressToken":"pt"}}`, ""},
		{`{"_meta":{"bad/key/again":1,"io.modelcontextprotocol/clientCapabilities":5}}`, ""},
		{`{"name":"echo","task":{"ttl":60000}}`, ""}, // case 22
		{`{"_meta":5}`, object},
		{`{"_meta":null}`, object},
		{`{"_meta":[]}`, object},
		{`{"_meta":{"progressToken":1.5}}`, token},
		{`{"_meta":{"progressToken":null}}`, token},
		{`{"inputResponses":{}}`, tasks}, // case 9
		{`{"requestState":"x"}`, tasks},
		{`{"requestState":null}`, tasks},
		{`{"_meta":5,"requestState":"x"}`, object},
		{`{"_meta":{"progressToken":{}},"inputResponses":{}}`, token},
	}
	for _, tt := range tests {
		var params json.RawMessage
		if tt.params != "" {
			params = json.RawMessage(tt.params)
		}
		checkError(t, "CheckLegacyMeta("+tt.params+")", checkLegacy(params), CodeInvalidParams, tt.message)
	}
	if err := checkLegacy(json.RawMessage(`"x"`)); err != ErrParamsType {
		t.Errorf("CheckLegacyMeta(\"x\") = %s, want ErrParamsType", errorText(err))
	}
}

func TestLogLevelRank(t *testing.T) {
	for want, level := range []string{"debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"} {
		if got, ok := LogLevelRank(level); !ok || got != want {
			t.Errorf("LogLevelRank(%q) = %d, %v; want %d, true", level, got, ok, want)
		}
	}
	for _, level := range []string{"", "verbose", "loud", "Debug", "warn", "fatal"} {
		if _, ok := LogLevelRank(level); ok {
			t.Errorf("LogLevelRank(%q) ok", level)
		}
	}
}

// TestLogLevelName checks that it inverts LogLevelRank, and refuses the
// ranks just outside 0 to 7.
func TestLogLevelName(t *testing.T) {
	for rank := range 8 {
		level, ok := LogLevelName(rank)
		if back, known := LogLevelRank(level); !ok || !known || back != rank {
			t.Errorf("LogLevelName(%d) = %q, %v; its rank is %d", rank, level, ok, back)
		}
	}
	for _, rank := range []int{-1, 8} {
		if level, ok := LogLevelName(rank); ok || level != "" {
			t.Errorf("LogLevelName(%d) = %q, %v; want \"\", false", rank, level, ok)
		}
	}
}

// decodeMeta splits raw params as a runtime does, then decodes their _meta.
func decodeMeta(params json.RawMessage) (*RequestMeta, *Error) {
	top, err := paramsObject(params)
	if err != nil {
		return nil, err
	}
	var split Split
	if top != nil {
		split, _ = SplitParams(params)
	}
	return DecodeModernMeta(&split)
}

// checkLegacy splits raw params as a runtime does, then checks them.
func checkLegacy(params json.RawMessage) *Error {
	if _, err := paramsObject(params); err != nil {
		return err
	}
	if string(bytes.TrimSpace(params)) == "null" {
		params = nil
	}
	split, _ := SplitParams(params)
	return CheckLegacyMeta(&split)
}

// Split.Modern is the era rule of §1.2: the version key in an object
// _meta, whatever its value; the decoder and SplitParams agree on it.
func TestSplitModern(t *testing.T) {
	for _, tt := range []struct {
		params string
		modern bool
	}{
		{`{}`, false},
		{`{"_meta":5}`, false},
		{`{"_meta":null}`, false},
		{`{"_meta":{"progressToken":1}}`, false},
		{`{"_meta":{"io.modelcontextprotocol/protocolVersion":null}}`, true},
		{`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","x":1}}`, true},
	} {
		split, ok := SplitParams(json.RawMessage(tt.params))
		if !ok || split.Modern != tt.modern || split.Modern && split.Meta == nil {
			t.Errorf("SplitParams(%s) = %+v, %v; want modern %v", tt.params, split, ok, tt.modern)
		}
		m := Decode([]byte(`{"jsonrpc":"2.0","id":1,"method":"ping","params":` + tt.params + `}`))
		if m.Kind != KindRequest || m.Modern != tt.modern || !reflect.DeepEqual(m.Split, split) {
			t.Errorf("Decode of params %s: %+v, want the split %+v", tt.params, m.Split, split)
		}
	}
}

// paramsObject decodes request params as the runtime sees them for these
// tests: nil or null give an empty (nil) map, an object its members, and
// any other value ErrParamsType.
func paramsObject(params json.RawMessage) (map[string]json.RawMessage, *Error) {
	switch JSONKind(params) {
	case 0:
		return nil, nil
	case 'n':
		if string(bytes.TrimSpace(params)) == "null" {
			return nil, nil
		}
	case '{':
		if members, ok := Members(params); ok {
			return members, nil
		}
	}
	return nil, ErrParamsType
}
