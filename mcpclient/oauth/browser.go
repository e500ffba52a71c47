package oauth

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
)

// ErrNoBrowser: OpenBrowser found no way to open a URL; show it to the
// person instead.
var ErrNoBrowser = errors.New("no browser to open: $BROWSER is not set and there is no display for xdg-open")

// OpenBrowser opens u in a browser: with $BROWSER when it is set (a
// colon-separated list of commands tried in turn, each given the URL as
// its last argument or in place of %s, the convention of xdg-utils and
// Python's webbrowser), else with xdg-open when there is a display
// ($DISPLAY or $WAYLAND_DISPLAY). It returns once the browser started; it
// does not wait for it to exit. Its signature fits Config.Interact.
func OpenBrowser(ctx context.Context, u string) error {
	if b := os.Getenv("BROWSER"); b != "" {
		var errs []error
		for _, entry := range strings.Split(b, ":") {
			args := strings.Fields(entry)
			if len(args) == 0 {
				continue
			}
			replaced := false
			for i, a := range args {
				if strings.Contains(a, "%s") {
					args[i] = strings.ReplaceAll(a, "%s", u)
					replaced = true
				}
			}
			if !replaced {
				args = append(args, u)
			}
			if err := start(args); err != nil {
				errs = append(errs, err)
				continue
			}
			return nil
		}
		return errors.Join(errs...)
	}
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return ErrNoBrowser
	}
	return start([]string{"xdg-open", u})
}

// start runs a browser command without waiting for it, reaping it when it
// exits.
func start(args []string) error {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, nil, os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }()
	return nil
}
