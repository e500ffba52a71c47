package sandbox

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"

	"github.com/elastic/go-seccomp-bpf"
	ll "github.com/landlock-lsm/go-landlock/landlock/syscall"
)

// Kernel is what this kernel lets this process do for a sandbox, found
// once by Probe.
type Kernel struct {
	LandlockABI int  `json:"landlock_abi"` // 0: no Landlock
	Seccomp     bool `json:"seccomp"`
	Root        bool `json:"root"` // euid 0
	// UserNamespace: a child can be cloned into a user namespace of its
	// own; Namespaces: into mount and PID namespaces (in a user namespace,
	// or as root); NetworkNamespace: into a network namespace too.
	UserNamespace    bool `json:"user_namespace"`
	Namespaces       bool `json:"namespaces"`
	NetworkNamespace bool `json:"network_namespace"`
	// View: such a child can mount (tmpfs, binds): the filesystem view;
	// Proc: it can mount a /proc of its PID namespace (not where the
	// host's /proc has parts covered, as in many containers); Loopback:
	// it can bring lo up in its network namespace.
	View     bool `json:"view"`
	Proc     bool `json:"proc"`
	Loopback bool `json:"loopback"`
	// Detail says why the first thing tried failed, if it did.
	Detail string `json:"detail,omitempty"`
}

var probeOnce = sync.OnceValue(probe)

// Probe finds what the kernel allows, once per process (it starts the
// launcher once or a few times, a few milliseconds), and returns the same
// answer after.
func Probe() Kernel { return probeOnce() }

func probe() Kernel {
	k := Kernel{Seccomp: seccomp.Supported(), Root: os.Geteuid() == 0}
	if v, err := ll.LandlockGetABIVersion(); err == nil {
		k.LandlockABI = v
	}
	combos := []namespaces{
		{User: true, Mount: true, PID: true, Net: true},
		{User: true, Mount: true, PID: true},
	}
	if k.Root {
		combos = append(combos, namespaces{Mount: true, PID: true, Net: true}, namespaces{Mount: true, PID: true})
	}
	var details []string
	for _, c := range combos {
		got, err := probeWith(c)
		if err != nil {
			details = append(details, fmt.Sprintf("clone %s: %v", c, err))
			continue
		}
		k.UserNamespace, k.Namespaces, k.NetworkNamespace = c.User, true, c.Net
		k.View, k.Proc, k.Loopback = got.View, got.Proc, got.Loopback
		if got.Detail != "" {
			details = append(details, got.Detail)
		}
		break
	}
	k.Detail = strings.Join(details, "; ")
	return k
}

func (n namespaces) String() string {
	var s []string
	for _, x := range []struct {
		on   bool
		name string
	}{{n.User, "user"}, {n.Mount, "mount"}, {n.PID, "pid"}, {n.Net, "net"}} {
		if x.on {
			s = append(s, x.name)
		}
	}
	return strings.Join(s, "+")
}

// probeResult is what a probing launcher could do in its namespaces.
type probeResult struct {
	View     bool   `json:"view"`
	Proc     bool   `json:"proc"`
	Loopback bool   `json:"loopback"`
	Detail   string `json:"detail,omitempty"`
}

// probeWith starts the launcher in probe mode in the namespaces n.
func probeWith(n namespaces) (probeResult, error) {
	r, w, err := os.Pipe()
	if err != nil {
		return probeResult{}, err
	}
	defer r.Close()
	mode := "probe"
	if n.Net {
		mode = "probe+net"
	}
	host := hostNamespaces()
	cmd := exec.Command(launcherPath, launcherArg, mode, "3", fmt.Sprintf("%d,%d", host["mnt"], host["net"]))
	cmd.Args[0] = "snodod-sandbox"
	cmd.Env = []string{}
	cmd.ExtraFiles = []*os.File{w}
	setNamespaces(cmd, n)
	err = cmd.Start()
	w.Close()
	if err != nil {
		return probeResult{}, err
	}
	line, _ := bufio.NewReader(r).ReadBytes('\n')
	werr := cmd.Wait()
	var res probeResult
	if err := json.Unmarshal(line, &res); err != nil {
		if werr != nil {
			return probeResult{}, werr
		}
		return probeResult{}, errors.New("the probe said nothing")
	}
	return res, nil
}

// namespacesFor is what to clone a child of policy p into on this kernel.
func (k Kernel) namespacesFor(p Policy) namespaces {
	if !k.Namespaces {
		return namespaces{}
	}
	mode := p.network()
	return namespaces{
		User:  k.UserNamespace,
		Mount: k.View,
		PID:   !p.SharePIDs,
		Net:   k.NetworkNamespace && (mode == NetworkNone || mode == NetworkLoopback),
	}
}
