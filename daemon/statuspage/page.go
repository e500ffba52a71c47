package statuspage

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/snodod/snodod/daemon/control"
	"github.com/snodod/snodod/metrics"
)

// Defaults of Options' zero fields.
const (
	DefaultMaxViewers   = 100
	DefaultWriteTimeout = 5 * time.Second
	DefaultInterval     = time.Second
	// LogLines is how many of the daemon's last log lines the page shows.
	LogLines = 20
)

// Options are where the page's data comes from, what its buttons do and
// the live stream's bounds. Status is required; a nil function leaves
// its section empty or its action refused.
type Options struct {
	// Status is the daemon's snapshot, as `snodod status` shows it.
	Status func() *control.Status
	// Tools is each tool's calls and latency (metrics.Metrics.Tools).
	Tools func() []metrics.ToolStat
	// Logs is the daemon's last n log lines, oldest first.
	Logs func(n int) []string
	// Restart restarts a hosted server (`snodod upstream restart`) and
	// waits for it, as the control op does; Kill ends a session
	// (`snodod kill`).
	Restart func(name string) error
	Kill    func(id uint64) error
	// Approve approves what a pinned or quarantined server holds
	// (`snodod approve NAME [TOOL]`, tool "" for all of it): the tools
	// approved, and whether its quarantine ended. Diff is what it holds,
	// word by word (`snodod diff NAME`). Login begins a login to a remote
	// server (`snodod login NAME`) and returns the authorization URL; the
	// daemon's loopback listener takes the browser's redirect.
	Approve func(name, tool string) (approved []string, released bool, err error)
	Diff    func(name string) (string, error)
	Login   func(name string) (string, error)
	// Owner reports whether a request comes from the daemon's own user.
	// Approve and Login are served only to it and to a request with the
	// admin token (its cookie): the control socket serves them only to
	// the daemon's uid, so daemon.allowed_uids may not do them here
	// either.
	Owner func(r *http.Request) bool
	// Token is admin.auth_token_file's token, "" without one.
	Token string
	// MaxViewers bounds the open live streams (admin.max_viewers);
	// WriteTimeout one update's write to a viewer
	// (admin.viewer_write_timeout); Interval the producer's tick.
	MaxViewers   int
	WriteTimeout time.Duration
	Interval     time.Duration
	// Tick, when set, replaces the producer's ticker (tests).
	Tick <-chan time.Time
	Log  *slog.Logger
}

// Page is the status page and its live stream. Its methods may be
// called concurrently.
type Page struct {
	o      Options
	secret []byte
	hub    *hub
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

//go:embed assets
var assets embed.FS

var tmpl = template.Must(template.New("").Funcs(template.FuncMap{
	"age":         age,
	"bytes":       humanBytes,
	"ms":          millis,
	"path":        pathEscape,
	"cpu":         cpuSeconds,
	"add":         func(a, b int) int { return a + b },
	"chartHeight": func(n int) int { return 24 + 22*n },
	"held":        heldOf,
	"heldRow": func(csrf, name string, h *held) heldRow {
		return heldRow{CSRF: csrf, Name: name, Held: h}
	},
	"loginNeeded": loginNeeded,
}).ParseFS(assets, "assets/page.html"))

// New returns the page, its producer running until Close.
func New(o Options) *Page {
	if o.MaxViewers <= 0 {
		o.MaxViewers = DefaultMaxViewers
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = DefaultWriteTimeout
	}
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	p := &Page{o: o, secret: make([]byte, 32)}
	rand.Read(p.secret)
	p.hub = newHub(p.renderLive, o.MaxViewers, o.WriteTimeout)
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	tick := o.Tick
	var ticker *time.Ticker
	if tick == nil {
		ticker = time.NewTicker(o.Interval)
		tick = ticker.C
	}
	p.wg.Go(func() {
		if ticker != nil {
			defer ticker.Stop()
		}
		p.hub.run(ctx, tick)
	})
	return p
}

// Close stops the producer and ends every live stream; it may be called
// more than once.
func (p *Page) Close() {
	p.hub.close()
	p.cancel()
	p.wg.Wait()
}

// Viewers is the live streams open now.
func (p *Page) Viewers() int { return p.hub.count() }

// Snapshots is the snapshots the producer has made: one per tick while
// anyone watches, however many do.
func (p *Page) Snapshots() uint64 { return p.hub.snapshots.Load() }

// Dropped is the viewers dropped because a write to them failed or
// outlasted the write timeout.
func (p *Page) Dropped() uint64 { return p.hub.dropped.Load() }

// Register adds the page's routes to mux: GET / (and /status), GET
// /events, GET /assets/…, GET /servers/{name}/diff, POST
// /servers/{name}/restart, /servers/{name}/approve,
// /servers/{name}/login, POST /sessions/{id}/kill.
func (p *Page) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", p.serveIndex)
	mux.HandleFunc("GET /status", p.serveIndex)
	mux.HandleFunc("GET /events", p.secure(p.hub.serve))
	static, _ := fs.Sub(assets, "assets")
	mux.Handle("GET /assets/", p.secure(http.StripPrefix("/assets/", http.FileServerFS(static)).ServeHTTP))
	mux.HandleFunc("POST /servers/{name}/restart", p.secure(p.serveRestart))
	mux.HandleFunc("POST /sessions/{id}/kill", p.secure(p.serveKill))
	mux.HandleFunc("GET /servers/{name}/diff", p.secure(p.serveDiff))
	mux.HandleFunc("POST /servers/{name}/approve", p.secure(p.serveApprove))
	mux.HandleFunc("POST /servers/{name}/login", p.secure(p.serveLogin))
}

