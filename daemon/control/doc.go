// Package control is the daemon's control protocol: its wire types, the
// rows of `snodod status`, and a Client that speaks it. `snodod connect`,
// `status`, `kill`, `upgrade`, `upstream`, `logs`, `approve` and `diff`
// are thin shells around a Client; package daemon serves the same types. It imports nothing of
// the daemon's runtime, so that a program that only asks a daemon for its
// status does not link the daemon.
//
// # The wire
//
// A client connects to the control socket (daemon.control_socket), sends
// one JSON request line, and reads JSON lines back. The first line is a
// Reply: {"ok":true,...}, or {"ok":false,"error":"…"} and the connection
// is closed. The ops:
//
//	{"op":"connect","view":"gh","cwd":"/p"} + SCM_RIGHTS [stdin, stdout]
//	    → {"ok":true,"session":7}, and when the session ends
//	      {"ended":true,"error":""}        (error: why it ended; "" when cleanly)
//	{"op":"status"}                        → {"ok":true, <Status fields>}
//	{"op":"kill","session":7}              → {"ok":true,"session":7} once it has ended
//	{"op":"upgrade","binary":"/p"}         → {"ok":true,"pid":N} once the new process
//	                                         (pid N) serves every session
//	{"op":"upstream","name":"gh","action":"restart"}
//	                                       → {"ok":true,"instances":[{"instance":"all","state":"ready","pid":N}]}
//	                                         once the action is done (start, stop, restart)
//	{"op":"logs","name":"gh","follow":true} → {"ok":true}, then {"log":"…"} lines;
//	                                         name "" is the daemon's own log
//	{"op":"login","name":"gh"}             → {"ok":true,"url":"https://…"} (the authorization
//	                                         URL), then, once the browser's redirect reached the
//	                                         daemon's loopback listener (or the client sent
//	                                         {"redirect":"http://127.0.0.1:…/callback?code=…"},
//	                                         pasted), {"ok":true,"result":"logged in at …"}
//	{"op":"logout","name":"gh"}            → {"ok":true,"revoked":true}
//	{"op":"approve","name":"gh","tool":"search"}
//	                                       → {"ok":true,"approved":["search"]} (tool absent:
//	                                         all it holds; "released":true ends a quarantine)
//	{"op":"diff","name":"gh"}              → {"ok":true,"diff":"tool search: changed…"}
//	{"op":"fault","session":7}             → {"ok":true}   (a test hook: SNODOD_TEST_FAULTS=1 only)
//
// A connect's descriptors ride on the first byte of its request line, in
// one sendmsg(2); "view" (an upstream to pass through; absent: the
// aggregated view) and "cwd" (the client's working directory, for share =
// "cwd" and "session" upstreams) may be left out. Its connection stays
// open while the session runs: the daemon ends the session when the
// client's side closes first, and an upgrade hands the connection on to
// the new daemon with the session, which writes the Ended line in its
// turn. "relay": true is refused: a client that cannot pass descriptors
// connects to the session socket and copies bytes itself.
//
// Peers are checked as on the session socket (the daemon's uid or
// daemon.allowed_uids); an upgrade, which runs a binary as the daemon,
// a login or logout, which act on the daemon's user's accounts at
// remote servers, and an approve, which trusts a server's definitions for
// every view, only from the daemon's own uid. During a drain only "status" is
// answered; the rest is refused with a reason.
//
// The wire is kept compatible across versions: an upgrade hands a waiting
// connect's connection from an old daemon to a new one, and `snodod
// upgrade` of one version asks a daemon of another. Members are only ever
// added; a client ignores the ones it does not know.
package control
