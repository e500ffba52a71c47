package control

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The wire is shared by daemons and clients of other versions (an upgrade
// hands a waiting connect from an old daemon to a new one; `snodod
// upgrade` of one version asks a daemon of another): the lines each side
// writes are pinned here, byte for byte.
func TestWireLines(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{Request{Op: OpConnect, View: "gh", Cwd: "/p"}, `{"op":"connect","view":"gh","cwd":"/p"}`},
		{Request{Op: OpStatus}, `{"op":"status"}`},
		{Request{Op: OpKill, Session: 7}, `{"op":"kill","session":7}`},
		{Request{Op: OpUpgrade, Binary: "/p"}, `{"op":"upgrade","binary":"/p"}`},
		{Request{Op: OpUpstream, Name: "gh", Action: ActionRestart}, `{"op":"upstream","name":"gh","action":"restart"}`},
		{Request{Op: OpLogs, Name: "gh", Follow: true}, `{"op":"logs","name":"gh","follow":true}`},
		{Request{Op: OpFault, Session: 7}, `{"op":"fault","session":7}`},
		{Reply{OK: true, Session: 7}, `{"ok":true,"session":7}`},
		{Reply{OK: true, PID: 42}, `{"ok":true,"pid":42}`},
		{Reply{Error: "no session 9"}, `{"ok":false,"error":"no session 9"}`},
		{Reply{OK: true, Instances: []Instance{{Instance: "all", State: StateReady, PID: 5}}}, `{"ok":true,"instances":[{"instance":"all","state":"ready","pid":5}]}`},
		{Ended{Ended: true}, `{"ended":true,"error":""}`},
		{LogLine{Log: "x\n"}, `{"log":"x\n"}`},
	} {
		b, err := json.Marshal(tc.v)
		if err != nil || string(b) != tc.want {
			t.Errorf("%T %+v: %s, %v; want %s", tc.v, tc.v, b, err, tc.want)
		}
	}
}

// docLines are the wire examples of doc.go: the requests and the answers.
func docLines(t *testing.T) (requests, answers []string) {
	t.Helper()
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range regexp.MustCompile(`(?m)^//\t(\{"op".*?\})(?:\s|$)`).FindAllStringSubmatch(string(b), -1) {
		requests = append(requests, m[1])
	}
	for _, m := range regexp.MustCompile(`→ (\{.*?\})(?:,|\s|$)|(\{"ended".*?\})|(\{"log".*?\})`).FindAllStringSubmatch(string(b), -1) {
		answers = append(answers, m[1]+m[2]+m[3])
	}
	return requests, answers
}

// The op list of doc.go is the protocol: one example per op, and every
// example decodes, strictly, into the types.
func TestDocOpList(t *testing.T) {
	requests, answers := docLines(t)
	var ops []string
	for _, line := range requests {
		var r Request
		dec := json.NewDecoder(strings.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&r); err != nil {
			t.Errorf("doc.go's request %s: %v", line, err)
		}
		ops = append(ops, r.Op)
	}
	if !slices.Equal(ops, Ops) {
		t.Errorf("doc.go lists the ops %v; Ops is %v", ops, Ops)
	}
	if len(answers) < len(Ops) {
		t.Fatalf("doc.go shows %d answers: %q", len(answers), answers)
	}
	for _, line := range answers {
		line = strings.ReplaceAll(line, "…", "x")
		line = strings.ReplaceAll(line, ",<Status fields>", "") // {"ok":true, <Status fields>}
		line = strings.ReplaceAll(line, ", <Status fields>", "")
		line = strings.ReplaceAll(line, ":N", ":1")
		var into any = &Reply{}
		switch {
		case strings.HasPrefix(line, `{"ended"`):
			into = &Ended{}
		case strings.HasPrefix(line, `{"log"`):
			into = &LogLine{}
		}
		dec := json.NewDecoder(bytes.NewReader([]byte(line)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(into); err != nil {
			t.Errorf("doc.go's answer %s: %v", line, err)
		}
	}
}
