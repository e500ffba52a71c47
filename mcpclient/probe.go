package mcpclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/snodod/snodod/protocol"
)

// The era probe and handshake (docs/upstreams.md §6).
//
// With protocol "auto" and no cached era, server/discover is sent with 2026
// _meta. A DiscoverResult listing 2026-07-28, or a modern -3202x error,
// means 2026. Any other answer means legacy, and so does silence for
// ProbeTimeout (legacy servers often ignore a request before initialize),
// after which initialize is sent while the discover stays in flight: a
// DiscoverResult that arrives late still wins, and the raced initialize's
// answer is dropped. A cached legacy era sends initialize first; a server
// that refuses it naming 2026-07-28 is probed after all. Stderr is drained
// throughout, so a server flooding it while it decides never blocks.

// legacyVersion is what snodod proposes in initialize.
const legacyVersion = "2025-11-25"

// knownLegacyVersions are the versions an upstream may negotiate.
var knownLegacyVersions = []string{"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"}

func (c *Conn) handshake(ctx context.Context) error {
	switch c.o.Protocol {
	case "", "auto":
		if c.o.KnownEra == EraLegacy {
			return c.initialize(ctx, legacyVersion, nil)
		}
		return c.probe(ctx)
	case protocol.Version2026:
		return c.handshakeModern(ctx, fmt.Sprintf("does not speak %s; set protocol = \"auto\" or a legacy version", protocol.Version2026))
	case "2025-06-18", "2025-11-25":
		return c.initialize(ctx, c.o.Protocol, nil)
	default:
		return fmt.Errorf("upstream %q: protocol %q is not one of auto, 2025-06-18, 2025-11-25, %s", c.o.Name, c.o.Protocol, protocol.Version2026)
	}
}

// probe sends server/discover and decides the era from its answer, or
// from its silence.
func (c *Conn) probe(ctx context.Context) error {
	discover, err := c.beginDiscover()
	if err != nil {
		return err
	}
	t := time.NewTimer(c.o.ProbeTimeout)
	defer t.Stop()
	select {
	case r := <-discover.resp:
		if c.retriesDiscover(r) {
			// The server refused the first request of a 2026 client (SEP-2575:
			// a client retries with a version the error lists): once more.
			if discover, err = c.beginDiscover(); err != nil {
				return err
			}
			if r, err = c.await(ctx, discover, "server/discover"); err != nil {
				return err
			}
		}
		if c.isModern(r) {
			return c.adopt2026(r)
		}
		if ended(r.err) {
			return r.err
		}
		c.log.Debug("upstream is legacy-era", "discover", describe(r))
		return c.initialize(ctx, legacyVersion, nil)
	case <-t.C:
		c.log.Debug("no answer to server/discover; trying initialize", "waited", c.o.ProbeTimeout)
		return c.initialize(ctx, legacyVersion, discover)
	case <-ctx.Done():
		c.abandon(discover, ctx.Err())
		return c.startTimeout(ctx, "server/discover")
	}
}

func (c *Conn) beginDiscover() (*call, error) {
	meta := map[string]json.RawMessage{
		protocol.MetaProtocolVersion:                 protocol.AppendString(nil, protocol.Version2026),
		"io.modelcontextprotocol/clientCapabilities": json.RawMessage(`{}`),
		"io.modelcontextprotocol/clientInfo":         c.clientInfoMeta,
	}
	params := appendObject(nil, map[string]json.RawMessage{"_meta": appendObject(nil, meta)})
	return c.begin(c.nextID.Add(1), "server/discover", params, nil, nil)
}

// await waits for cl's outcome within ctx.
func (c *Conn) await(ctx context.Context, cl *call, method string) (response, error) {
	select {
	case r := <-cl.resp:
		if ended(r.err) {
			return r, r.err
		}
		return r, nil
	case <-ctx.Done():
		c.abandon(cl, ctx.Err())
		return response{}, c.startTimeout(ctx, method)
	}
}

func (c *Conn) startTimeout(ctx context.Context, method string) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("upstream %q did not answer %s before the start timeout: %w", c.o.Name, method, ctx.Err())
	}
	return fmt.Errorf("upstream %q: start abandoned during %s: %w", c.o.Name, method, ctx.Err())
}

// retriesDiscover reports whether a discover outcome is -32022
// (unsupported protocol version) listing 2026-07-28 as supported: the
// request is sent again, once (SEP-2575).
func (c *Conn) retriesDiscover(r response) bool {
	var perr *protocol.Error
	if !errors.As(r.err, &perr) || perr.Code != -32022 {
		return false
	}
	raw, _ := json.Marshal(perr.Data)
	var d struct {
		Supported []string `json:"supported"`
	}
	return json.Unmarshal(raw, &d) == nil && slices.Contains(d.Supported, protocol.Version2026)
}

// isModern reports whether a discover outcome means a 2026-era server.
func (c *Conn) isModern(r response) bool {
	var perr *protocol.Error
	if errors.As(r.err, &perr) {
		return perr.Code <= -32020 && perr.Code >= -32029
	}
	if r.err != nil {
		return false
	}
	var d struct {
		SupportedVersions []string `json:"supportedVersions"`
	}
	return json.Unmarshal(r.result, &d) == nil && slices.Contains(d.SupportedVersions, protocol.Version2026)
}

