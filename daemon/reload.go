package daemon

import (
	"errors"
	"fmt"
	"strings"

	"github.com/snodod/snodod/config"
)

// Reload loads the configuration again (Options.Reload) and applies it to
// the sessions that start after it: their limits and executor. The
// configured tools, resources and prompts change in place on the server
// running sessions hold too, which announces the lists that changed
// (catalog.Host); only a change of server.* or protocol.versions builds a
// new server, for new sessions. The executor is shared on: it is rebuilt
// only when executor.* or session.request_timeout changed.
//
// A configuration that does not load is refused: every problem is logged,
// one per line, and the running configuration stays. systemd is told
// RELOADING=1 first and READY=1 after, either way. SIGHUP calls Reload.
func (d *Daemon) Reload() error {
	d.reloadMu.Lock()
	defer d.reloadMu.Unlock()
	d.notify.send(reloading())
	defer func() { d.notify.send("READY=1", d.statusLine()) }()
	if d.opts.Reload == nil {
		err := errors.New("reloading is not configured")
		d.log.Error("reload refused; the running configuration stays", "error", err)
		d.refused.Store(&[]string{err.Error()})
		return err
	}
	cfg, err := d.opts.Reload()
	if err == nil {
		var g *generation
		prev := d.gen.Load()
		if g, err = d.build(cfg, prev); err == nil {
			// The manager knows the new upstreams before their views
			// are attached.
			d.ups.Apply(cfg)
			d.attachViews(g, prev)
			d.gen.Store(g)
			prev.release()
			d.budget.SetMax(g.limits.MaxBufferedBytes)
			d.warnRestartOnly(cfg)
			if err := d.applyAudit(cfg); err != nil {
				d.log.Error("audit log: the [audit] settings in force stay", "error", err)
			}
			d.refused.Store(nil)
			d.log.Info("configuration reloaded; new sessions use it", "file", cfg.File())
			if d.opts.OnReload != nil {
				d.opts.OnReload(cfg)
			}
			d.poke()
			return nil
		}
	}
	lines := problemLines(err)
	for _, line := range lines {
		d.log.Error("reload refused; the running configuration stays", "problem", line)
	}
	d.refused.Store(&lines)
	return err
}

// reloadWarnings are status's warnings of a refused reload, one per
// problem, until a reload succeeds.
func (d *Daemon) reloadWarnings() []string {
	p := d.refused.Load()
	if p == nil {
		return nil
	}
	out := make([]string, len(*p))
	for i, line := range *p {
		out[i] = "reload refused, the running configuration stays: " + line
	}
	return out
}

// problemLines splits a loading error into its lines: one per problem of a
// *config.ValidationError, else the error's own lines.
func problemLines(err error) []string {
	var ve *config.ValidationError
	if errors.As(err, &ve) {
		lines := make([]string, len(ve.Problems))
		for i, p := range ve.Problems {
			lines[i] = p.String()
		}
		return lines
	}
	return strings.Split(err.Error(), "\n")
}

// warnRestartOnly logs the keys whose configured value differs from the one
// still in force since the start, which a reload cannot apply: the sockets
// are bound, the log format is the caller's handler, and the HTTP and admin
// listeners keep the settings they started with. The running value is the first
// configuration's, not the previous reload's: a reload that was not applied
// changed nothing.
func (d *Daemon) warnRestartOnly(cfg *config.Config) {
	old := d.first
	changed := func(key string, a, b string) {
		if a != b {
			d.log.Warn("this setting applies only after a restart", "key", key, "running", a, "configured", b)
		}
	}
	changed("daemon.socket", old.Daemon.Socket, cfg.Daemon.Socket)
	changed("daemon.control_socket", old.Daemon.ControlSocket, cfg.Daemon.ControlSocket)
	changed("log.format", old.Log.Format, cfg.Log.Format)
	changed("http.*", httpSettings(old), httpSettings(cfg)) // http.go: the listener is built once
	// admin.go: the listener, its token, the page's viewer bounds and the
	// metrics' histograms are all built once, at the start.
	changed("admin.*", fmt.Sprintf("%+v", old.Admin), fmt.Sprintf("%+v", cfg.Admin))
}
