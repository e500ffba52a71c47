package control

// The ops of Request.Op.
const (
	OpConnect  = "connect"
	OpStatus   = "status"
	OpKill     = "kill"
	OpUpgrade  = "upgrade"
	OpUpstream = "upstream"
	OpLogs     = "logs"
	OpLogin    = "login"
	OpLogout   = "logout"
	// OpApprove approves what a pinned or quarantined hosted server
	// holds; OpDiff describes it (docs/views.md, "Pinned definitions").
	OpApprove = "approve"
	OpDiff    = "diff"
	// OpFault is a test hook (SNODOD_TEST_FAULTS=1): it makes a session's
	// coordinator fail once, as a bug would.
	OpFault = "fault"
)

// Ops lists every op, in the order the daemon's refusal of an unknown one
// names them.
var Ops = []string{OpConnect, OpStatus, OpKill, OpUpgrade, OpUpstream, OpLogs, OpLogin, OpLogout, OpApprove, OpDiff, OpFault}

// Upstream actions (Request.Action of OpUpstream).
const (
	ActionStart   = "start"
	ActionStop    = "stop"
	ActionRestart = "restart"
)

// Request is one control request: the one line a client sends.
type Request struct {
	// Op is one of Ops.
	Op string `json:"op"`
	// Relay, for connect, asks for a byte relay instead of descriptor
	// hand-over; the daemon refuses it (use the session socket).
	Relay bool `json:"relay,omitempty"`
	// Session is the session a kill or a fault is meant for.
	Session uint64 `json:"session,omitempty"`
	// View, for connect, is the upstream to pass through; "" is the
	// aggregated view. Cwd is the client's working directory.
	View string `json:"view,omitempty"`
	Cwd  string `json:"cwd,omitempty"`
	// Name is the upstream an upstream or logs request is about ("" for
	// logs: the daemon's own log); Action is one of the Action constants;
	// Follow keeps a logs reply open.
	Name   string `json:"name,omitempty"`
	Action string `json:"action,omitempty"`
	Follow bool   `json:"follow,omitempty"`
	// Binary is the executable an upgrade starts (an absolute path); ""
	// is the daemon's own.
	Binary string `json:"binary,omitempty"`
	// Redirect is the second line of a login: the URL the person's
	// browser was sent back to, pasted (snodod login --no-browser).
	Redirect string `json:"redirect,omitempty"`
	// Tool, for approve, is the one tool of Name to approve; "" approves
	// all that Name holds.
	Tool string `json:"tool,omitempty"`
}

// Reply is the first line of every answer (a status reply carries the
// Status members beside OK).
type Reply struct {
	OK    bool   `json:"ok"`
	Error string `json:"error,omitempty"`
	// Session is the id of the session a connect started, or a kill
	// ended.
	Session uint64 `json:"session,omitempty"`
	// PID is the new daemon's after an upgrade.
	PID int `json:"pid,omitempty"`
	// Instances are what an upstream action left of the upstream's
	// instances (a daemon older than this field sends none).
	Instances []Instance `json:"instances,omitempty"`
	// URL is a login's authorization URL (its first reply); Result what
	// the login got (its last: "logged in at …, token valid for 1h").
	URL    string `json:"url,omitempty"`
	Result string `json:"result,omitempty"`
	// Revoked says that a logout revoked the tokens at the authorization
	// server (else they are forgotten only).
	Revoked bool `json:"revoked,omitempty"`
	// Approved are the tools an approve approved; Released says that it
	// ended the server's quarantine. Diff is a diff's description of what
	// the server holds ("" when nothing).
	Approved []string `json:"approved,omitempty"`
	Released bool     `json:"released,omitempty"`
	Diff     string   `json:"diff,omitempty"`
}

// Instance is one instance of a hosted server after an upstream action.
type Instance struct {
	// Instance is its share key as status shows it: "all", a directory,
	// "session 7".
	Instance string `json:"instance"`
	// State is its state once the action was done (ready, stopped,
	// backoff, failed …); PID its process's, when it has one.
	State string `json:"state"`
	PID   int    `json:"pid,omitempty"`
	// Cause says why a start failed.
	Cause string `json:"cause,omitempty"`
}

// Ended is the last line of a connect: the session is over.
type Ended struct {
	Ended bool `json:"ended"`
	// Error says why the session ended, "" when it ended cleanly (end of
	// input, or the daemon's drain).
	Error string `json:"error"`
}

// LogLine is one line of a logs answer after its Reply: text of the log,
// which may hold several lines (invalid UTF-8 replaced).
type LogLine struct {
	Log string `json:"log"`
}
