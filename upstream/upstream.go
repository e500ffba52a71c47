package upstream

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/thejerf/suture/v4"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/internal/sandbox"
	"github.com/snodod/snodod/mcpclient"
)

// upstream is one configured server (an mcpServers entry): a suture
// supervisor holding its instances, one per share key, and the catalog its
// views list.
type upstream struct {
	m    *Manager
	name string
	cfg  atomic.Pointer[config.Upstream] // view fields change on reload: conf
	// fingerprint identifies the process configuration (docs/upstreams.md §4):
	// a change restarts, anything else is a view change.
	fingerprint string
	ring        *mcpclient.StderrRing
	// sandbox is the policy its processes start under (docs/security.md,
	// "Sandbox"): the entry's, with its private home and the hidden
	// paths; part of the fingerprint, so fixed for u's life.
	sandbox sandbox.Policy
	// remote reaches a remote server (remote.go); unused otherwise.
	remote *remote
	// cacheSwept is set by u's first cache.store, which removes the files
	// of its earlier fingerprints.
	cacheSwept atomic.Bool
	sup        *suture.Supervisor
	token      suture.ServiceToken // in the manager's supervisor

	// pin is what its pins hold of its current catalog (pin.go), nil
	// when it is neither pinned nor quarantined; set by refreshViews, with
	// pinMemo (guarded by Manager.viewMu), what it was evaluated against.
	pin     atomic.Pointer[pinState]
	pinMemo pinMemo

	mu        sync.Mutex
	instances map[string]*instanceSlot
	catalog   *catalog // the last listing, from an instance or the cache
	cached    bool     // catalog came from the cache
	eager     bool     // start the shared instance at once (it replaces a running one)
	drained   bool
}

type instanceSlot struct {
	in    *instance
	token suture.ServiceToken
}

func newUpstream(m *Manager, cfg config.Upstream, ring *mcpclient.StderrRing) *upstream {
	u := &upstream{m: m, name: cfg.Name, fingerprint: fingerprint(&cfg), ring: ring,
		instances: map[string]*instanceSlot{}, remote: &remote{}}
	if cfg.Remote == nil && m.cfg != nil {
		u.sandbox = m.cfg.SandboxFor(cfg.Sandbox, m.opts.StateDir, "mcpServers", cfg.Name)
	}
	u.cfg.Store(&cfg)
	u.sup = suture.New("upstream "+cfg.Name, suture.Spec{EventHook: m.supervisorEvent, Timeout: m.stopGrace() + drainMargin})
	if cat, ok := m.cache.load(u); ok {
		u.catalog, u.cached = cat, true
	}
	if cfg.Share == "all" || cfg.Disabled {
		u.addInstanceLocked("", "all", m.opts.Home)
	}
	return u
}

// sandboxFor is the policy and working directory of an instance whose
// roots (file:// URIs) are roots, rendered in dir. The roots it is told
// are the roots it may use, except one that comes from its client (the
// default root, ${client.cwd}) and is /, the user's home or above it: a
// client started there (a desktop app in $HOME) would otherwise hand the
// server the whole home, ~/.ssh and all. Such a directory is neither
// granted nor, unless cwd names it literally, the server's working
// directory: it starts in its private home instead.
func (u *upstream) sandboxFor(roots []string, dir string) (sandbox.Policy, string) {
	conf := u.conf()
	p := u.sandbox
	p.Roots = nil
	for _, root := range roots {
		path, ok := strings.CutPrefix(root, "file://")
		if !ok || !filepath.IsAbs(path) {
			continue
		}
		if u.tooWide(path) && !slices.Contains(conf.Roots, root) { // not written so in the configuration
			u.m.log.Warn("upstream sandboxed: its client's directory is not given to it (it holds the user's home)", "upstream", u.name, "dir", path)
			continue
		}
		p.Roots = append(p.Roots, path)
	}
	if (conf.Cwd == "" || strings.Contains(conf.Cwd, config.ClientCwd)) && u.tooWide(dir) {
		dir = p.Home
	}
	return p, dir
}

// tooWide reports whether dir is /, the user's home, or holds it.
func (u *upstream) tooWide(dir string) bool {
	dir = filepath.Clean(dir)
	home := filepath.Clean(u.m.opts.Home)
	if dir == "/" || dir == home {
		return true
	}
	rel, err := filepath.Rel(dir, home)
	return err == nil && !strings.HasPrefix(rel, "..")
}

// sandboxed reports whether u's processes start in a sandbox.
func (u *upstream) sandboxed() bool { return u.sandbox.Level != "" && u.sandbox.Level != sandbox.Off }

// downloaders are the commands that fetch a package at their first run.
var downloaders = []string{"npx", "uvx", "bunx", "pnpx", "pnpm", "pipx", "uv", "npm", "yarn", "deno"}

