// Command fakeupstream is a small MCP server over stdio for snodod's tests:
// every behaviour a hosted server can show (docs/upstreams.md) is one flag
// or one tool call away. Tests build it with `go build` into a
// temporary directory and run it as an upstream.
//
// It speaks the legacy era (2025-06-18, 2025-11-25: initialize, then
// requests), the 2026 era (2026-07-28: server/discover, _meta on every
// request, input_required instead of requests to the client), or both. It
// writes only JSON-RPC lines to stdout, except where a flag or tool says
// otherwise, and logs to stderr.
//
// Flags:
//
//	-era legacy|2026|both   which eras it speaks (default legacy)
//	-versions LIST          legacy versions it accepts, preferred first
//	                        (default 2025-11-25,2025-06-18); another proposal
//	                        gets the first
//	-discover-error CODE    legacy: the error code answered to server/discover
//	-refuse-first-discover  2026: the first server/discover answered -32022 naming 2026-07-28
//	                        (default -32601); 0 never answers it (silence)
//	-discover-delay D       delay before answering server/discover
//	-initialize-delay D     delay before answering initialize
//	-name, -server-version  serverInfo (default fakeupstream, 1.0.0)
//	-instructions TEXT      instructions in the InitializeResult/DiscoverResult
//	-tools N                extra tools tool-001 … (default 0), listed after
//	                        the behaviour tools below
//	-prompts N, -resources N, -templates N
//	                        prompts prompt-001 …, resources fake://res/001 …,
//	                        templates fake://tpl/001/{x} … (default 1 each)
//	-page-size N            items per list page, 0 for one page (default 0)
//	-repeat-cursor          every page's nextCursor is the same ("again")
//	-list-changed           declare listChanged for tools, prompts, resources
//	-id-last                write "id" after "result"/"error" (as the
//	                        TypeScript SDK does) instead of before
//	-exit-at-start CODE     write -exit-stderr, then exit with CODE at once
//	-exit-stderr TEXT       (default "fatal: cannot start")
//	-start-delay D          sleep before reading stdin (a slow start)
//	-stderr-at-start N      write N bytes of stderr before reading anything
//	-probe-stderr N         write N bytes of stderr when server/discover arrives
//	-banner TEXT            write TEXT as a non-JSON line on stdout at start
//	-grandchild PIDFILE     start a grandchild that ignores SIGTERM and sleeps,
//	                        writing its pid to PIDFILE before serving
//	-setsid                 the grandchild calls setsid: it leaves the group
//	                        and the session (gpg-agent, a language server)
//	-ignore-term            ignore SIGTERM itself
//	-ignore-eof             keep running after stdin ends (until signalled)
//	-no-strict-ids          accept a request id seen before (by default a
//	                        reused id is refused with -32600 "id reused")
//	-pings MODE             answer (default), ignore (never answer) or error
//	                        (-32601) pings, answering everything else (pings.go)
//	-tools-file PATH        more tools: a JSON array of their definitions,
//	                        read at start, listed last; a call echoes
//	                        (toolsfile.go)
//	-url-elicitation        legacy: the first elicit call answers -32042 with
//	                        one URL to open, later ones {authorized: true}
//	                        (urlelicit.go)
//
// Tools (tools/call NAME with arguments):
//
//	echo {…}                 structuredContent {id, meta, arguments}: the
//	                         request's raw id and params._meta as received
//	slow {ms, ignoreCancel, announce}
//	                         wait ms (default 1000), then echo; a cancel ends
//	                         it unanswered unless ignoreCancel (then it
//	                         answers ms later); announce first sends progress
//	                         0 to params._meta.progressToken (it has started)
//	progress {steps, ms, repeat}
//	                         send steps progress notifications (progress 1…,
//	                         total steps) to params._meta.progressToken, ms
//	                         apart; repeat sends each value twice; then echo
//	crash {code, stderr}     write stderr, then exit with code (default 3)
//	never                    never answer
//	big {bytes}              answer a text of bytes bytes (a line over a limit)
//	stderr {bytes}           write bytes of stderr, then answer
//	junk {text}              write text as a non-JSON stdout line, then answer
//	sample, elicit, roots    legacy: send sampling/createMessage,
//	                         elicitation/create or roots/list to the client and
//	                         answer its response as structuredContent
//	                         {response} or {error}; 2026: answer
//	                         input_required (inputRequests.u1, requestState
//	                         "fake-state"), and with inputResponses.u1 answer
//	                         structuredContent {response}
//	ping-client              send ping to the client; answer its response
//	notify {method, params}  send that notification (list_changed,
//	                         notifications/resources/updated …), then answer
//	history                  structuredContent {requests: [{id, method, tool}],
//	                         cancelled: [{requestId, reason}]}: what it saw
//	flood {ms, count, methods, settle, hold}
//	                         write requests to the client with fresh ids as
//	                         fast as it can (sampling, elicitation, roots,
//	                         ping), never waiting for their answers, then
//	                         answer {sent, answered, refused, failed}, or
//	                         with hold never answer (flood.go)
//
// It also serves ping, prompts/list, prompts/get, resources/list,
// resources/templates/list, resources/read, resources/subscribe,
// resources/unsubscribe, completion/complete and logging/setLevel. A 2026
// request without io.modelcontextprotocol/protocolVersion 2026-07-28 in
// _meta gets -32602 or -32022; initialize in the 2026-only era gets -32600
// with data.supported ["2026-07-28"].
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