// adopt2026 takes a 2026 server's DiscoverResult (or modern error).
func (c *Conn) adopt2026(r response) error {
	c.era, c.version, c.caps = Era2026, protocol.Version2026, json.RawMessage(`{}`)
	if r.err != nil {
		c.log.Warn("upstream answered server/discover with a 2026-era error; serving it as 2026-era with no capabilities", "error", r.err)
		return nil
	}
	var d struct {
		Capabilities json.RawMessage `json:"capabilities"`
		Instructions string          `json:"instructions"`
		ServerInfo   json.RawMessage `json:"serverInfo"`
		Meta         struct {
			ServerInfo json.RawMessage `json:"io.modelcontextprotocol/serverInfo"`
		} `json:"_meta"`
	}
	if err := json.Unmarshal(r.result, &d); err != nil {
		return fmt.Errorf("upstream %q: malformed server/discover result: %w", c.o.Name, err)
	}
	if isObject(d.Capabilities) {
		c.caps = d.Capabilities
	}
	c.instructions = d.Instructions
	c.serverInfo = d.Meta.ServerInfo
	if c.serverInfo == nil {
		c.serverInfo = d.ServerInfo
	}
	return nil
}

// initialize performs the legacy handshake proposing version. discover, when
// non-nil, is a probe still in flight whose late DiscoverResult wins.
func (c *Conn) initialize(ctx context.Context, version string, discover *call) error {
	params, _ := json.Marshal(map[string]any{
		"protocolVersion": version,
		"capabilities":    c.o.ClientCapabilities,
		"clientInfo":      c.o.ClientInfo,
	})
	ini, err := c.begin(c.nextID.Add(1), "initialize", params, nil, nil)
	if err != nil {
		return err
	}
	var lateDiscover <-chan response
	if discover != nil {
		lateDiscover = discover.resp
	}
	for {
		select {
		case r := <-ini.resp:
			if discover != nil {
				c.forget(discover) // a later answer is dropped
			}
			if ended(r.err) {
				return r.err
			}
			if namesModern(r.err) {
				c.log.Debug("upstream refused initialize naming 2026-07-28; probing", "error", r.err)
				return c.handshakeModern(ctx, "refused initialize as a 2026-era server, but not so on server/discover")
			}
			if r.err != nil {
				return fmt.Errorf("upstream %q refused initialize: %w", c.o.Name, r.err)
			}
			return c.adoptLegacy(r.result)
		case r := <-lateDiscover:
			if c.isModern(r) {
				c.forget(ini) // the raced initialize's answer is dropped
				return c.adopt2026(r)
			}
			lateDiscover = nil
		case <-ctx.Done():
			c.abandon(ini, ctx.Err())
			if discover != nil {
				c.abandon(discover, ctx.Err())
			}
			return c.startTimeout(ctx, "initialize")
		}
	}
}

// handshakeModern is server/discover without a probe timeout, for a server
// known to be 2026-era; notModern says what it means if the answer is not
// a 2026 one.
func (c *Conn) handshakeModern(ctx context.Context, notModern string) error {
	cl, err := c.beginDiscover()
	if err != nil {
		return err
	}
	r, err := c.await(ctx, cl, "server/discover")
	if err != nil {
		return err
	}
	if !c.isModern(r) {
		return fmt.Errorf("upstream %q %s (server/discover: %s)", c.o.Name, notModern, describe(r))
	}
	return c.adopt2026(r)
}

// namesModern reports whether an initialize error names 2026-07-28 among
// its supported versions (docs/protocol.md §1.3: data.supported).
func namesModern(err error) bool {
	var perr *protocol.Error
	if !errors.As(err, &perr) {
		return false
	}
	raw, ok := perr.Data.(json.RawMessage)
	if !ok {
		return false
	}
	var d struct {
		Supported         []string `json:"supported"`
		SupportedVersions []string `json:"supportedVersions"`
	}
	if json.Unmarshal(raw, &d) != nil {
		return false
	}
	return slices.Contains(d.Supported, protocol.Version2026) || slices.Contains(d.SupportedVersions, protocol.Version2026)
}

// adoptLegacy takes an InitializeResult and completes the handshake.
func (c *Conn) adoptLegacy(result json.RawMessage) error {
	var r struct {
		ProtocolVersion string          `json:"protocolVersion"`
		Capabilities    json.RawMessage `json:"capabilities"`
		ServerInfo      json.RawMessage `json:"serverInfo"`
		Instructions    string          `json:"instructions"`
	}
	if err := json.Unmarshal(result, &r); err != nil {
		return fmt.Errorf("upstream %q: malformed initialize result: %w", c.o.Name, err)
	}
	if !slices.Contains(knownLegacyVersions, r.ProtocolVersion) {
		return fmt.Errorf("upstream %q negotiated protocol version %q, which snodod does not speak (it speaks %v and %s)", c.o.Name, r.ProtocolVersion, knownLegacyVersions, protocol.Version2026)
	}
	c.era, c.version = EraLegacy, r.ProtocolVersion
	c.caps = json.RawMessage(`{}`)
	if isObject(r.Capabilities) {
		c.caps = r.Capabilities
	}
	c.serverInfo, c.instructions = r.ServerInfo, r.Instructions
	return c.Notify("notifications/initialized", nil)
}

// ended reports whether a call's error says the stream ended under it (a
// Command's *ExitError) or before it was sent (ErrClosed).
func ended(err error) bool { return errors.As(err, new(*ExitError)) || errors.Is(err, ErrClosed) }

func isObject(raw json.RawMessage) bool {
	_, ok := protocol.Members(raw)
	return ok && len(raw) > 0 && raw[0] == '{'
}

// describe says what an answer was, for errors and logs.
func describe(r response) string {
	if r.err != nil {
		return r.err.Error()
	}
	const max = 200
	if len(r.result) > max {
		return string(r.result[:max]) + "…"
	}
	return string(r.result)
}