// offlineHint is what a failed start of u adds to its cause when u's
// sandbox has no network and its command downloads what it runs (npx -y
// of a package not yet in its cache): the likely reason, and the fix.
func (u *upstream) offlineHint() string {
	if !u.sandboxed() {
		return ""
	}
	network := config.NetworkText(u.sandbox)
	if network != "none" && network != "loopback" || !slices.Contains(downloaders, filepath.Base(u.conf().Command)) {
		return ""
	}
	return fmt.Sprintf(" (its sandbox, %s, has no network: %s cannot download a package it has not cached; set sandbox.network = \"all\" or a list of hosts in mcpServers.%s, or install the package and run it by path)",
		u.sandbox.Level, filepath.Base(u.conf().Command), u.name)
}

// home is the $HOME u's processes are rendered with: its private home
// when sandboxed (a share = "all" server without cwd starts there, not in
// the daemon's home, which the sandbox would grant whole), else the
// daemon's.
func (u *upstream) home() string {
	if u.sandboxed() {
		return u.sandbox.Home
	}
	return u.m.opts.Home
}

// conf is the upstream's configuration entry; never modified.
func (u *upstream) conf() *config.Upstream { return u.cfg.Load() }

// setConfig takes a reloaded entry with the same fingerprint: view
// fields, timeouts and limits change, the processes stay.
func (u *upstream) setConfig(cfg config.Upstream) { u.cfg.Store(&cfg) }

// running reports whether any instance has a process.
func (u *upstream) running() bool {
	r := false
	u.each(func(in *instance) {
		in.mu.Lock()
		r = r || in.conn != nil || in.state == StateStarting || in.state == StateDraining
		in.mu.Unlock()
	})
	return r
}

// startEagerly says whether in starts without waiting for a request: the
// shared instance of an eager upstream, or of one that replaces a running
// one after a reload.
func (u *upstream) startEagerly(in *instance) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return in.key == "" && (u.conf().Start == "eager" || u.eager)
}

// instanceFor returns the instance serving client (nil: a client with no
// session, such as a test), creating it single-flight within
// max_instances and upstreams.max_children (docs/upstreams.md §3).
func (u *upstream) instanceFor(c *Client) (*instance, error) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.drained {
		return nil, errStopped
	}
	cwd := u.m.opts.Cwd
	if c != nil && c.Cwd != "" {
		cwd = c.Cwd
	}
	var key, label string
	switch {
	case u.conf().Disabled || u.conf().Share == "all":
		return u.instances[""].in, nil
	case u.conf().Share == "cwd":
		key, label = u.cwdKey(c, cwd), cwd
	default: // session
		id := uint64(0)
		if c != nil {
			id = c.ID
		}
		key = sessionInstanceKey(id)
		label = key
	}
	if s, ok := u.instances[key]; ok {
		return s.in, nil
	}
	if c != nil && c.isClosed() {
		return nil, errStopped
	}
	if len(u.instances) >= u.conf().MaxInstances {
		return nil, &failure{code: CodeLimit, asError: true, detail: Detail{Name: u.name, State: string(StateStopped), Instance: label},
			message: fmt.Sprintf("snodod: upstream %q already has %d instances (max_instances = %d); end another session, or raise max_instances",
				u.name, len(u.instances), u.conf().MaxInstances)}
	}
	if c != nil && u.conf().Share == "session" {
		c.track(u.name)
	}
	return u.addInstanceLocked(key, label, cwd), nil
}

// cwdKey is the share key of a cwd instance rendered for cwd: a digest of
// the command, directory, arguments and environment, so that clients whose
// renderings are the same share one (docs/upstreams.md §3). Rendering reads
// the daemon's whole environment, and a request would otherwise pay for it
// every time: the key is kept on the client (whose cwd is fixed) for u's
// fingerprint, which fixes everything else the rendering reads.
func (u *upstream) cwdKey(c *Client, cwd string) string {
	if c != nil {
		c.mu.Lock()
		k, ok := c.cwdKeys[u.name]
		c.mu.Unlock()
		if ok && k.fingerprint == u.fingerprint {
			return k.key
		}
	}
	r := u.conf().Render(cwd, u.home(), u.m.opts.Env)
	sum := sha256.Sum256([]byte(strings.Join(append(append([]string{r.Command, r.Dir}, r.Args...), r.Env...), "\x00")))
	key := hex.EncodeToString(sum[:8])
	if c != nil {
		c.mu.Lock()
		if c.cwdKeys == nil {
			c.cwdKeys = map[string]renderedKey{}
		}
		c.cwdKeys[u.name] = renderedKey{fingerprint: u.fingerprint, key: key}
		c.mu.Unlock()
	}
	return key
}

