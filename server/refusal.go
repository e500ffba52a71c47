package server

import (
	"errors"

	"github.com/snodod/snodod/protocol"
)

// InvalidParamsError is what a resource or prompt handler returns to
// refuse a request for a reason of its own, the client's to fix: the
// client gets -32602 with Message, and Data as the error's data when set
// (a file outside the served folder, a file too large). Any other error
// of these handlers is answered with a bare -32603 and logged.
type InvalidParamsError struct {
	Message string
	Data    any
}

func (e *InvalidParamsError) Error() string { return e.Message }

// refusal returns the -32602 error an InvalidParamsError in err's chain
// asks for, or nil.
func refusal(err error) *protocol.Error {
	if pe, ok := errors.AsType[*InvalidParamsError](err); ok {
		return &protocol.Error{Code: protocol.CodeInvalidParams, Message: pe.Message, Data: pe.Data}
	}
	return nil
}
