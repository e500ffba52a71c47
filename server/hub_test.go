package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// hubWait bounds every blocking call in the hub, listen and MRTR tests; it
// is a failure deadline, never a synchronisation device.
const hubWait = 10 * time.Second

func updated(uri string) change { return change{kind: changeResourceUpdated, uri: uri} }

// drain returns the changes waiting on f, without blocking.
func drain(t *testing.T, f *feed) []change {
	t.Helper()
	var got []change
	for {
		f.mu.Lock()
		c, ok := f.waiting.pop()
		f.mu.Unlock()
		if !ok {
			return got
		}
		got = append(got, c)
	}
}

// mustNext calls f.next with a failure deadline.
func mustNext(t *testing.T, f *feed) change {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), hubWait)
	defer cancel()
	c, err := f.next(ctx)
	if err != nil {
		t.Fatalf("next: %v", err)
	}
	return c
}

// assertEmpty checks that nothing is waiting on f.
func assertEmpty(t *testing.T, f *feed) {
	t.Helper()
	f.mu.Lock()
	n := f.waiting.n
	f.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d changes still waiting, want none", n)
	}
}

func TestHubDeliversInOrderAndMerges(t *testing.T) {
	h := newHub()
	f := h.subscribe(nil, nil)
	defer f.close()
	for _, c := range []change{{kind: changeTools}, updated("a"), {kind: changeTools}, updated("b"),
		updated("a"), {kind: changePrompts}, {kind: changeResources}, {kind: changePrompts}} {
		h.publish(c)
	}
	want := []change{{kind: changeTools}, updated("a"), updated("b"), {kind: changePrompts}, {kind: changeResources}}
	for i, w := range want {
		if got := mustNext(t, f); got != w {
			t.Fatalf("change %d = %+v, want %+v", i, got, w)
		}
	}
	assertEmpty(t, f)
	// Once delivered, an identical change is new again.
	h.publish(change{kind: changeTools})
	if got := mustNext(t, f); got != (change{kind: changeTools}) {
		t.Fatalf("after delivery: %+v", got)
	}
}

