package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/snodod/snodod/protocol"
)

// defaultVersion is serverInfo.version when Options.Info has none: a
// program that embeds the runtime names its own version, as cmd/snodod
// does from its build information.
const defaultVersion = "dev"

// New returns a Server with an empty catalog. It refuses invalid options
// with every problem listed.
func New(opts Options) (*Server, error) {
	versions, err := protocol.ParseVersions(opts.Versions)
	var errs []error
	if err != nil {
		errs = append(errs, err)
	}
	switch opts.CacheScope {
	case "":
		opts.CacheScope = "private"
	case "public", "private":
	default:
		errs = append(errs, errors.New("cache_scope must be public or private"))
	}
	if opts.CacheTTL < 0 {
		errs = append(errs, errors.New("cache_ttl must not be negative"))
	}
	if err := checkStateKey(opts.StateKey); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if opts.Info.Name == "" {
		opts.Info.Name = "snodod"
	}
	if opts.Info.Version == "" {
		opts.Info.Version = defaultVersion
	}
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	s := &Server{
		opts:      opts,
		log:       log,
		versions:  versions,
		hub:       newHub(),
		signer:    signerFor(opts.StateKey),
		tools:     map[string]*toolEntry{},
		resources: map[string]*resourceEntry{},
		templates: map[string]*templateEntry{},
		prompts:   map[string]*promptEntry{},
	}
	if err := s.setIdentity(opts.Info, opts.Instructions); err != nil {
		return nil, fmt.Errorf("server info: %w", err)
	}
	return s, nil
}

// capabilities returns what the catalog advertises now (docs/protocol.md §3.4).
// It is kept current by every catalog change, so a request reads it
// without walking the catalog.
func (s *Server) capabilities() protocol.ServerCapabilities {
	if c := s.caps.Load(); c != nil {
		return *c
	}
	return protocol.ServerCapabilities{} // an empty catalog
}

// updateCapabilitiesLocked recomputes the advertised capabilities, and the
// order of the templates, after a change; s.mu is held for writing.
func (s *Server) updateCapabilitiesLocked() {
	s.templateOrder = slices.Sorted(maps.Keys(s.templates))
	resources := len(s.resources) > 0 || len(s.templates) > 0
	c := protocol.ServerCapabilities{
		Tools:              len(s.tools) > 0,
		Prompts:            len(s.prompts) > 0,
		Resources:          resources,
		ResourcesSubscribe: s.opts.SubscribableResources && resources,
	}
	for _, p := range s.prompts {
		c.Completions = c.Completions || p.completions != nil
	}
	for _, t := range s.templates {
		c.Completions = c.Completions || t.completions != nil
	}
	c.ToolsListChanged, c.PromptsListChanged, c.ResourcesListChanged = c.Tools, c.Prompts, c.Resources
	c = orCapabilities(c, s.ext.advertised)
	s.caps.Store(&c)
}

// capabilitiesJSON is the capabilities object for a version's era.
func capabilitiesJSON(c protocol.ServerCapabilities, legacy bool) map[string]any {
	m := map[string]any{}
	listChanged := map[string]any{"listChanged": true}
	if c.Tools {
		m["tools"] = listChanged
	}
	if c.Prompts {
		m["prompts"] = listChanged
	}
	if c.Resources {
		r := map[string]any{"listChanged": true}
		if c.ResourcesSubscribe {
			r["subscribe"] = true
		}
		m["resources"] = r
	}
	if c.Completions {
		m["completions"] = map[string]any{}
	}
	if legacy {
		m["logging"] = map[string]any{}
	}
	return m
}

// serverInfo projects the server's Implementation for a version (§3.5).
func (s *Server) serverInfo(version string) protocol.Implementation {
	return projectInfo(s.identity().info, version)
}

func projectInfo(info protocol.Implementation, version string) protocol.Implementation {
	if version == protocol.Version20250618 {
		info.Description, info.Icons, info.WebsiteURL = "", nil, ""
	}
	return info
}

type initializeResult struct {
	ProtocolVersion string                  `json:"protocolVersion"`
	Capabilities    map[string]any          `json:"capabilities"`
	ServerInfo      protocol.Implementation `json:"serverInfo"`
	Instructions    string                  `json:"instructions,omitempty"`
}

