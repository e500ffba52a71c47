package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// clientKeys are what a client of the daemon (`snodod connect`, `status`,
// `kill`) needs from the configuration: where the sockets are.
var clientKeys = []string{"daemon.socket", "daemon.control_socket"}

// LoadClient loads the configuration as Load does, for a client of the
// daemon, which needs only the socket paths (Config.Daemon.Socket and
// ControlSocket). A problem anywhere else (an unknown key, a bad value, a
// stray SNODOD_ variable, a file that does not parse) does not stop it: the
// key keeps its default, the file that does not parse is left out, and the
// problems come back as warnings, for the caller to show. Only a problem
// with the socket paths themselves, or an explicit file that cannot be
// read, is an error. The entry sections (mcpServers, tools, resources,
// prompts) are not decoded: their commands are not looked up and their
// files and secrets not read, and the Config has none of them.
//
// Each warning is a *FileError or a *ValidationError; err is what Load
// would return.
func LoadClient(opts Options) (c *Config, warnings []error, err error) {
	l := newLoader(opts.Env, opts.EnvPrefix)
	l.socketsOnly = true
	if err := l.readFile(opts.File); err != nil {
		var fe *FileError
		if !errors.As(err, &fe) || errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			return nil, nil, err
		}
		warnings = append(warnings, err) // the other layers still apply
	}
	if err := l.readEnv(); err != nil {
		return nil, nil, err
	}
	l.readOverrides(opts.Overrides, opts.Flags)
	c, err = l.build()
	var ve *ValidationError
	if !errors.As(err, &ve) {
		return c, warnings, err
	}
	for _, p := range ve.Problems {
		for _, key := range clientKeys {
			if p.Key == key {
				return nil, nil, err
			}
		}
	}
	// Every offending key goes back to its default.
	l.problems = nil
	for _, p := range ve.Problems {
		if _, ok := specByName[p.Key]; ok {
			l.set(p.Key, defaults().raw[p.Key], Source{Kind: FromDefault})
		}
	}
	if c, err = l.build(); err != nil {
		return nil, nil, ve
	}
	return c, append(warnings, ve), nil
}

// DefaultSocketDirs returns, when neither socket path was configured (both
// are the defaults), the other directories a daemon started by default in
// another environment listens in, for a client to try when the daemon
// does not answer where c says. MCP clients start their servers with a
// minimal environment (the TypeScript SDK passes no XDG_RUNTIME_DIR), and
// a daemon may have been started without one (sudo, cron) or with one:
// the candidates are $XDG_RUNTIME_DIR/snodod, /run/user/<uid>/snodod,
// $TMPDIR/snodod-<uid> and /tmp/snodod-<uid>, each once, c's own
// directory left out, in that order. It returns nil when a socket path
// was configured: then that is where the daemon is.
func (c *Config) DefaultSocketDirs() []string {
	if c.Source("daemon.socket").Kind != FromDefault || c.Source("daemon.control_socket").Kind != FromDefault {
		return nil
	}
	own := filepath.Dir(c.Daemon.ControlSocket)
	var dirs []string
	add := func(d string) {
		if d != "" && d != own && !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	if x := c.env["XDG_RUNTIME_DIR"]; filepath.IsAbs(x) {
		add(filepath.Join(x, "snodod"))
	}
	id := strconv.Itoa(os.Getuid())
	if fi, err := os.Stat(filepath.Join("/run/user", id)); err == nil && fi.IsDir() {
		add(filepath.Join("/run/user", id, "snodod"))
	}
	add(filepath.Join(tempDir(c.env), "snodod-"+id))
	add(filepath.Join("/tmp", "snodod-"+id))
	return dirs
}
