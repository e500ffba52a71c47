package server

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/snodod/snodod/protocol"
)

var testServerInfo = protocol.Implementation{Name: "snodod", Version: "1.0.0"}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("marshal %#v: %v", v, err)
	}
	return string(b)
}

// line encodes an event as the transport writes it.
func line(t *testing.T, method string, params any) string {
	t.Helper()
	b, err := protocol.AppendNotification(nil, method, params)
	if err != nil {
		t.Fatalf("encode %s: %v", method, err)
	}
	return strings.TrimSuffix(string(b), "\n")
}

func nextEvent(t *testing.T, s *listenStream) Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hubWait)
	defer cancel()
	ev, err := s.Next(ctx)
	if err != nil {
		t.Fatalf("Next: %v", err)
	}
	return ev
}

func TestListenAck(t *testing.T) {
	const meta = `{"_meta":{"io.modelcontextprotocol/subscriptionId":"s1"},`
	tests := []struct {
		name   string
		id     protocol.ID
		filter listenFilter
		want   string
	}{
		{"tools and prompts", protocol.StringID("s1"), listenFilter{tools: true, prompts: true},
			meta + `"notifications":{"toolsListChanged":true,"promptsListChanged":true}}`},
		{"empty filter", protocol.StringID("s1"), listenFilter{}, meta + `"notifications":{}}`},
		{"everything, URIs de-duplicated in order", protocol.StringID("s1"),
			listenFilter{tools: true, prompts: true, resources: true, uris: []string{"test://b", "test://a", "test://b"}},
			meta + `"notifications":{"toolsListChanged":true,"promptsListChanged":true,"resourcesListChanged":true,` +
				`"resourceSubscriptions":["test://b","test://a"]}}`},
		{"kept but empty URI list", protocol.StringID("s1"), listenFilter{uris: []string{}},
			meta + `"notifications":{"resourceSubscriptions":[]}}`},
		{"integer id", protocol.IntID(7), listenFilter{resources: true},
			`{"_meta":{"io.modelcontextprotocol/subscriptionId":7},"notifications":{"resourcesListChanged":true}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newListenStream(newHub(), tt.id, tt.filter, testServerInfo)
			defer s.Close(Disconnected, "")
			if got := jsonOf(t, s.Ack()); got != tt.want {
				t.Fatalf("Ack\n got %s\nwant %s", got, tt.want)
			}
			if got := line(t, "notifications/subscriptions/acknowledged", s.Ack()); !strings.HasPrefix(got,
				`{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":`) {
				t.Fatalf("acknowledgement line %s", got)
			}
		})
	}
}

