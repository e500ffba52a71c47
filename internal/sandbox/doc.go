// Package sandbox runs a child process (a hosted MCP server, an exec tool)
// confined by the Linux kernel's own mechanisms, without Docker: user,
// mount, PID and network namespaces, Landlock, seccomp, no_new_privs,
// dropped capabilities and rlimits (docs/security.md, "Sandbox").
//
// Go cannot run code between fork and exec, so a child is started through
// the running binary itself: [Wrap] rewrites an *exec.Cmd so that it
// re-executes /proc/self/exe in a hidden launcher mode, in the namespaces
// the kernel allows, with the plan (argv, environment, rules) on an
// inherited memfd, never in argv. The launcher (run by this package's
// init, before the program's own initialisation, in any binary that links
// the package) builds the child's view of the filesystem, applies the rest
// on one locked thread, and starts the server from that thread: as a tiny
// init that forwards signals and reaps when it runs in a PID namespace of
// its own (so the whole tree ends with it, setsid or not), by execve
// otherwise. It reports what it enforced, per kernel feature, on an
// inherited pipe ([Report]); under [Policy.Required] it refuses to start
// the server when anything asked for is not enforced.
//
// Typical use, by whoever starts children:
//
//	cmd := exec.Command(path, args...) // Stdin, Stdout, Stderr, Env, Dir as usual
//	launch, err := sandbox.Wrap(cmd, policy)
//	... start cmd (proc.Start) ...
//	report, err := launch.Started() // what is enforced; an error if refused
//	... on exit: launch.Exited(waitErr) is the server's own status
//
// The package never reads or writes the child's stdio, and logs nothing:
// the caller logs the report. It is Linux-only.
package sandbox
