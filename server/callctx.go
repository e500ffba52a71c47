package server

import "context"

// callContext is the context a request's handler gets: the transport's,
// with the runtime's own values for this request (the legacy call for Log
// and RequestClient, the MRTR inputs for Elicit, Sample and ListRoots)
// answered from the call itself. A context.WithValue per value cost two
// allocations each on every request; this node lives in the call.
type callContext struct {
	context.Context
	c *call
}

// callKey finds the call a handler's context belongs to (CallTool).
type callKey struct{}

// Value answers the runtime's keys for this request, shadowing any the
// parent holds: a 2026 request dispatched from inside a legacy handler (a
// relay) is not legacy, and asks for input through MRTR.
func (x *callContext) Value(key any) any {
	switch key.(type) {
	case legacyKey:
		if x.c.modern {
			return nil
		}
		return &x.c.legacy
	case inputsKey:
		if !x.c.asking {
			return nil
		}
		return &x.c.inputs
	case callKey:
		return x.c
	}
	return x.Context.Value(key)
}