// Initialize answers a legacy initialize (docs/protocol.md §2). On success the
// session starts afresh under the negotiated version.
func (s *Server) Initialize(sess *SessionState, params json.RawMessage) (any, string, *protocol.Error) {
	if len(s.versions.Legacy()) == 0 {
		return nil, "", &protocol.Error{Code: protocol.CodeInvalidRequest, Message: msgNoDialect,
			Data: map[string]any{"supported": s.versions.Modern()}}
	}
	p, perr := protocol.DecodeInitialize(params)
	if perr != nil {
		return nil, "", perr
	}
	if h := s.startHook(); h != nil {
		if req := (&Request{Method: "initialize", Params: params, State: sess}); !h.Ready(req) {
			_ = h.Start(context.Background(), req)
		}
	}
	version, _ := s.versions.Negotiate(p.ProtocolVersion)
	sess.startLegacy(p.Capabilities, p.ClientInfo)
	return initializeResult{
		ProtocolVersion: version,
		Capabilities:    capabilitiesJSON(s.capabilities(), true),
		ServerInfo:      s.serverInfo(version),
		Instructions:    s.identity().instructions,
	}, version, nil
}

// Notify handles a notification inline (docs/transport.md §8). Only
// notifications/initialized has an effect here; cancellation belongs to the
// transport. It never blocks.
func (s *Server) Notify(sess *SessionState, method string, _ json.RawMessage) {
	if method == "notifications/initialized" {
		sess.markInitialized(s.hub, func(change) bool { return true })
	}
}

const msgNoDialect = "No configured protocol dialect recognized the request"

var errNoDialect = &protocol.Error{Code: protocol.CodeInvalidRequest, Message: msgNoDialect}

// The refusal of a legacy request before initialize says what to do: it is
// the first error a person typing requests meets (docs/protocol.md §2).
var (
	errNotInitialized = &protocol.Error{Code: protocol.CodeInvalidRequest,
		Message: msgNoDialect + ". Send initialize first (or use " + protocol.Version2026 + " _meta)"}
	errNotInitializedLegacyOnly = &protocol.Error{Code: protocol.CodeInvalidRequest,
		Message: msgNoDialect + ". Send initialize first"}
)

// call is one request being served: what every method handler needs.
type call struct {
	s       *Server
	req     *Request
	sess    *SessionState
	split   *protocol.Split // req.Params split, by the transport's decoder or Dispatch
	first   *RawResult      // the StartHook's InputFirst: the answer once checked
	version string
	modern  bool
	meta    *protocol.RequestMeta // 2026 only
	caps    protocol.ServerCapabilities
	answers map[string]json.RawMessage // MRTR answers of this and earlier rounds

	// What the call's context holds (callContext), kept here so that a
	// request costs one allocation for all of it.
	ctx      callContext
	legacy   legacyCall // legacy eras
	inputs   inputs     // 2026, while asking is set (mrtr)
	asking   bool
	metaData protocol.RequestMeta // what meta points to
	tool     CallToolRequest      // tools/call's request
	wire     callToolWire         // tools/call's result

	// What an Observer is told besides the outcome (observe.go).
	item      string
	owner     string
	relayed   bool
	relayTime time.Duration
	uri       string // a resources/read's
	started   bool   // a RequestStarter made ctx's parent (observe.go)
	observing bool   // an Observer will be told of the call (observe.go)
}

