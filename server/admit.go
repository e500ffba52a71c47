package server

import "github.com/snodod/snodod/protocol"

// Admission is a 2026-era request as AdmitModern admitted it: its _meta
// decoded and checked by docs/protocol.md §5.2 steps 2 to 8. A transport
// that admits a request before submitting it sets it as the Request's
// Admission, and Dispatch then uses it instead of checking again.
type Admission struct {
	meta protocol.RequestMeta
	// versions are those it was checked against: a Server with other
	// versions enabled checks the request again, against its own.
	versions protocol.Versions
}

// AdmitError is a request refused by the checks that run before dispatch
// (docs/protocol.md §5.2 steps 2 to 8): none of it ran and nothing of its
// answer is committed, so HTTP answers it with 400 Bad Request
// (§13.3), unlike the errors of the runtime's later steps. Err is the
// JSON-RPC error to answer.
type AdmitError struct{ Err *protocol.Error }

func (e *AdmitError) Error() string { return e.Err.Message }

// AdmitModern runs docs/protocol.md §5.2 steps 2 to 8 on the params of a
// 2026-era request, as its decoder split them (protocol.Message's Split),
// with enabled the versions to accept: steps 2 to 5 (the _meta object
// and its names, version and capabilities), then check, the transport's
// step 6 (HTTP's headers, given the version the _meta names; nil: none),
// then steps 7 and 8 (the version enabled, the detailed metadata). The
// first refusal is returned; otherwise the Admission to set on the
// Request. Dispatch runs the same checks itself for a request without one
// (stdio's, which the executor admits first).
func AdmitModern(split *protocol.Split, enabled protocol.Versions, check func(version string) *protocol.Error) (*Admission, *AdmitError) {
	a := &Admission{versions: enabled}
	if err := admitModern(&a.meta, split, enabled, check); err != nil {
		return nil, &AdmitError{Err: err}
	}
	return a, nil
}

// admitModern is AdmitModern into m, which is overwritten (and partly set
// on error): the one place the checks before dispatch run, for both
// transports.
func admitModern(m *protocol.RequestMeta, split *protocol.Split, enabled protocol.Versions, check func(version string) *protocol.Error) *protocol.Error {
	// Step 2 holds for every request the decoder called 2026-era
	// (docs/protocol.md §1.2); HTTP routes one by its header too.
	if err := m.DecodeModern(split); err != nil {
		return err
	}
	if check != nil {
		if err := check(m.ProtocolVersion); err != nil {
			return err
		}
	}
	return m.Check(enabled)
}
