package api

import (
	_ "embed"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/refinery-bandits/refinery/bandit"
)

// OpenAPI is the OpenAPI 3.1 document of every route (openapi.json),
// served at GET /openapi.json. Its schemas are closed (no member beyond
// those listed), and openapi_test.go checks the handlers against it:
// every route, every status the handlers answer and every JSON member
// of their responses.
//
//go:embed openapi.json
var OpenAPI []byte

func (s *Server) openapi(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(OpenAPI)
}

func (s *Server) snapshot(w http.ResponseWriter, r *http.Request) {
	a := agentFrom(r.Context())
	f, err := a.ExportSnapshot()
	if err != nil {
		s.writeProblem(w, r, withDetail(err, "%s", strings.TrimSuffix(err.Error(), ": "+bandit.ErrConflict.Error())))
		return
	}
	s.writeJSON(w, r, http.StatusOK, f)
}

func (s *Server) importSnapshot(w http.ResponseWriter, r *http.Request) {
	var f bandit.SnapshotFile
	if !s.decodeBody(w, r, MaxSnapshotBytes, &f) {
		return
	}
	a, err := s.svc.Import(r.Context(), &f)
	if err != nil {
		switch {
		case errors.Is(err, bandit.ErrExists):
			err = withDetail(err, "a bandit named %q already exists", a0(f))
		case errors.Is(err, bandit.ErrLimit):
			err = withDetail(err, "%s", strings.TrimSuffix(err.Error(), ": "+bandit.ErrLimit.Error()))
		}
		s.writeProblem(w, r, err)
		return
	}
	v, err := s.view(r.Context(), a, true)
	if err != nil {
		s.writeProblem(w, r, err)
		return
	}
	s.log.InfoContext(r.Context(), "bandit imported", append(logAttrs(r), "bandit", a.Name(), "model_version", f.ModelVersion)...)
	w.Header().Set("Location", "/v1/bandits/"+a.Name())
	s.writeJSON(w, r, http.StatusCreated, v)
}

// a0 is the name in a snapshot's configuration.
func a0(f bandit.SnapshotFile) string {
	var c struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(f.Bandit, &c)
	return c.Name
}
