package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
)

// Every 405 names, in Allow, exactly the methods the path's route serves
// (RFC 9110, Section 15.5.6).
func TestMethodNotAllowedListsTheAllowedMethods(t *testing.T) {
	f := newFixture(t, memoryStore(t))
	f.must(t, http.StatusCreated, "POST", "/v1/bandits", toyBandit)
	for _, tt := range []struct{ method, path, allow string }{
		{"DELETE", "/v1/bandits", "GET, POST"},
		{"PUT", "/v1/bandits/toy/decisions", "GET, POST"},
		{"PATCH", "/v1/bandits/toy/decisions/e1", "GET"},
		{"GET", "/v1/bandits/toy/events/e1/reward", "POST"},
		{"POST", "/v1/bandits/toy/snapshot", "GET"},
		{"POST", "/healthz", "GET"},
	} {
		resp, body := f.call(t, tt.method, tt.path, "", "")
		if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != tt.allow {
			t.Errorf("%s %s = %d, Allow %q (%s); want 405, Allow %q", tt.method, tt.path, resp.StatusCode, resp.Header.Get("Allow"), body, tt.allow)
		}
	}
}

// recordJSON is a decision of GET .../decisions as the tests read it.
type recordJSON struct {
	EventID       string             `json:"event_id"`
	Arm           string             `json:"arm"`
	Probabilities map[string]float64 `json:"probabilities"`
	Context       map[string]any     `json:"context"`
	CreatedAt     time.Time          `json:"created_at"`
	Reward        *struct {
		Value float64 `json:"value"`
	} `json:"reward"`
}

type pageJSON struct {
	Decisions  []recordJSON `json:"decisions"`
	NextCursor string       `json:"next_cursor"`
}

// readLog pages through GET .../decisions with the query q, following
// next_cursor, and returns the event IDs in order.
func readLog(t *testing.T, f *fixture, name string, q url.Values) ([]string, []recordJSON) {
	t.Helper()
	var ids []string
	var all []recordJSON
	for range 1000 {
		var p pageJSON
		if err := json.Unmarshal(f.must(t, http.StatusOK, "GET", "/v1/bandits/"+name+"/decisions?"+q.Encode(), ""), &p); err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Decisions {
			ids = append(ids, r.EventID)
			all = append(all, r)
		}
		if p.NextCursor == "" {
			return ids, all
		}
		q.Set("cursor", p.NextCursor)
	}
	t.Fatal("paging did not end")
	return nil, nil
}

// The decision log pages oldest first by cursor, bounded by since and
// until, with each decision's context, probabilities and reward; one
// decision reads back by event ID. On both stores.
func TestDecisionLog(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(*testing.T) bandit.Store
	}{{"on the in-memory store", memoryStore}, {"on PostgreSQL", postgresStore}} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.store(t))
			f.must(t, http.StatusCreated, "POST", "/v1/bandits", toyBandit)
			var want []string
			var mid time.Time
			for i := range 7 {
				id := fmt.Sprintf("e%d", i)
				var d struct {
					CreatedAt time.Time `json:"created_at"`
				}
				if err := json.Unmarshal(f.must(t, http.StatusCreated, "POST", "/v1/bandits/toy/decisions", fmt.Sprintf(`{"event_id": %q, "context": {"color": "red", "size": %d}}`, id, i)), &d); err != nil {
					t.Fatal(err)
				}
				if i == 3 {
					mid = d.CreatedAt
				}
				want = append(want, id)
			}
			f.must(t, http.StatusNoContent, "POST", "/v1/bandits/toy/events/e2/reward", `{"value": 4.5}`)
			for _, limit := range []string{"1", "3", "7", "100"} {
				got, recs := readLog(t, f, "toy", url.Values{"limit": {limit}})
				if !slices.Equal(got, want) {
					t.Errorf("pages of %s = %v, want %v", limit, got, want)
				}
				for i, r := range recs {
					if (r.EventID == "e2") != (r.Reward != nil) || r.Reward != nil && r.Reward.Value != 4.5 {
						t.Errorf("%s: reward %+v; want 4.5 on e2 only", r.EventID, r.Reward)
					}
					if r.Context["size"] != float64(i) || r.Context["color"] != "red" {
						t.Errorf("%s: context %v", r.EventID, r.Context)
					}
					if p := r.Probabilities["a"] + r.Probabilities["b"]; p < 0.999 || p > 1.001 {
						t.Errorf("%s: probabilities %v sum to %g", r.EventID, r.Probabilities, p)
					}
				}
			}
			got, _ := readLog(t, f, "toy", url.Values{"since": {mid.Format(time.RFC3339Nano)}, "limit": {"2"}})
			if !slices.Equal(got, want[3:]) {
				t.Errorf("since e3's time = %v, want %v", got, want[3:])
			}
			got, _ = readLog(t, f, "toy", url.Values{"until": {mid.Format(time.RFC3339Nano)}, "limit": {"2"}})
			if !slices.Equal(got, want[:3]) {
				t.Errorf("until e3's time = %v, want %v", got, want[:3])
			}
			var one recordJSON
			if err := json.Unmarshal(f.must(t, http.StatusOK, "GET", "/v1/bandits/toy/decisions/e2", ""), &one); err != nil {
				t.Fatal(err)
			}
			if one.EventID != "e2" || one.Reward == nil || one.Reward.Value != 4.5 || one.Context["size"] != 2.0 || (one.Arm != "a" && one.Arm != "b") {
				t.Errorf("GET e2 = %+v", one)
			}
		})
	}
}