// Dispatch serves one request in either era (docs/protocol.md §4.2, §5.2). It
// uses the transport's split of the params (Request.Split) when there is
// one, and splits them itself otherwise.
func (s *Server) Dispatch(ctx context.Context, req *Request) Outcome {
	split := req.Split
	if split == nil {
		var params json.RawMessage
		if len(req.Params) > 0 {
			params = req.Params
		}
		own, ok := protocol.SplitParams(params)
		if !ok {
			return errOutcome(protocol.ErrParamsType)
		}
		split = &own
	}
	var first *RawResult
	if h := s.startHook(); h != nil && !h.Ready(req) {
		if err := h.Start(ctx, req); err != nil {
			var in *InputFirst
			if !errors.As(err, &in) || in.Result == nil || !split.Modern {
				return errOutcome(startError(err))
			}
			first = in.Result
		}
	}
	c := &call{s: s, req: req, sess: req.State, split: split, first: first}
	if c.sess == nil {
		c.sess = NewSessionState(0)
	}
	c.ctx = callContext{Context: ctx, c: c}
	if b := s.observer.Load().active(); b != nil {
		c.start(ctx, b)
		return c.observed(&c.ctx, b.o, split.Modern)
	}
	ctx = &c.ctx
	if split.Modern {
		return c.serveModern(ctx)
	}
	return c.serveLegacy(ctx)
}

func (c *call) serveLegacy(ctx context.Context) Outcome {
	// The key is canonical already: a Get would canonicalize it again on
	// every request.
	if v := c.req.Header[HeaderProtocolVersion]; len(v) > 0 {
		c.version = v[0]
	}
	if c.version == "" || !c.s.versions.Enabled(c.version) || c.version == protocol.Version2026 {
		switch {
		case c.version != "":
		case c.req.Method == "ping":
			return Outcome{Result: struct{}{}}
		case len(c.s.versions.Legacy()) == 0: // initialize would be refused too
		case len(c.s.versions.Modern()) == 0:
			return errOutcome(errNotInitializedLegacyOnly)
		default:
			return errOutcome(errNotInitialized)
		}
		return errOutcome(errNoDialect)
	}
	if err := protocol.Availability(protocol.Legacy, c.req.Method); err != nil {
		return errOutcome(err)
	}
	c.caps = c.s.capabilities()
	if err := protocol.Gate(c.req.Method, c.caps); err != nil {
		return errOutcome(err)
	}
	if err := protocol.CheckLegacyMeta(c.split); err != nil {
		return errOutcome(err)
	}
	n, _ := ctx.Value(notifierKey{}).(Notifier)
	c.legacy = legacyCall{sess: c.sess, notifier: n}
	return c.serveMethod(ctx)
}

// serveModern serves a 2026-era request.
func (c *call) serveModern(ctx context.Context) Outcome {
	c.modern = true // the call's context no longer says legacy (callContext)
	var meta *protocol.RequestMeta
	if a := c.req.Admission; a != nil && a.versions == c.s.versions {
		meta = &a.meta // admitted before the executor (AdmitModern)
	} else {
		meta = &c.metaData
		if err := admitModern(meta, c.split, c.s.versions, nil); err != nil {
			return errOutcome(err)
		}
	}
	c.meta, c.version = meta, meta.ProtocolVersion
	c.sess.noteModernClient(meta.ClientInfo)
	if err := protocol.Availability(protocol.Modern, c.req.Method); err != nil {
		return errOutcome(err)
	}
	c.caps = c.s.capabilities()
	if err := protocol.Gate(c.req.Method, c.caps); err != nil {
		return errOutcome(err)
	}
	if c.first != nil {
		return c.relayInputRequired(c.first)
	}
	return c.serveMethod(ctx)
}

// startError is the answer of a request whose StartHook's Start failed
// with err.
func startError(err error) *protocol.Error {
	var perr *protocol.Error
	if errors.As(err, &perr) {
		return perr
	}
	return errInternal
}

func (c *call) serveMethod(ctx context.Context) Outcome {
	switch c.req.Method {
	case "ping":
		return Outcome{Result: struct{}{}}
	case "server/discover":
		return c.discover()
	case "tools/list":
		return c.listTools()
	case "tools/call":
		return c.callTool(ctx)
	case "resources/list":
		return c.listResources()
	case "resources/templates/list":
		return c.listTemplates()
	case "resources/read":
		return c.readResource(ctx)
	case "resources/subscribe", "resources/unsubscribe":
		return c.subscribe(ctx)
	case "prompts/list":
		return c.listPrompts()
	case "prompts/get":
		return c.getPrompt(ctx)
	case "completion/complete":
		return c.complete(ctx)
	case "logging/setLevel":
		return c.setLevel()
	case "subscriptions/listen":
		return c.listen(ctx)
	}
	return errOutcome(&protocol.Error{Code: protocol.CodeMethodNotFound, Message: "Method not found: " + c.req.Method})
}

