package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// handleEvents streams task state changes as Server-Sent Events:
//
//	event: task
//	data: {"id":42,"type":"noop","queue":"default","state":"completed","attempt":1,"at":"..."}
//
// and "event: resync" when changes may have been missed (the client was
// too slow, or the server's Postgres listener reconnected): refetch what
// you show. Optional filters: ?type=...&queue=... (repeatable). A comment
// line is sent every SSEHeartbeat to keep proxies from closing the stream.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	types, queues := r.URL.Query()["type"], r.URL.Query()["queue"]
	batches, unsubscribe := s.deps.Events.Subscribe()
	defer unsubscribe()

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": switchyard task events\n\n")
	if err := rc.Flush(); err != nil {
		return
	}
	heartbeat := time.NewTicker(s.cfg.SSEHeartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-s.ready:
			return // shutting down: clients reconnect to another pod
		case <-heartbeat.C:
			fmt.Fprint(w, ": keep-alive\n\n")
		case b, ok := <-batches:
			if !ok {
				return
			}
			for _, e := range b.Events {
				if (len(types) > 0 && !slices.Contains(types, e.Type)) || (len(queues) > 0 && !slices.Contains(queues, e.Queue)) {
					continue
				}
				data, _ := json.Marshal(e)
				fmt.Fprintf(w, "event: task\ndata: %s\n\n", data)
			}
			if b.Resync || b.Truncated > 0 {
				fmt.Fprintf(w, "event: resync\ndata: {\"missed\":%d}\n\n", max(b.Truncated, 0))
			}
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}
