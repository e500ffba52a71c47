package server

import (
	"encoding/json"
	"testing"
	"time"
)

// Poll gives what Next gives, without blocking: nothing before
// notifications/initialized, then list changes, and resource updates only
// for subscribed URIs; its channels fire when something may be waiting.
func TestSessionPoll(t *testing.T) {
	s, err := New(Options{SubscribableResources: true})
	if err != nil {
		t.Fatal(err)
	}
	sess := NewSessionState(0)
	defer sess.Close()
	if _, _, err := s.Initialize(sess, json.RawMessage(`{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)); err != nil {
		t.Fatal(err)
	}
	if _, ok, wake := sess.Poll(); ok || wake == nil {
		t.Fatal("an event, or no channel, before notifications/initialized")
	}
	s.Notify(sess, "notifications/initialized", nil)
	_, ok, wake := sess.Poll()
	if ok || wake == nil {
		t.Fatal("want nothing waiting, and a wake channel")
	}
	s.ResourceUpdated("test://not-subscribed")
	s.RemoveTools("none") // a tools change
	select {
	case <-wake:
	case <-time.After(5 * time.Second):
		t.Fatal("wake did not fire")
	}
	ev, ok, _ := sess.Poll()
	if !ok || ev.Method != "notifications/tools/list_changed" || ev.Params != nil {
		t.Fatalf("Poll = %+v, %v", ev, ok)
	}
	if !sess.subscribe("test://watched") {
		t.Fatal("subscribe refused")
	}
	s.ResourceUpdated("test://watched")
	if ev, ok, _ = sess.Poll(); !ok || ev.Method != "notifications/resources/updated" {
		t.Fatalf("Poll = %+v, %v", ev, ok)
	}
	if _, ok, _ = sess.Poll(); ok {
		t.Fatal("more events than sent")
	}
}
