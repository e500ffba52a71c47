package server

import (
	"context"
	"encoding/json"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snodod/snodod/protocol"
)

// A legacy session's state survives Snapshot, a JSON round trip and
// Restore on a new state: what it negotiated and subscribed, its log
// level, the next id of a request to the client, and, once initialized,
// the list changes it receives.
func TestSessionSnapshotRestore(t *testing.T) {
	s, err := New(Options{SubscribableResources: true})
	if err != nil {
		t.Fatal(err)
	}
	old := NewSessionState(0)
	defer old.Close()
	if _, _, err := s.Initialize(old, json.RawMessage(`{"protocolVersion":"2025-06-18","capabilities":{"roots":{}},"clientInfo":{"name":"t","version":"1"}}`)); err != nil {
		t.Fatal(err)
	}
	old.SetNegotiated("2025-06-18")
	s.Notify(old, "notifications/initialized", nil)
	old.setLogRank(3)
	old.subscribe("test://b")
	old.subscribe("test://a")
	old.NextClientRequestID()
	old.NextClientRequestID()

	b, err := json.Marshal(old.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"negotiated":"2025-06-18","legacy":true,"capabilities":{"roots":{}},"clientInfo":{"name":"t","version":"1"},` +
		`"initialized":true,"logLevel":"warning","subscriptions":["test://a","test://b"],"clientRequests":2}`
	if string(b) != want {
		t.Fatalf("snapshot\n got %s\nwant %s", b, want)
	}
	var snap SessionSnapshot
	if err := json.Unmarshal(b, &snap); err != nil {
		t.Fatal(err)
	}
	fresh := NewSessionState(0)
	defer fresh.Close()
	if err := fresh.Restore(snap, s); err != nil {
		t.Fatal(err)
	}
	if got := fresh.Snapshot(); !reflect.DeepEqual(got, snap) {
		t.Fatalf("restored %+v, want %+v", got, snap)
	}
	if got := fresh.NextClientRequestID(); got != protocol.StringID("snodod:3") {
		t.Fatalf("next client request id %v, want \"snodod:3\"", got)
	}
	if fresh.logThreshold() != 3 || fresh.Subscriptions() != 2 {
		t.Fatalf("log rank %d, subscriptions %d", fresh.logThreshold(), fresh.Subscriptions())
	}
	s.RemoveTools("none") // a tools change reaches the restored session
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ev, err := fresh.Next(ctx)
	if err != nil || ev.Method != "notifications/tools/list_changed" {
		t.Fatalf("Next = %+v, %v", ev, err)
	}
}

func TestSessionRestoreRefuses(t *testing.T) {
	ss := NewSessionState(0)
	defer ss.Close()
	if err := ss.Restore(SessionSnapshot{LogLevel: "loud"}, nil); err == nil {
		t.Fatal("an unknown log level was restored")
	}
	// A session that never initialized restores as one, and is not fed.
	if err := ss.Restore(SessionSnapshot{}, nil); err != nil {
		t.Fatal(err)
	}
	if _, ok, wake := ss.Poll(); ok || wake == nil {
		t.Fatal("an uninitialized session has an event, or is closed")
	}
}

// Every change Snapshot would show calls the OnChange function, once.
func TestSessionOnChange(t *testing.T) {
	s, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	ss := NewSessionState(0)
	defer ss.Close()
	var n atomic.Int32
	ss.SetOnChange(func() { n.Add(1) })
	steps := []struct {
		name string
		do   func()
	}{
		{"initialize", func() {
			_, _, _ = s.Initialize(ss, json.RawMessage(`{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`))
		}},
		{"negotiated", func() { ss.SetNegotiated("2025-06-18") }},
		{"initialized", func() { s.Notify(ss, "notifications/initialized", nil) }},
		{"log level", func() { ss.setLogRank(0) }},
		{"subscribe", func() { ss.subscribe("test://x") }},
		{"unsubscribe", func() { ss.unsubscribe("test://x") }},
	}
	for i, st := range steps {
		st.do()
		if got := n.Load(); got != int32(i+1) {
			t.Fatalf("after %s: %d calls, want %d", st.name, got, i+1)
		}
	}
	ss.unsubscribe("test://never") // no change, no call
	ss.subscribe("")
	ss.subscribe("")
	if got := n.Load(); got != int32(len(steps)+1) {
		t.Fatalf("%d calls after a no-op unsubscribe and a repeated subscribe, want %d", got, len(steps)+1)
	}
}

// A listen stream's record reopens, on another server, a stream with the
// same id and filter: it delivers what the filter accepts, marked with the
// same subscription id, and ends with the same completion result.
func TestListenRecordResume(t *testing.T) {
	old, err := New(Options{Info: testServerInfo})
	if err != nil {
		t.Fatal(err)
	}
	ls := newListenStream(old.hub, protocol.StringID("L"), listenFilter{tools: true, uris: []string{}}, old.serverInfo(protocol.Version2026))
	ls.version = protocol.Version2026
	defer ls.Close(Disconnected, "")
	rec, ok := ListenRecordOf(ls)
	if !ok {
		t.Fatal("no record of a listen stream")
	}
	b, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":"L","version":"2026-07-28","tools":true,"hasUris":true}`; string(b) != want {
		t.Fatalf("record %s, want %s", b, want)
	}
	var back ListenRecord
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	srv, err := New(Options{Info: testServerInfo})
	if err != nil {
		t.Fatal(err)
	}
	st, err := srv.ResumeListen(NewSessionState(0), back)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(Disconnected, "")
	if got, want := jsonOf(t, st.Ack()), jsonOf(t, ls.Ack()); got != want {
		t.Fatalf("resumed ack %s, want %s", got, want)
	}
	srv.hub.publish(change{kind: changePrompts}) // not in the filter
	srv.hub.publish(change{kind: changeTools})
	ev := nextEvent(t, st.(*listenStream))
	if got := line(t, ev.Method, ev.Params); got != `{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"L"}}}` {
		t.Fatalf("event %s", got)
	}
	if _, ok := ListenRecordOf(nil); ok {
		t.Fatal("a record of no stream")
	}
	for _, bad := range []ListenRecord{{ID: json.RawMessage(`null`), Version: protocol.Version2026}, {ID: json.RawMessage(`1`), Version: "1999-01-01"}} {
		if _, err := srv.ResumeListen(NewSessionState(0), bad); err == nil {
			t.Errorf("ResumeListen(%+v) succeeded", bad)
		}
	}
}
