package executor

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"
)

// A job's context ends as a context.WithCancel would: Done closes, Err is
// Canceled, contexts derived from it end with it, and AfterFunc runs;
// values come from the submitter's context, its cancellation does not.
func TestJobContext(t *testing.T) {
	type key struct{}
	parent, cancelParent := context.WithCancel(context.WithValue(context.Background(), key{}, "v"))
	c := &jobContext{parent: context.WithoutCancel(parent)}
	cancelParent()
	if c.Err() != nil || c.Value(key{}) != "v" {
		t.Fatalf("Err %v, Value %v before cancel", c.Err(), c.Value(key{}))
	}
	if _, ok := c.Deadline(); ok {
		t.Error("a deadline")
	}
	child, cancelChild := context.WithTimeout(c, time.Hour)
	defer cancelChild()
	ran := make(chan struct{})
	context.AfterFunc(c, func() { close(ran) })
	stopped := context.AfterFunc(c, func() { t.Error("a stopped AfterFunc ran") })
	if !stopped() {
		t.Error("stop did not stop it")
	}
	done := c.Done()
	select {
	case <-done:
		t.Fatal("done before cancel")
	default:
	}
	goroutines := runtime.NumGoroutine()
	c.cancel()
	c.cancel() // once
	<-done
	<-child.Done()
	<-ran
	if !errors.Is(c.Err(), context.Canceled) || !errors.Is(child.Err(), context.Canceled) || context.Cause(c) != context.Canceled {
		t.Errorf("Err %v, child %v, Cause %v", c.Err(), child.Err(), context.Cause(c))
	}
	// A context that ended before anyone asked: Done is closed at once,
	// and AfterFunc runs at once.
	late := &jobContext{parent: context.Background()}
	late.cancel()
	<-late.Done()
	ranLate := make(chan struct{})
	context.AfterFunc(late, func() { close(ranLate) })
	<-ranLate
	if n := runtime.NumGoroutine(); n > goroutines+1 {
		t.Errorf("%d goroutines after the cancellation, %d before", n, goroutines)
	}
}
