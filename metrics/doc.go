// Package metrics is the daemon's Prometheus instrumentation
// (docs/observability.md): a registry of its own, served as Prometheus
// text, OpenMetrics or protobuf by content negotiation, with classic and
// native histograms side by side.
//
// Two kinds of metric live here. The requests' counters and latency
// histograms are fed as requests end, by Metrics.RequestEnded (the
// server.Observer the daemon gives its runtimes), and cost a few hundred
// nanoseconds per request. Everything else (sessions, the executor, the
// budgets, hosted servers, the listeners' refusals) is read at scrape
// time from the snapshot `snodod status` shows (Options.Status), so that
// nothing on the request path counts it twice.
//
// Labels are bounded: a method of the protocol, a tool or upstream of
// the configuration, an outcome, a JSON-RPC error code; never a session
// id, an argument or a URI. The package never writes to the network
// itself and holds no goroutine: the caller serves Handler.
package metrics