type options struct {
	era            string
	versions       []string
	discoverError  int
	discoverDelay  time.Duration
	refuseDiscover bool
	initDelay      time.Duration
	name, version  string
	instructions   string
	tools          int
	prompts        int
	resources      int
	templates      int
	pageSize       int
	repeatCursor   bool
	listChanged    bool
	idLast         bool
	exitAtStart    int
	exitStderr     string
	startDelay     time.Duration
	stderrAtStart  int
	probeStderr    int
	banner         string
	grandchild     string
	setsid         bool
	ignoreTerm     bool
	ignoreEOF      bool
	noStrictIDs    bool
	grandchildRole bool
}

func main() {
	var o options
	var versions string
	flag.StringVar(&o.era, "era", "legacy", "legacy, 2026 or both")
	flag.StringVar(&versions, "versions", "2025-11-25,2025-06-18", "legacy versions accepted, preferred first")
	flag.IntVar(&o.discoverError, "discover-error", -32601, "legacy: error code for server/discover; 0 never answers")
	flag.DurationVar(&o.discoverDelay, "discover-delay", 0, "delay before answering server/discover")
	flag.BoolVar(&o.refuseDiscover, "refuse-first-discover", false, "2026: answer the first server/discover -32022, naming 2026-07-28 supported (SEP-2575)")
	flag.DurationVar(&o.initDelay, "initialize-delay", 0, "delay before answering initialize")
	flag.StringVar(&o.name, "name", "fakeupstream", "serverInfo.name")
	flag.StringVar(&o.version, "server-version", "1.0.0", "serverInfo.version")
	flag.StringVar(&o.instructions, "instructions", "", "instructions")
	flag.IntVar(&o.tools, "tools", 0, "extra tools")
	flag.IntVar(&o.prompts, "prompts", 1, "prompts")
	flag.IntVar(&o.resources, "resources", 1, "resources")
	flag.IntVar(&o.templates, "templates", 1, "resource templates")
	flag.IntVar(&o.pageSize, "page-size", 0, "items per list page; 0 for one page")
	flag.BoolVar(&o.repeatCursor, "repeat-cursor", false, "every nextCursor is the same")
	flag.BoolVar(&o.listChanged, "list-changed", false, "declare listChanged")
	flag.BoolVar(&o.idLast, "id-last", false, "write id after result/error")
	flag.IntVar(&o.exitAtStart, "exit-at-start", -1, "exit with this code at once")
	flag.StringVar(&o.exitStderr, "exit-stderr", "fatal: cannot start", "stderr written by -exit-at-start")
	flag.DurationVar(&o.startDelay, "start-delay", 0, "sleep before reading stdin")
	flag.IntVar(&o.stderrAtStart, "stderr-at-start", 0, "bytes of stderr before reading anything")
	flag.IntVar(&o.probeStderr, "probe-stderr", 0, "bytes of stderr when server/discover arrives")
	flag.StringVar(&o.banner, "banner", "", "a non-JSON stdout line at start")
	flag.StringVar(&o.grandchild, "grandchild", "", "start a grandchild ignoring SIGTERM; its pid goes to this file")
	flag.BoolVar(&o.setsid, "setsid", false, "the grandchild calls setsid")
	flag.BoolVar(&o.ignoreTerm, "ignore-term", false, "ignore SIGTERM")
	flag.BoolVar(&o.ignoreEOF, "ignore-eof", false, "keep running after stdin ends")
	flag.BoolVar(&o.noStrictIDs, "no-strict-ids", false, "accept reused request ids")
	flag.BoolVar(&o.grandchildRole, "be-grandchild", false, "internal: be the grandchild")
	flag.Parse()
	o.versions = strings.Split(versions, ",")

	if o.grandchildRole {
		signal.Ignore(syscall.SIGTERM)
		time.Sleep(time.Hour)
		return
	}
	if o.ignoreTerm {
		signal.Ignore(syscall.SIGTERM)
	}
	if o.exitAtStart >= 0 {
		fmt.Fprintln(os.Stderr, o.exitStderr)
		os.Exit(o.exitAtStart)
	}
	if o.grandchild != "" {
		if err := startGrandchild(o.grandchild, o.setsid); err != nil {
			fmt.Fprintln(os.Stderr, "grandchild:", err)
			os.Exit(2)
		}
	}
	if o.stderrAtStart > 0 {
		writeStderr(o.stderrAtStart)
	}
	if o.banner != "" {
		fmt.Fprintln(os.Stdout, o.banner)
	}
	time.Sleep(o.startDelay)
	s := newServer(o)
	s.serve(os.Stdin)
	for o.ignoreEOF {
		time.Sleep(time.Hour) // until a signal ends it
	}
}

// startGrandchild starts this program as a process that ignores SIGTERM,
// in this process's group (or, with setsid, in a session of its own), and
// writes its pid to pidfile.
func startGrandchild(pidfile string, setsid bool) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, "-be-grandchild")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: setsid}
	if err := cmd.Start(); err != nil {
		return err
	}
	return os.WriteFile(pidfile, []byte(strconv.Itoa(cmd.Process.Pid)+"\n"), 0o600)
}

// writeStderr writes n bytes of stderr in lines of 100.
func writeStderr(n int) {
	line := []byte(strings.Repeat("w", 99) + "\n")
	buf := make([]byte, 0, 64<<10)
	for n > 0 {
		k := min(n, len(line))
		buf = append(buf, line[len(line)-k:]...)
		n -= k
		if len(buf) >= 60<<10 || n == 0 {
			_, _ = os.Stderr.Write(buf)
			buf = buf[:0]
		}
	}
}
