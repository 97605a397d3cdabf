package api

import (
	"net/http"
	"time"

	"github.com/switchyard/switchyard/db"
)

// workerResponse is a live pod as the API shows it.
type workerResponse struct {
	ID          string        `json:"id"`
	Host        string        `json:"host"`
	PID         int           `json:"pid"`
	Version     string        `json:"version"`
	Queues      []db.PodQueue `json:"queues"`
	StartedAt   time.Time     `json:"started_at"`
	HeartbeatAt time.Time     `json:"heartbeat_at"`
}

func (s *Server) handleWorkerList(w http.ResponseWriter, r *http.Request) {
	pods, err := db.PodListAlive(r.Context(), s.deps.Pool, s.deps.PodStaleAfter)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := make([]workerResponse, len(pods))
	for i, p := range pods {
		out[i] = workerResponse{ID: p.ID, Host: p.Host, PID: p.PID, Version: p.Version, Queues: p.Queues, StartedAt: p.StartedAt, HeartbeatAt: p.HeartbeatAt}
		if out[i].Queues == nil {
			out[i].Queues = []db.PodQueue{}
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"workers": out})
}
