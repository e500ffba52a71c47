package config

import (
	"errors"
	"io/fs"
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
// read, is an error.
//
// Each warning is a *FileError or a *ValidationError; err is what Load
// would return.
func LoadClient(opts Options) (c *Config, warnings []error, err error) {
	l := newLoader(opts.Env)
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
	// Every offending key goes back to its default, and entry sections
	// (which a client never uses) are left out.
	l.problems, l.entries = nil, nil
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
