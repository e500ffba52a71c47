package sandbox

import (
	"errors"
	"strings"
)

// splitHostPort and joinHostPort are net.SplitHostPort and
// net.JoinHostPort for an allow list's entries. The package does not
// import net: the launcher runs from this package's init (launcher.go),
// which Go runs only once every package it imports is initialised, and
// net, late in the order, would let some forty packages of the daemon's
// (protobuf, Prometheus, YAML, HTTP) initialise first in every launch.
func splitHostPort(s string) (host, port string, err error) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return "", "", errors.New("missing port in address")
	}
	host, port = s[:i], s[i+1:]
	if strings.HasPrefix(host, "[") {
		if !strings.HasSuffix(host, "]") {
			return "", "", errors.New("missing ']' in address")
		}
		host = host[1 : len(host)-1]
	} else if strings.ContainsAny(host, "[]") {
		return "", "", errors.New("unexpected '[' or ']' in address")
	} else if strings.Contains(host, ":") {
		return "", "", errors.New("too many colons in address")
	}
	if strings.ContainsAny(port, "[]") {
		return "", "", errors.New("unexpected '[' or ']' in address")
	}
	return host, port, nil
}

func joinHostPort(host, port string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + port
	}
	return host + ":" + port
}