func TestFeedOverflow(t *testing.T) {
	uris := func(from, to int) []change {
		var cs []change
		for i := from; i < to; i++ {
			cs = append(cs, updated(fmt.Sprint("test://r/", i)))
		}
		return cs
	}
	tests := []struct {
		name    string
		publish []change
		want    []change
	}{
		{"exactly 100 wait", uris(0, 100), uris(0, 100)},
		{"the 101st drops the oldest", uris(0, 101), uris(1, 101)},
		{"150 keep the newest 100", uris(0, 150), uris(50, 150)},
		{"a duplicate at 100 merges, drops nothing", append(uris(0, 100), updated("test://r/0")), uris(0, 100)},
		{"a duplicate of the dropped one is new", append(uris(0, 101), updated("test://r/0")),
			append(uris(2, 101), updated("test://r/0"))},
		{"list changes count like updates", append([]change{{kind: changeTools}}, uris(0, 100)...), uris(0, 100)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHub()
			f := h.subscribe(nil, nil)
			defer f.close()
			for _, c := range tt.publish {
				h.publish(c)
			}
			got := drain(t, f)
			if len(got) != len(tt.want) {
				t.Fatalf("%d waiting, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("waiting[%d] = %+v, want %+v", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestFeedFilter(t *testing.T) {
	h := newHub()
	onlyA := h.subscribe(func(c change) bool { return c == updated("a") }, nil)
	defer onlyA.close()
	all := h.subscribe(nil, nil)
	defer all.close()
	h.publish(change{kind: changeTools})
	h.publish(updated("b"))
	h.publish(updated("a"))
	if got := drain(t, onlyA); len(got) != 1 || got[0] != updated("a") {
		t.Fatalf("filtered feed got %+v", got)
	}
	if got := drain(t, all); len(got) != 3 {
		t.Fatalf("unfiltered feed got %+v", got)
	}
}

func TestFeedNextUnblocksOnClose(t *testing.T) {
	defer goleak.VerifyNone(t)
	h := newHub()
	f := h.subscribe(nil, nil)
	h.publish(change{kind: changeTools}) // dropped by close
	mustNext(t, f)
	errc := make(chan error, 1)
	go func() {
		_, err := f.next(context.Background())
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond) // let it block; the result does not depend on it
	f.close()
	select {
	case err := <-errc:
		if !errors.Is(err, errFeedClosed) {
			t.Fatalf("next after close = %v, want errFeedClosed", err)
		}
	case <-time.After(hubWait):
		t.Fatal("next still blocked after close")
	}
	f.close() // idempotent
	h.publish(change{kind: changeTools})
	if _, err := f.next(context.Background()); !errors.Is(err, errFeedClosed) {
		t.Fatalf("next on a closed feed = %v", err)
	}
	h.mu.RLock()
	n := len(h.feeds)
	h.mu.RUnlock()
	if n != 0 {
		t.Fatalf("hub still holds %d feeds after close", n)
	}
}

func TestFeedCloseWinsOverWaiting(t *testing.T) {
	h := newHub()
	f := h.subscribe(nil, nil)
	h.publish(change{kind: changeTools})
	f.close()
	if _, err := f.next(context.Background()); !errors.Is(err, errFeedClosed) {
		t.Fatalf("next = %v, want errFeedClosed", err)
	}
}

func TestFeedNextUnblocksOnContext(t *testing.T) {
	defer goleak.VerifyNone(t)
	h := newHub()
	f := h.subscribe(nil, nil)
	defer f.close()

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := f.next(ctx)
		errc <- err
	}()
	time.Sleep(10 * time.Millisecond)
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("next = %v, want context.Canceled", err)
		}
	case <-time.After(hubWait):
		t.Fatal("next still blocked after cancel")
	}

	dctx, dcancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer dcancel()
	if _, err := f.next(dctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("next = %v, want context.DeadlineExceeded", err)
	}
	// An ended context wins over a waiting change, which stays queued.
	h.publish(change{kind: changeTools})
	if _, err := f.next(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("next with a change waiting = %v, want context.Canceled", err)
	}
	if got := mustNext(t, f); got.kind != changeTools {
		t.Fatalf("change kept = %+v", got)
	}
}

func TestFeedNextWakesOnPublish(t *testing.T) {
	defer goleak.VerifyNone(t)
	h := newHub()
	f := h.subscribe(nil, nil)
	defer f.close()
	ctx, cancel := context.WithTimeout(context.Background(), hubWait)
	defer cancel()
	got := make(chan change, 1)
	go func() {
		c, _ := f.next(ctx)
		got <- c
	}()
	time.Sleep(10 * time.Millisecond)
	h.publish(updated("x"))
	select {
	case c := <-got:
		if c != updated("x") {
			t.Fatalf("got %+v", c)
		}
	case <-time.After(hubWait):
		t.Fatal("next not woken by publish")
	}
}

// TestHubConcurrentPublish publishes from several goroutines to thousands
// of feeds while others subscribe and close: every idle feed ends up with
// exactly the 100 distinct changes, and publish never waits for a reader.
func TestHubConcurrentPublish(t *testing.T) {
	defer goleak.VerifyNone(t)
	const feeds, publishers, perPublisher = 2000, 4, 25
	h := newHub()
	fs := make([]*feed, feeds)
	for i := range fs {
		fs[i] = h.subscribe(nil, nil)
	}
	var wg sync.WaitGroup
	for p := range publishers {
		wg.Go(func() {
			for i := range perPublisher {
				h.publish(updated(fmt.Sprint("test://", p, "/", i)))
				h.publish(updated(fmt.Sprint("test://", p, "/", i))) // merges
			}
		})
	}
	for range 4 {
		wg.Go(func() {
			for range 200 {
				h.subscribe(nil, nil).close()
			}
		})
	}
	wg.Wait()
	for i, f := range fs {
		got := drain(t, f)
		if len(got) != publishers*perPublisher {
			t.Fatalf("feed %d holds %d changes, want %d", i, len(got), publishers*perPublisher)
		}
		seen := map[change]bool{}
		for _, c := range got {
			if seen[c] {
				t.Fatalf("feed %d holds %+v twice", i, c)
			}
			seen[c] = true
		}
		f.close()
	}
}

// TestHubConcurrentConsumers reads feeds while publishers write: changes
// may be dropped under overflow but each publisher's changes arrive in the
// order published, and never twice.
func TestHubConcurrentConsumers(t *testing.T) {
	defer goleak.VerifyNone(t)
	const consumers, publishers, perPublisher = 16, 4, 2000
	h := newHub()
	ctx, cancel := context.WithTimeout(context.Background(), hubWait)
	defer cancel()
	var consumersDone, publishersDone sync.WaitGroup
	errs := make(chan error, consumers)
	for range consumers {
		f := h.subscribe(func(c change) bool { return c.kind == changeResourceUpdated }, nil)
		consumersDone.Go(func() {
			defer f.close()
			last := make([]int, publishers)
			for i := range last {
				last[i] = -1
			}
			for {
				c, err := f.next(ctx)
				if err != nil {
					errs <- err
					return
				}
				var p, i int
				if _, err := fmt.Sscanf(c.uri, "test://%d/%d", &p, &i); err != nil {
					errs <- err
					return
				}
				if p < 0 {
					errs <- nil // the end marker
					return
				}
				if i <= last[p] {
					errs <- fmt.Errorf("publisher %d: %d after %d", p, i, last[p])
					return
				}
				last[p] = i
			}
		})
	}
	for p := range publishers {
		publishersDone.Go(func() {
			for i := range perPublisher {
				h.publish(updated(fmt.Sprint("test://", p, "/", i)))
				h.publish(change{kind: changeTools}) // filtered out
			}
		})
	}
	publishersDone.Wait()
	h.publish(updated("test://-1/0"))
	consumersDone.Wait()
	for range consumers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func BenchmarkHubPublish(b *testing.B) {
	h := newHub()
	for range 5000 {
		f := h.subscribe(func(c change) bool { return c.kind == changeTools }, nil)
		defer f.close()
	}
	for b.Loop() {
		h.publish(change{kind: changeTools})
		h.publish(change{kind: changePrompts})
	}
}
