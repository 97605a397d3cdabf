package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// handleEvents streams task state changes and workflow execution history
// as Server-Sent Events:
//
//	event: task
//	data: {"id":42,"type":"noop","queue":"default","state":"completed","attempt":1,"at":"..."}
//
//	event: execution
//	data: {"id":7,"execution_id":3,"type":"step_completed","step":"build","at":"..."}
//
// (an execution event is one entry of the execution's history, without its
// data: GET /v1/executions/{id}/history?after=<id-1> reads it whole), and
// "event: resync" when changes may have been missed (the client was too
// slow, or the server's Postgres listener reconnected): refetch what you
// show. Optional filters, each repeatable: ?type=...&queue=... restrict
// task events, ?execution=<id> restricts execution events; a filter of one
// kind does not hold back events of the other. A comment line is sent
// every SSEHeartbeat to keep proxies from closing the stream.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	types, queues := q["type"], q["queue"]
	var executions []int64
	for _, v := range q["execution"] {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id < 1 {
			s.writeError(w, r, badRequest("invalid-parameter", "execution must be an execution id", FieldError{Field: "execution", Message: "must be a positive integer"}))
			return
		}
		executions = append(executions, id)
	}
	rc := http.NewResponseController(w)
	batches, unsubscribe := s.deps.Events.Subscribe()
	defer unsubscribe()

	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, ": switchyard events\n\n")
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
			for _, e := range b.Executions {
				if len(executions) > 0 && !slices.Contains(executions, e.ExecutionID) {
					continue
				}
				data, _ := json.Marshal(e)
				fmt.Fprintf(w, "event: execution\ndata: %s\n\n", data)
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