// secure adds the headers every answer of the page has: nothing but the
// page's own resources (CSP), no framing, no sniffing.
func (p *Page) secure(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "same-origin") // no-referrer would make a form's Origin "null"
		h(w, r)
	}
}

// view is what the templates show.
type view struct {
	Now      time.Time
	Status   *control.Status
	Tools    []toolRow
	Logs     []string
	CSRF     string
	Message  string
	Error    bool
	MaxCalls uint64
}

// toolRow is one tool of the chart, with its bars' widths.
type toolRow struct {
	metrics.ToolStat
	Y, CallsWidth, LatencyWidth int
}

// The chart's bars: the most called tool's calls bar, and the slowest
// tool's p99 bar, are this wide.
const (
	callsWidth   = 160
	latencyWidth = 120
)

func (p *Page) view() *view {
	v := &view{Now: time.Now(), Status: p.o.Status(), CSRF: p.CSRF()}
	if p.o.Tools != nil {
		stats := p.o.Tools()
		var maxCalls uint64
		var maxP99 time.Duration
		for _, s := range stats {
			maxCalls, maxP99 = max(maxCalls, s.Calls), max(maxP99, s.P99)
		}
		for i, s := range stats {
			r := toolRow{ToolStat: s, Y: i * 22}
			if maxCalls > 0 {
				r.CallsWidth = max(1, int(s.Calls*callsWidth/maxCalls))
			}
			if maxP99 > 0 {
				r.LatencyWidth = max(1, int(int64(s.P99)*latencyWidth/int64(maxP99)))
			}
			v.Tools = append(v.Tools, r)
		}
		v.MaxCalls = maxCalls
	}
	if p.o.Logs != nil {
		v.Logs = p.o.Logs(LogLines)
	}
	return v
}

// renderLive renders the live region: what every snapshot of the stream
// carries, and what the page shows without JavaScript.
func (p *Page) renderLive() []byte {
	var b bytes.Buffer
	if err := tmpl.ExecuteTemplate(&b, "live", p.view()); err != nil {
		p.o.Log.Error("status page", "err", err)
	}
	return b.Bytes()
}

func (p *Page) serveIndex(w http.ResponseWriter, r *http.Request) {
	p.secure(func(w http.ResponseWriter, r *http.Request) {
		if p.exchangeToken(w, r) {
			return
		}
		p.page(w, http.StatusOK, "", false)
	})(w, r)
}

// page renders the whole page with status, and a message above it.
func (p *Page) page(w http.ResponseWriter, status int, message string, isErr bool) {
	v := p.view()
	v.Message, v.Error = message, isErr
	var b bytes.Buffer
	if err := tmpl.ExecuteTemplate(&b, "page", v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(b.Bytes())
}

var errNoAction = errors.New("not available on this daemon")

// held is what a server row's pins hold: nil for nothing.
type held struct {
	Changed, New []string
	Quarantined  bool
}

func heldOf(u control.Upstream) *held {
	if len(u.Changed) == 0 && len(u.New) == 0 && !u.Quarantined {
		return nil
	}
	return &held{Changed: u.Changed, New: u.New, Quarantined: u.Quarantined}
}

// heldRow is the "held" template's data: a server's held tools and its
// approve buttons.
type heldRow struct {
	CSRF, Name string
	Held       *held
}

// loginNeeded reports whether a remote server's authorization, as status
// words it, wants a person to log in.
func loginNeeded(auth string) bool {
	return strings.HasPrefix(auth, "login required") || strings.HasPrefix(auth, "refresh failed")
}
