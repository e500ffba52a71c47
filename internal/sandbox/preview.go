package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Preview says what a child that cmd would start under p gets on this
// kernel, without starting it: the grants (as Wrap resolves them) and
// each feature, enforced or not, as the kernel probe found it (Probe
// starts a launcher or two, once per process). The launcher's own report
// (Launch.Started) is the authority; Preview is its forecast, for `config
// check`. cmd is not modified. Under Off it returns a report without
// features.
func Preview(cmd *exec.Cmd, p Policy) (Report, error) {
	return preview(cmd, p, Probe())
}

func preview(cmd *exec.Cmd, p Policy, k Kernel) (Report, error) {
	if err := p.Validate(); err != nil {
		return Report{}, err
	}
	rep := report{Report: Report{Level: p.Level}}
	if p.Level == Off {
		return rep.Report, nil
	}
	env := cmd.Env
	if env == nil {
		env = os.Environ()
	}
	argv := append([]string(nil), cmd.Args...)
	if len(argv) == 0 {
		argv = []string{cmd.Path}
	}
	if filepath.IsAbs(cmd.Path) && cmd.Err == nil {
		argv[0] = cmd.Path // as Wrap names it
	}
	_, grants, err := resolve(p, argv, env, cmd.Dir)
	if err != nil {
		return Report{}, err
	}
	rep.Grants = grants
	ns := k.namespacesFor(p)
	missing := func(what string) string {
		if k.Detail != "" {
			return what + " (" + k.Detail + ")"
		}
		return what
	}
	rep.set(FeatureUserNamespace, ns.User, "%s", tern(ns.User, "", missing("no user namespace for this user here")))
	rep.set(FeatureFilesystemView, ns.Mount, "%s", tern(ns.Mount, "only the granted paths exist", missing("no mount namespace in which to build it")))
	if !p.SharePIDs {
		rep.set(FeaturePIDNamespace, ns.PID, "%s", tern(ns.PID, "the tree ends with the server", missing("no PID namespace here")))
		priv := ns.PID && k.View && k.Proc
		rep.set(FeaturePrivateProc, priv, "%s", tern(priv, "", "the host's /proc is shown instead"))
	}
	mode := p.network()
	if mode == NetworkNone || mode == NetworkLoopback {
		rep.set(FeatureNetworkNamespace, ns.Net, "%s", tern(ns.Net, string(mode), missing("no network namespace here")))
	}
	abi := k.LandlockABI
	rep.set(FeatureLandlockFS, abi >= 1, "%s", tern(abi >= 1, fmt.Sprintf("ABI %d", abi), "Landlock is not available in this kernel"))
	switch {
	case mode == NetworkPorts:
		rep.set(FeatureLandlockTCP, abi >= 4, "%s", tern(abi >= 4, "TCP connections only to the allowed ports", fmt.Sprintf("Landlock ABI %d < 4 has no TCP rules", abi)))
	case (mode == NetworkNone || mode == NetworkLoopback) && !ns.Net && abi >= 4:
		rep.set(FeatureLandlockTCP, true, "no network namespace: every TCP connection and bind refused")
	}
	rep.set(FeatureLandlockScopes, abi >= 6, "%s", tern(abi >= 6, "", fmt.Sprintf("Landlock ABI %d < 6", abi)))
	rep.set(FeatureSeccomp, k.Seccomp, "%s", tern(k.Seccomp, fmt.Sprintf("%d syscalls refused", len(p.seccomp())), "seccomp is not available in this kernel"))
	rep.set(FeatureNoNewPrivs, true, "")
	rep.set(FeatureCapabilities, true, "")
	lim := p.limits()
	if lim.MemoryBytes != Unlimited {
		rep.set(FeatureMemoryLimit, true, "%d bytes of data per process", lim.MemoryBytes)
	}
	if lim.OpenFiles != Unlimited {
		rep.set(FeatureOpenFilesLimit, true, "%d", lim.OpenFiles)
	}
	if lim.Processes != Unlimited {
		nproc := ns.User && os.Getuid() != 0
		pidMax := ns.PID && k.View && k.Proc && kernelAtLeast(6, 14)
		rep.set(FeatureProcessLimit, nproc || pidMax, "%s", tern(nproc || pidMax, fmt.Sprintf("%d", lim.Processes),
			"RLIMIT_NPROC works only for a non-root uid in a user namespace, and pid_max of a PID namespace needs Linux 6.14"))
	}
	return rep.Report, nil
}

func tern(cond bool, yes, no string) string {
	if cond {
		return yes
	}
	return no
}
