package api

import (
	_ "embed"
	"net/http"
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