// sessionInstanceKey is the key (and label) of session id's instance of a
// share = "session" upstream; Session.Close removes it by the same key.
func sessionInstanceKey(id uint64) string { return "session " + strconv.FormatUint(id, 10) }

// addInstanceLocked creates the instance of key and starts its loop under
// the upstream's supervisor; u.mu is held (or u not yet shared).
func (u *upstream) addInstanceLocked(key, label, cwd string) *instance {
	var cmd mcpclient.Command
	var roots []string
	if u.isRemote() {
		roots = u.conf().Roots // a remote server reads none of the client's files
	} else {
		r := u.conf().Render(cwd, u.home(), u.m.opts.Env)
		roots = r.Roots
		if len(roots) == 0 && u.conf().Share != "all" {
			roots = []string{"file://" + cwd}
		}
		// Start resolves Path on r.Env's PATH. Kept: the process outlives
		// the daemon, so that an upgrade hands it over (instance_handover.go);
		// only where its group is recorded, for the next daemon to end it
		// after a crash: `snodod stdio`'s die with it.
		cmd = mcpclient.Command{Path: r.Command, Args: r.Args, Env: r.Env, Dir: r.Dir, Kept: u.m.records()}
		if u.sandboxed() {
			cmd.Sandbox, cmd.Dir = u.sandboxFor(roots, r.Dir)
		}
	}
	in := newInstance(u, key, label, cwd, cmd, roots)
	u.instances[key] = &instanceSlot{in: in, token: u.sup.Add(in)}
	return in
}

// removeInstance stops and forgets the instance of key (its session
// ended); it returns at once, the process stopping within the grace.
func (u *upstream) removeInstance(key string) {
	u.mu.Lock()
	s, ok := u.instances[key]
	delete(u.instances, key)
	u.mu.Unlock()
	if ok {
		_ = u.sup.Remove(s.token)
	}
}

// each calls f for every instance, in key order.
func (u *upstream) each(f func(*instance)) {
	u.mu.Lock()
	keys := make([]string, 0, len(u.instances))
	for k := range u.instances {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	list := make([]*instance, len(keys))
	for i, k := range keys {
		list[i] = u.instances[k].in
	}
	u.mu.Unlock()
	for _, in := range list {
		f(in)
	}
}

// listed takes an instance's fresh catalog: stored in the cache, and the
// views recomputed, which announces what changed (docs/upstreams.md §4, §5).
func (u *upstream) listed(cat *catalog) {
	for _, t := range cat.Truncated {
		u.m.log.Warn("upstream catalog cut at its bounds", "upstream", u.name, "list", t)
	}
	u.mu.Lock()
	u.catalog, u.cached = cat, false
	u.mu.Unlock()
	u.m.cache.store(u, cat)
	u.m.refreshViews()
}

// currentCatalog is what the views list for u: the last listing, or nil.
func (u *upstream) currentCatalog() *catalog {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.catalog
}

// fingerprint digests what makes a process different (docs/upstreams.md §4):
// command, args, env (values hashed, never stored), inherit_env, cwd,
// share and protocol.
func fingerprint(u *config.Upstream) string {
	h := sha256.New()
	field := func(s string) { fmt.Fprintf(h, "%d:%s;", len(s), s) }
	field(u.Command)
	for _, a := range u.Args {
		field(a)
	}
	// hashed fields a table of secrets: the names, and each value's digest.
	hashed := func(m map[string]string) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			v := sha256.Sum256([]byte(m[k]))
			field(k + "=" + hex.EncodeToString(v[:]))
		}
	}
	field("env")
	hashed(u.Env)
	field(fmt.Sprint(u.InheritEnv.All, u.InheritEnv.Names))
	field(u.Cwd)
	field(u.Share)
	field(u.Protocol)
	if s := u.Sandbox; s.Level != "" && s.Level != sandbox.Off {
		// Only a sandboxed entry adds it: an unconfined one keeps the
		// fingerprint (and catalog cache) it had before the sandbox.
		field("sandbox")
		field(fmt.Sprintf("%+v", s))
	}
	if r := u.Remote; r != nil {
		// A remote server: what reaches it (header values hashed, never
		// stored), and who it authorizes as.
		field("remote")
		field(r.URL)
		field(fmt.Sprint(r.SSE, r.AllowInsecureHTTP))
		field(r.TLSCAFile)
		hashed(r.Headers)
		o := r.OAuth
		field(fmt.Sprint(o.ClientID, o.ClientSecretFile, o.PrivateKeyFile, o.SigningAlg, o.KeyID, o.ClientMetadataURL, o.Scopes, o.Grant, o.DPoP, o.RedirectPort))
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}
