// The status page's live updates: the page is whole without this script
// (server-rendered); the script swaps the live region for each snapshot
// of the stream (/events), the same HTML the server renders.
"use strict";
(function () {
  const live = document.getElementById("live");
  const badge = document.getElementById("stream");
  if (!live || !window.EventSource) return;
  const state = (s, text) => { badge.dataset.state = s; badge.textContent = text; };
  const es = new EventSource("/events");
  es.onopen = () => state("live", "live");
  es.onmessage = (e) => {
    live.innerHTML = e.data;
    document.body.dataset.snapshot = e.lastEventId;
  };
  es.onerror = () => {
    // The browser retries by itself unless the answer was not a stream
    // (503: admin.max_viewers reached), which closes it.
    state("lost", es.readyState === EventSource.CLOSED ? "live updates refused: reload later" : "reconnecting");
  };
})();
