package main

import (
	"fmt"
	"io"

	"github.com/snodod/snodod/daemon/control"
)

// writeHTTPStatus writes the HTTP listener's line of `snodod status`, when
// the daemon has one.
func writeHTTPStatus(w io.Writer, h *control.HTTP) {
	if h == nil {
		return
	}
	node := ""
	if h.NodeID != "" {
		node = ", node " + h.NodeID
	}
	refused := ""
	if r := refusedText(h.Refused); r != "" {
		refused = ", refused: " + r
	}
	fmt.Fprintf(w, "http: %s on %s%s (%s)%s, %d sessions (max %d, %d per client), %d streams (%d listens), requests %d 2026 + %d legacy%s, %d restarts\n",
		h.State, h.Listen, h.Path, h.Access, node, h.Sessions, h.MaxSessions, h.MaxSessionsPerPeer, h.Streams, h.Listens,
		h.Requests2026, h.RequestsLegacy, refused, h.Restarts)
}
