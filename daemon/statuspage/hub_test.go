package statuspage

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/internal/eventually"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// counted is a Status whose version names how many times it was called,
// so that each snapshot differs from the last and names its render.
type counted struct {
	calls atomic.Int64
	pad   string // made part of every snapshot (a large one: the stuck viewer)
}

func (c *counted) status() *control.Status {
	n := c.calls.Add(1)
	st := &control.Status{State: "running", Version: fmt.Sprintf("render-%d.", n), PID: 1, Started: time.Now()}
	if c.pad != "" {
		st.Warnings = []string{c.pad}
	}
	return st
}

// serve runs a page on a real loopback server until the test ends.
func serve(t *testing.T, o Options) (*Page, *httptest.Server) {
	t.Helper()
	p := New(o)
	mux := http.NewServeMux()
	p.Register(mux)
	srv := httptest.NewServer(p.Credentials(mux))
	t.Cleanup(func() {
		p.Close()
		srv.Close()
	})
	return p, srv
}

// stream is one viewer of /events: each event's data, as it arrives.
type stream struct {
	events chan string
	cancel context.CancelFunc
	done   chan struct{}
}

func openStream(t *testing.T, url string) (*stream, *http.Response) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		cancel()
		return nil, resp
	}
	s := &stream{events: make(chan string, 1024), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		defer resp.Body.Close()
		r := bufio.NewReader(resp.Body)
		var data strings.Builder
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			switch {
			case strings.HasPrefix(line, "data: "):
				data.WriteString(line[len("data: "):])
			case line == "\n" && data.Len() > 0:
				s.events <- data.String()
				data.Reset()
			}
		}
	}()
	t.Cleanup(s.close)
	return s, resp
}

func (s *stream) close() {
	s.cancel()
	<-s.done
}

// await waits for an event holding want, skipping older ones.
func (s *stream) await(t *testing.T, want string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				t.Fatalf("the stream ended before %q", want)
			}
			if strings.Contains(ev, want) {
				return
			}
		case <-timeout:
			t.Fatalf("no event with %q", want)
		}
	}
}

// 100 viewers cost one snapshot per tick: each gets every tick's
// snapshot, and the producer made exactly one per tick.
func TestFanOutOneSnapshotPerTick(t *testing.T) {
	const viewers, ticks = 100, 5
	src := &counted{}
	tick := make(chan time.Time)
	p, srv := serve(t, Options{Status: src.status, Tick: tick, MaxViewers: viewers})
	streams := make([]*stream, viewers)
	for i := range streams {
		s, resp := openStream(t, srv.URL)
		if s == nil {
			t.Fatalf("viewer %d: %s", i, resp.Status)
		}
		streams[i] = s
	}
	for _, s := range streams {
		s.await(t, "render-") // the first, made when the first viewer came
	}
	base := src.calls.Load()
	if p.Snapshots() != uint64(base) {
		t.Fatalf("%d snapshots for %d renders", p.Snapshots(), base)
	}
	for k := int64(1); k <= ticks; k++ {
		tick <- time.Now()
		want := fmt.Sprintf("render-%d.", base+k)
		var wg sync.WaitGroup
		for _, s := range streams {
			wg.Go(func() { s.await(t, want) })
		}
		wg.Wait()
	}
	if got := src.calls.Load() - base; got != ticks {
		t.Errorf("%d viewers, %d ticks: %d snapshots, want one per tick", viewers, ticks, got)
	}
	if p.Viewers() != viewers {
		t.Errorf("%d viewers, want %d", p.Viewers(), viewers)
	}
}

// A tick where nothing changed sends nothing, and costs one snapshot.
func TestUnchangedSnapshotNotSent(t *testing.T) {
	tick := make(chan time.Time)
	var calls atomic.Int64
	st := &control.Status{State: "running", Version: "same", Started: time.Now().Add(-time.Hour)}
	p, srv := serve(t, Options{Status: func() *control.Status { calls.Add(1); return st }, Tick: tick})
	s, _ := openStream(t, srv.URL)
	s.await(t, "version same")
	tick <- time.Now()
	tick <- time.Now() // the first tick's produce has ended
	eventually.True(t, "three snapshots", func() bool { return p.Snapshots() == 3 })
	select {
	case ev := <-s.events:
		t.Errorf("an unchanged snapshot was sent again: %.80s", ev)
	default:
	}
}

// A viewer that reads nothing is dropped once a write to it outlasts the
// write timeout; meanwhile the producer and the other viewer go on at
// every tick.
func TestStuckViewerDropped(t *testing.T) {
	src := &counted{pad: strings.Repeat("x", 256<<10)} // 256 KiB per snapshot
	tick := make(chan time.Time)
	p, srv := serve(t, Options{Status: src.status, Tick: tick, WriteTimeout: time.Second})
	healthy, _ := openStream(t, srv.URL)
	healthy.await(t, "render-1.")

	stuck, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer stuck.Close()
	stuck.(*net.TCPConn).SetReadBuffer(4096)
	fmt.Fprintf(stuck, "GET /events HTTP/1.1\r\nHost: %s\r\n\r\n", srv.Listener.Addr())
	eventually.True(t, "two viewers", func() bool { return p.Viewers() == 2 })

	start, last := time.Now(), 1
	for k := 2; p.Dropped() == 0; k++ {
		if k > 1000 {
			t.Fatalf("the stuck viewer is not dropped after %d snapshots of 256 KiB", k)
		}
		tick <- time.Now()
		healthy.await(t, fmt.Sprintf("render-%d.", k))
		last = k
	}
	eventually.True(t, "the stuck viewer gone", func() bool { return p.Viewers() == 1 })
	t.Logf("stuck viewer dropped after %v", time.Since(start))
	// The healthy one still gets every tick.
	tick <- time.Now()
	healthy.await(t, fmt.Sprintf("render-%d.", last+1))
}

// admin.max_viewers is exact: that many streams are served, one more
// gets 503 with the bound named, and once one leaves another is served.
func TestViewerBound(t *testing.T) {
	const bound = 3
	src := &counted{}
	p, srv := serve(t, Options{Status: src.status, Tick: make(chan time.Time), MaxViewers: bound})
	var open []*stream
	for range bound {
		s, resp := openStream(t, srv.URL)
		if s == nil {
			t.Fatalf("viewer %d of %d: %s", len(open)+1, bound, resp.Status)
		}
		open = append(open, s)
	}
	s, resp := openStream(t, srv.URL)
	if s != nil {
		t.Fatal("a viewer beyond the bound was served")
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" ||
		!strings.Contains(string(body), "already has 3 live viewers (admin.max_viewers)") {
		t.Errorf("beyond the bound: %s, Retry-After %q, %q", resp.Status, resp.Header.Get("Retry-After"), body)
	}
	open[0].close()
	eventually.True(t, "a viewer left", func() bool { return p.Viewers() == bound-1 })
	if s, resp := openStream(t, srv.URL); s == nil {
		t.Errorf("at the bound again after one left: %s", resp.Status)
	}
}