func TestListenEvents(t *testing.T) {
	h := newHub()
	s := newListenStream(h, protocol.StringID("s1"),
		listenFilter{tools: true, prompts: true, uris: []string{"test://watched"}}, testServerInfo)
	defer s.Close(Disconnected, "")

	h.publish(change{kind: changeResources}) // outside the filter
	h.publish(updated("test://other"))
	h.publish(updated("test://watched/")) // not equal
	h.publish(updated("TEST://watched"))  // not equal either
	h.publish(change{kind: changeTools})
	h.publish(change{kind: changePrompts})
	h.publish(updated("test://watched"))

	const meta = `"_meta":{"io.modelcontextprotocol/subscriptionId":"s1"}`
	want := []string{
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{` + meta + `}}`,
		`{"jsonrpc":"2.0","method":"notifications/prompts/list_changed","params":{` + meta + `}}`,
		`{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"test://watched",` + meta + `}}`,
	}
	for i, w := range want {
		ev := nextEvent(t, s)
		if ev.Done {
			t.Fatalf("event %d: Done", i)
		}
		if got := line(t, ev.Method, ev.Params); got != w {
			t.Fatalf("event %d\n got %s\nwant %s", i, got, w)
		}
	}
	assertEmpty(t, s.feed)
}

func TestListenResourcesListChanged(t *testing.T) {
	h := newHub()
	s := newListenStream(h, protocol.IntID(3), listenFilter{resources: true}, testServerInfo)
	defer s.Close(Disconnected, "")
	h.publish(change{kind: changeTools})
	h.publish(updated("test://watched")) // no URI subscribed
	h.publish(change{kind: changeResources})
	ev := nextEvent(t, s)
	want := `{"jsonrpc":"2.0","method":"notifications/resources/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":3}}}`
	if got := line(t, ev.Method, ev.Params); got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
	assertEmpty(t, s.feed)
}

func TestListenTwoStreamsOwnIDs(t *testing.T) {
	h := newHub()
	s1 := newListenStream(h, protocol.StringID("s1"), listenFilter{tools: true}, testServerInfo)
	defer s1.Close(Disconnected, "")
	s2 := newListenStream(h, protocol.StringID("s2"), listenFilter{tools: true}, testServerInfo)
	defer s2.Close(Disconnected, "")
	h.publish(change{kind: changeTools})
	for _, tc := range []struct {
		s  *listenStream
		id string
	}{{s1, "s1"}, {s2, "s2"}} {
		ev := nextEvent(t, tc.s)
		want := `{"_meta":{"io.modelcontextprotocol/subscriptionId":"` + tc.id + `"}}`
		if got := jsonOf(t, ev.Params); got != want {
			t.Fatalf("%s: params %s, want %s", tc.id, got, want)
		}
	}
}

func TestListenComplete(t *testing.T) {
	defer goleak.VerifyNone(t)
	const want = `{"resultType":"complete","_meta":{"io.modelcontextprotocol/subscriptionId":"s1",` +
		`"io.modelcontextprotocol/serverInfo":{"name":"snodod","version":"1.0.0"}}}`
	h := newHub()

	t.Run("before Next", func(t *testing.T) {
		s := newListenStream(h, protocol.StringID("s1"), listenFilter{tools: true}, testServerInfo)
		defer s.Close(Completed, "")
		h.publish(change{kind: changeTools}) // dropped by the end
		s.complete()
		for range 2 { // and again if asked again
			ev := nextEvent(t, s)
			if !ev.Done || ev.Method != "" || jsonOf(t, ev.Final) != want {
				t.Fatalf("event %+v, final %s", ev, jsonOf(t, ev.Final))
			}
		}
	})

	t.Run("wakes a blocked Next", func(t *testing.T) {
		s := newListenStream(h, protocol.StringID("s1"), listenFilter{tools: true}, testServerInfo)
		defer s.Close(Completed, "")
		got := make(chan Event, 1)
		go func() {
			ev, _ := s.Next(context.Background())
			got <- ev
		}()
		time.Sleep(10 * time.Millisecond)
		s.complete()
		select {
		case ev := <-got:
			if !ev.Done || jsonOf(t, ev.Final) != want {
				t.Fatalf("event %+v", ev)
			}
		case <-time.After(hubWait):
			t.Fatal("Next still blocked after complete")
		}
	})
}

func TestListenClose(t *testing.T) {
	defer goleak.VerifyNone(t)
	h := newHub()
	s := newListenStream(h, protocol.StringID("s1"), listenFilter{tools: true}, testServerInfo)
	errc := make(chan error, 1)
	go func() {
		_, err := s.Next(context.Background())
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond)
	s.Close(Cancelled, "client done")
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("Next after Close returned no error")
		}
	case <-time.After(hubWait):
		t.Fatal("Next still blocked after Close")
	}
	s.Close(Disconnected, "") // idempotent
	s.complete()              // harmless after Close
	h.mu.RLock()
	n := len(h.feeds)
	h.mu.RUnlock()
	if n != 0 {
		t.Fatalf("hub holds %d feeds after Close", n)
	}
}

func TestListenNextContext(t *testing.T) {
	s := newListenStream(newHub(), protocol.StringID("s1"), listenFilter{tools: true}, testServerInfo)
	defer s.Close(Disconnected, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Next = %v, want context.Canceled", err)
	}
}

func TestListenUnshapeableEventFails(t *testing.T) {
	h := newHub()
	s := newListenStream(h, protocol.StringID("s1"), listenFilter{tools: true}, testServerInfo)
	defer s.Close(Completed, "")
	s.feed.offer(change{kind: 99}) // as if a filter let an unknown kind through
	if _, err := s.Next(context.Background()); !errors.Is(err, errUnknownChange) {
		t.Fatalf("Next = %v, want errUnknownChange", err)
	}
}

func TestListenLegacyEvent(t *testing.T) {
	tests := []struct {
		c    change
		want string
	}{
		{change{kind: changeTools}, `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`},
		{change{kind: changePrompts}, `{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}`},
		{change{kind: changeResources}, `{"jsonrpc":"2.0","method":"notifications/resources/list_changed"}`},
		{updated("test://watched"), `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"test://watched"}}`},
	}
	for _, tt := range tests {
		method, params := legacyEvent(tt.c)
		if got := line(t, method, params); got != tt.want {
			t.Errorf("%+v\n got %s\nwant %s", tt.c, got, tt.want)
		}
	}
	if method, _ := legacyEvent(change{kind: 99}); method != "" {
		t.Errorf("unknown kind: method %q, want none", method)
	}
}

func TestListenSessionFeed(t *testing.T) {
	h := newHub()
	f := h.subscribe(func(c change) bool { return c.kind == changeTools }, nil)
	defer f.close()
	h.publish(change{kind: changePrompts})
	h.publish(change{kind: changeTools})
	if got := mustNext(t, f); got.kind != changeTools {
		t.Fatalf("got %+v", got)
	}
	assertEmpty(t, f)
}