func (c *call) discover() Outcome {
	type discoverResult struct {
		SupportedVersions []string       `json:"supportedVersions"`
		Capabilities      map[string]any `json:"capabilities"`
		Instructions      string         `json:"instructions,omitempty"`
	}
	return c.result(discoverResult{
		SupportedVersions: c.s.versions.All(),
		Capabilities:      capabilitiesJSON(c.caps, false),
		Instructions:      c.s.identity().instructions,
	}, true, nil)
}

// result shapes a complete result for the request's era: legacy results are
// as given; 2026 results gain resultType and the serverInfo _meta, and, when
// cached, ttlMs and cacheScope (docs/protocol.md §5.3, §10.2).
func (c *call) result(v any, cached bool, override *ReadResourceResult) Outcome {
	if !c.modern {
		return Outcome{Result: v}
	}
	members := []member{{"resultType", "complete"}}
	if cached {
		ttl, scope := c.s.opts.CacheTTL.Milliseconds(), c.s.opts.CacheScope
		if override != nil && override.CacheTTL != nil {
			ttl = *override.CacheTTL
		}
		if override != nil && override.CacheScope != "" {
			scope = override.CacheScope
		}
		members = append(members, member{"ttlMs", ttl}, member{"cacheScope", scope})
	}
	members = append(members, member{"_meta", c.resultMeta(nil)})
	return Outcome{Result: withMembers{v: v, members: members}}
}

// resultMeta merges a handler's _meta with the serverInfo member, which the
// handler cannot replace.
// Without a handler's own members it is the same object for every result
// of a version, encoded once when the server was made.
func (c *call) resultMeta(own map[string]any) any {
	if len(own) == 0 {
		if raw, ok := c.s.identity().infoMeta[c.version]; ok {
			return raw
		}
	}
	m := make(map[string]any, len(own)+1)
	for k, v := range own {
		m[k] = v
	}
	m[protocol.MetaServerInfo] = c.s.serverInfo(c.version)
	return m
}

// clientCaps is the request's client capabilities: its own in 2026, the
// session's from initialize otherwise.
func (c *call) clientCaps() json.RawMessage {
	if c.modern {
		return c.meta.ClientCapabilities
	}
	return c.sess.clientCaps()
}

func errOutcome(e *protocol.Error) Outcome { return Outcome{Err: e} }

func invalidParams(msg string) Outcome {
	return errOutcome(&protocol.Error{Code: protocol.CodeInvalidParams, Message: msg})
}

// member is one extra top-level member added to a result.
type member struct {
	name  string
	value any
}

// withMembers encodes v (a JSON object) with members appended, so shaping a
// result needs no intermediate map.
type withMembers struct {
	v       any
	members []member
}

// AppendJSON writes the object into dst, as frames are encoded: no
// intermediate buffer, and no second pass of encoding/json over it.
func (w withMembers) AppendJSON(dst []byte) ([]byte, error) { return w.AppendJSONSpliced(dst, nil) }

// AppendJSONSpliced implements protocol.SplicingAppender: what v splices
// stays spliced (the members follow it).
func (w withMembers) AppendJSONSpliced(dst []byte, sp *protocol.Splices) ([]byte, error) {
	start := len(dst)
	b, err := protocol.AppendValueSpliced(dst, w.v, sp)
	if err != nil {
		return dst, err
	}
	if len(b)-start < 2 || b[start] != '{' || b[len(b)-1] != '}' {
		return dst, fmt.Errorf("result is not a JSON object")
	}
	empty := len(b)-start == 2
	out := b[:len(b)-1]
	for _, m := range w.members {
		if !empty {
			out = append(out, ',')
		}
		empty = false
		out = append(out, '"')
		out = append(out, m.name...)
		out = append(out, '"', ':')
		if out, err = protocol.AppendValue(out, m.value); err != nil {
			return dst, err
		}
	}
	return append(out, '}'), nil
}

func (w withMembers) MarshalJSON() ([]byte, error) { return w.AppendJSON(nil) }
