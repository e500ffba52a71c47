// Package upstream hosts the MCP servers users already have ("upstreams",
// docs/upstreams.md): each configured server runs once, as a supervised child
// process, and is served to every session that needs it.
//
// Each instance speaks MCP to its child through an mcpclient.Conn (the
// MCP client: era probe, handshake, calls, the child's process, stdio and
// stderr; a remote server would be another mcpclient transport). This
// package is everything above a Conn:
//
//   - Manager (manager.go) owns every configured upstream, applies a new
//     configuration with the fingerprint rules of docs/upstreams.md §4, kills
//     the orphans of a crashed predecessor, and answers status.
//   - An upstream (upstream.go) is one configured server: a suture
//     supervisor holding its instances, one per share key (docs/upstreams.md
//     §3), created single-flight within max_instances and
//     upstreams.max_children.
//   - An instance (instance.go, instance_run.go) is one child process over
//     its life: stopped, starting, ready, backoff, failed, draining; lazy,
//     eager or manual start, restart with backoff, idle stop, health pings,
//     a fair gate of max_in_flight and max_queued requests.
//   - Views (view.go) register the upstreams' items with the runtime
//     (server.ReplaceRelayed): the aggregated view on the daemon's own
//     server under <prefix>__ names, and one pass-through server per
//     upstream with its own names, capabilities and instructions. Lists
//     come from the running instance, else from the on-disk catalog cache
//     (cache.go), so a stopped or failed upstream stays listed.
//   - Routing (relay.go, notify.go, requests.go, park.go) relays a
//     session's request to the right instance and back: progress to the
//     requesting session only, cancellation, request_timeout, list
//     changes re-listed and announced, resource updates to subscribers with
//     reference-counted upstream subscriptions, log messages and
//     server→client requests attributed to the one session that has
//     requests in flight (each session's queue of them bounded by
//     upstreams.max_server_requests), and the four era pairings of
//     docs/upstreams.md §6.
//   - Errors (errors.go) are what a client sees when an upstream cannot
//     serve (docs/upstreams.md §7): never a hang, never "Unknown tool" for a
//     server that is merely down.
//
// A session reaches the upstreams through the server of its view: the
// aggregated one (Manager.Attach) or a pass-through one (AttachView), both
// built by their owner (the daemon's configuration generation, which
// detaches them once no session uses them). Who asks (its id, working
// directory and view) is the server.Caller on the session's state, which
// the session's owner registers with Open, so that sharing, attribution
// and cleanup know who asked; Open's release, when the session ends,
// stops its share = "session" instances and releases its subscriptions.
// The lazy start of an upstream not listed yet is the StartHook both
// attachments install on the server.
//
// The package never writes to a session's device and never imports
// session/ or daemon/.
package upstream
