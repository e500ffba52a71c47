package sandbox

import (
	"fmt"
	"strings"
	"sync"

	"github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// seccompFilter is a filter assembled by the daemon for the launcher to
// load: the launcher, on a child's start path, only copies it in.
type seccompFilter struct {
	// Program is the BPF program, one instruction a number: code<<48 |
	// jt<<40 | jf<<32 | k.
	Program []uint64 `json:"program,omitempty"`
	Denied  int      `json:"denied,omitempty"` // syscalls refused with EPERM
	Err     string   `json:"err,omitempty"`    // why there is no filter
}

// seccompFilters caches assembled filters by deny list.
var seccompFilters sync.Map // string -> *seccompFilter

// filterFor returns the filter of a deny list (nil for an empty one): the
// list refused with EPERM (go-seccomp-bpf assembles it from its syscall
// tables), after a guard that refuses every syscall of another ABI than
// the native one with ENOSYS (i386's int 0x80 on x86-64: a deny list keyed
// on x86-64 numbers means nothing there; go-seccomp-bpf's own program lets
// other architectures through to its default, allow, and refuses only x32).
func filterFor(deny []string) *seccompFilter {
	if len(deny) == 0 {
		return nil
	}
	key := strings.Join(deny, ",")
	if f, ok := seccompFilters.Load(key); ok {
		return f.(*seccompFilter)
	}
	f := assemble(deny)
	seccompFilters.Store(key, f)
	return f
}

func assemble(deny []string) *seccompFilter {
	if !seccomp.Supported() {
		return &seccompFilter{Err: "seccomp is not available in this kernel"}
	}
	info, err := arch.GetInfo("")
	if err != nil {
		return &seccompFilter{Err: err.Error()}
	}
	var names []string
	for _, n := range deny {
		if _, ok := info.SyscallNames[n]; ok { // iopl has no number on arm64
			names = append(names, n)
		}
	}
	policy := seccomp.Policy{
		DefaultAction: seccomp.ActionAllow,
		Syscalls:      []seccomp.SyscallGroup{{Action: seccomp.ActionErrno, Names: names}},
	}
	insts, err := policy.Assemble()
	if err != nil {
		return &seccompFilter{Err: fmt.Sprintf("assemble: %v", err)}
	}
	guard := []bpf.Instruction{
		bpf.LoadAbsolute{Off: 4, Size: 4}, // seccomp_data.arch
		bpf.JumpIf{Cond: bpf.JumpEqual, Val: uint32(info.ID), SkipTrue: 1},
		bpf.RetConstant{Val: uint32(seccomp.ActionErrno) | uint32(unix.ENOSYS)},
	}
	raw, err := bpf.Assemble(append(guard, insts...))
	if err != nil {
		return &seccompFilter{Err: fmt.Sprintf("assemble: %v", err)}
	}
	f := &seccompFilter{Denied: len(names), Program: make([]uint64, len(raw))}
	for i, r := range raw {
		f.Program[i] = uint64(r.Op)<<48 | uint64(r.Jt)<<40 | uint64(r.Jf)<<32 | uint64(r.K)
	}
	return f
}
