package api_test

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/refinery-bandits/refinery/api"
	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/store"
)

// handlerFor is a server on the in-memory store with the toy bandit and
// one rewarded decision "d1", called in-process.
func handlerFor(tb testing.TB) http.Handler {
	st := store.NewMemory()
	svc := bandit.NewService(st, bandit.ServiceConfig{Seed: 1, Step: &bandit.StepConfig{}})
	if err := svc.Load(context.Background()); err != nil {
		tb.Fatal(err)
	}
	s := api.New(api.Config{Service: svc})
	tb.Cleanup(func() {
		s.Close()
		svc.Close(context.Background())
		st.Close()
	})
	for _, c := range []struct{ path, body string }{
		{"/v1/bandits", toyBandit},
		{"/v1/bandits/toy/decisions", `{"event_id": "d1", "context": {"color": "red", "size": 1}}`},
		{"/v1/bandits/toy/events/d1/reward", `{"value": 1}`},
	} {
		if w := serve(s, c.path, c.body); w.Code >= 300 {
			tb.Fatalf("POST %s: %d %s", c.path, w.Code, w.Body)
		}
	}
	return s
}

func serve(h http.Handler, path, body string) *httptest.ResponseRecorder {
	return serveRequest(h, "POST", path, body)
}

// serveRequest has h serve one request with a JSON body.
func serveRequest(h http.Handler, method, path, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// checkAnswer fails unless the status is one of want and the body is a
// well-formed answer of that status.
func checkAnswer(t *testing.T, body string, w *httptest.ResponseRecorder, want ...int) {
	t.Helper()
	ok := false
	for _, s := range want {
		ok = ok || w.Code == s
	}
	if !ok {
		t.Fatalf("body %q: status %d (%s), want one of %v", body, w.Code, w.Body, want)
	}
	if w.Code == http.StatusNoContent {
		return
	}
	var v map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		t.Fatalf("body %q: status %d with an answer that is not JSON: %q", body, w.Code, w.Body)
	}
	if w.Code >= 400 && len(w.Body.Bytes()) > 16<<10 {
		t.Fatalf("body %q: a %d-byte error answer", body, w.Body.Len())
	}
}

// FuzzDecisionBody: any decision body is answered with a decision or a
// client error, never a 500 nor an empty 201 (issue 16, findings 2, 3).
func FuzzDecisionBody(f *testing.F) {
	for _, s := range []string{
		`{"event_id": "e2", "context": {"color": "red", "size": 1}}`,
		`{"context": {"size": 1.7e308, "color": "red"}}`,
		`{"context": {"color": "\u0000", "color": "red", "size": 1}}`,
		`{"context": {"color": "\udc00", "size": 1}}`,
		"{\"context\": {\"color\": \"r\xffd\", \"size\": 1}}",
		`{"context": {"color": "red", "size": 1e12}, "excluded_arms": ["a"]}`,
		`{"event_id": "d1", "context": {"color": "blue", "size": 1}}`,
		`{"context": {"color": "red", "size": 1}, "context": {"color": "blue"}}`,
		`{"context": {"color": "red", "size": -0.0000001e-300}}`,
	} {
		f.Add(s)
	}
	h := handlerFor(f)
	f.Fuzz(func(t *testing.T, body string) {
		w := serve(h, "/v1/bandits/toy/decisions", body)
		checkAnswer(t, body, w, 200, 201, 400, 409, 413)
		if w.Code == 201 {
			var d struct {
				Arm           string             `json:"arm"`
				Probabilities map[string]float64 `json:"probabilities"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &d); err != nil || d.Arm == "" || len(d.Probabilities) != 2 {
				t.Fatalf("201 for %q with %s", body, w.Body)
			}
			for _, p := range d.Probabilities {
				if !(p >= 0 && p <= 1) || math.IsNaN(p) {
					t.Fatalf("201 for %q with probabilities %v", body, d.Probabilities)
				}
			}
		}
	})
}

// FuzzRewardBody: any reward body is a 204 or a client error; an
// accepted reward retrains the bandit (step mode) without harm (issue
// 16, finding 1).
func FuzzRewardBody(f *testing.F) {
	for _, s := range []string{`{"value": 1}`, `{"value": 1e308}`, `{"value": 2, "value": 1}`, `{"value": -1e12}`, `{"value": 5e-324}`, `{"value": 1e12}`, `{"value":`, `{"value": "\u0000"}`} {
		f.Add(s)
	}
	h := handlerFor(f)
	n := 0
	f.Fuzz(func(t *testing.T, body string) {
		n++
		id := "r" + strings.Repeat("x", n%7) + string(rune('a'+n%26))
		if w := serve(h, "/v1/bandits/toy/decisions", `{"event_id": "`+id+`", "context": {"color": "blue", "size": 2}}`); w.Code != 201 && w.Code != 200 {
			t.Fatalf("decide %s: %d %s", id, w.Code, w.Body)
		}
		w := serve(h, "/v1/bandits/toy/events/"+id+"/reward", body)
		checkAnswer(t, body, w, 204, 400, 409, 413)
	})
}
