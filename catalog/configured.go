package catalog

import (
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/snodod/snodod/config"
	"github.com/snodod/snodod/internal/proc"
	"github.com/snodod/snodod/server"
)

// configured is the part of one server's catalog built from configuration:
// the exec tools, file resources and prompt templates of [tools],
// [resources] and [prompts]. apply makes the server serve a new
// configuration's items, touching only what changed, so running sessions
// see one list change per kind that changed and nothing else; an entry
// whose configuration is unchanged keeps its state (a tool's running
// calls, a folder's watch). One goroutine at a time calls apply and close
// (Host serialises them).
type configured struct {
	srv    *server.Server
	log    *slog.Logger
	record func() *proc.GroupRecord // exec tools' runs are recorded there
	// stateDir holds the exec tools' private homes (HostOptions.StateDir).
	stateDir string

	tools   map[string]*execTool
	prompts map[string]config.Prompt
	folders map[string]*folder
}

func newConfigured(srv *server.Server, log *slog.Logger, record func() *proc.GroupRecord, stateDir string) *configured {
	return &configured{srv: srv, log: log, record: record, stateDir: stateDir, tools: map[string]*execTool{},
		prompts: map[string]config.Prompt{}, folders: map[string]*folder{}}
}

// apply replaces c's items with cfg's. cfg has passed check.
func (c *configured) apply(cfg *config.Config) {
	// A removed entry is removed; a changed one is registered again below,
	// which replaces it (its running calls finish as they started).
	if gone := prune(c.tools, cfg.Tools, func(t config.Tool) string { return t.Name },
		func(t *execTool) config.Tool { return t.cfg }, nil); len(gone) > 0 {
		c.srv.RemoveTools(gone...)
	}
	for _, t := range cfg.Tools {
		if _, kept := c.tools[t.Name]; !kept {
			et := newExecTool(t, cfg.SandboxFor(t.Sandbox, c.stateDir, "tools", t.Name), c.log, c.record)
			c.srv.AddTool(et.definition(), et.call)
			c.tools[t.Name] = et
		}
	}

	if gone := prune(c.prompts, cfg.Prompts, func(p config.Prompt) string { return p.Name },
		func(p config.Prompt) config.Prompt { return p }, nil); len(gone) > 0 {
		c.srv.RemovePrompts(gone...)
	}
	for _, p := range cfg.Prompts {
		if _, kept := c.prompts[p.Name]; !kept {
			if err := addPrompt(c.srv, p); err != nil {
				c.log.Error("prompt not served", "err", err) // check parsed it: not expected
				continue
			}
			c.prompts[p.Name] = p
		}
	}

	// A folder removes its own items as it stops; its watch ends with it.
	prune(c.folders, cfg.Resources, func(r config.FileResource) string { return r.Name },
		func(f *folder) config.FileResource { return f.cfg }, func(f *folder) { f.stop(true) })
	for _, r := range cfg.Resources {
		if _, kept := c.folders[r.Name]; !kept {
			f := newFolder(c.srv, r, c.log)
			f.start()
			c.folders[r.Name] = f
		}
	}
}

// prune deletes from have every item that want (a new configuration's
// entries) lacks or configures differently, calling drop, when set, on
// each, and returns the names of those want lacks: the items to
// unregister. Those it keeps are unchanged, so they keep their state.
func prune[I, C any](have map[string]I, want []C, name func(C) string, cfgOf func(I) C, drop func(I)) (gone []string) {
	byName := make(map[string]C, len(want))
	for _, w := range want {
		byName[name(w)] = w
	}
	for n, item := range have {
		w, ok := byName[n]
		if !ok {
			gone = append(gone, n)
		}
		if !ok || !reflect.DeepEqual(w, cfgOf(item)) {
			if drop != nil {
				drop(item)
			}
			delete(have, n)
		}
	}
	return gone
}

// close ends every folder's watch. The items stay registered: a server a
// reload replaced keeps serving the sessions that use it.
func (c *configured) close() {
	var wg sync.WaitGroup
	for _, f := range c.folders {
		wg.Go(func() { f.stop(false) })
	}
	wg.Wait()
}

// warnings returns what the folders could not do, sorted.
func (c *configured) warnings() []string {
	var out []string
	for _, f := range c.folders {
		out = append(out, f.Warnings()...)
	}
	slices.Sort(out)
	return out
}

// Reserved are the tool and prompt names something other than the
// configuration already serves in the same view, each with who serves it
// ("snodod's own status tool"). A configured name among them is refused,
// as the configuration alone settles collisions (docs/upstreams.md §2).
type Reserved struct {
	Tools   map[string]string
	Prompts map[string]string
}

// Check reports the problems of cfg's tools, resources and prompts that
// the config package cannot see by itself, every one at once, keyed like
// config's (tools.NAME.input_schema): a schema the runtime does not
// compile, and names reserved already serves: snodod's own status tool
// always, and whatever the caller adds (the demo tools under --demo; an
// aggregated view's upstream tools and prompts, when upstreams are
// hosted: this is where they join). `snodod config check` and every
// (re)load run it.
func Check(cfg *config.Config, reserved Reserved) []config.Problem {
	src := config.Source{Kind: config.FromFile, Name: cfg.File()}
	var problems []config.Problem
	add := func(key, msg string) {
		problems = append(problems, config.Problem{Key: key, Message: msg, Source: src})
	}
	for _, t := range cfg.Tools {
		// InputSchema is nil in a partial configuration (config.Inspect)
		// whose input did not decode: that problem is reported already.
		if t.InputSchema != nil {
			if err := server.CheckSchema(t.InputSchema); err != nil {
				add("tools."+t.Name+".input_schema", "is not a JSON Schema the runtime accepts: "+err.Error())
			}
		}
		if t.OutputSchema != nil {
			if err := server.CheckSchema(t.OutputSchema); err != nil {
				add("tools."+t.Name+".output_schema", "is not a JSON Schema the runtime accepts: "+err.Error())
			}
		}
		if owner, taken := reservedTool(reserved, t.Name); taken {
			add("tools."+t.Name, fmt.Sprintf("the name is taken by %s; choose another name", owner))
		}
	}
	for _, p := range cfg.Prompts {
		if owner, taken := reserved.Prompts[p.Name]; taken {
			add("prompts."+p.Name, fmt.Sprintf("the name is taken by %s; choose another name", owner))
		}
	}
	slices.SortStableFunc(problems, func(a, b config.Problem) int { return strings.Compare(a.Key, b.Key) })
	return problems
}

// reservedTool reports who serves name: reserved, or snodod's status tool.
func reservedTool(r Reserved, name string) (string, bool) {
	if owner, ok := r.Tools[name]; ok {
		return owner, true
	}
	if name == "status" {
		return "snodod's own status tool", true
	}
	return "", false
}
