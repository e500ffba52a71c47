package faults

import (
	"context"
	"testing"
)

// Unarmed, nothing exists: New gives nil, whose C is nil (a coordinator
// never takes a fault from it) and whose Release is a no-op.
func TestUnarmed(t *testing.T) {
	if Armed() {
		t.Skip("armed by the environment")
	}
	p := New("session", nil)
	if p != nil || p.C() != nil || From(With(context.Background(), p)) != nil {
		t.Fatalf("unarmed: point %v", p)
	}
	p.Release()
	if Inject("session") {
		t.Fatal("Inject found a point while unarmed")
	}
}

// Armed: Inject hands the failure to the instance selecting on C, does not
// block once the session ended, and finds nothing after Release.
func TestInject(t *testing.T) {
	t.Cleanup(Arm())
	done := make(chan struct{})
	p := New("session", done)
	if From(With(context.Background(), p)) != p {
		t.Fatal("the context does not carry the point")
	}
	taken := make(chan struct{})
	go func() {
		<-p.C()
		close(taken)
	}()
	if !Inject("session") {
		t.Fatal("Inject did not find the point")
	}
	<-taken
	close(done)
	if !Inject("session") { // nobody selects on C: returns because done is closed
		t.Fatal("Inject did not find the point")
	}
	p.Release()
	if Inject("session") {
		t.Fatal("Inject found a released point")
	}
}
