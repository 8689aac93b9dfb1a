package api_test

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/api"
	"github.com/refinery-bandits/refinery/bandit"
)

// trainedSnapshot creates the toy bandit, decides and rewards until it
// has published a posterior, and returns its snapshot file.
func trainedSnapshot(t *testing.T, f *fixture) bandit.SnapshotFile {
	t.Helper()
	f.must(t, http.StatusCreated, "POST", "/v1/bandits", toyBandit)
	f.must(t, http.StatusCreated, "POST", "/v1/bandits/toy/decisions", `{"event_id": "d1", "context": {"color": "red", "size": 1}}`)
	f.must(t, http.StatusNoContent, "POST", "/v1/bandits/toy/events/d1/reward", `{"value": 1}`)
	waitVersion(t, f, "toy", 1)
	var snap bandit.SnapshotFile
	if err := json.Unmarshal(f.must(t, http.StatusOK, "GET", "/v1/bandits/toy/snapshot", ""), &snap); err != nil {
		t.Fatal(err)
	}
	return snap
}

// waitVersion waits up to 10s for the bandit's model_version to reach
// at least want, and returns it.
func waitVersion(t *testing.T, f *fixture, name string, want int64) int64 {
	t.Helper()
	var v struct {
		Status struct {
			ModelVersion int64 `json:"model_version"`
		} `json:"status"`
	}
	for deadline := time.Now().Add(10 * time.Second); ; {
		if err := json.Unmarshal(f.must(t, http.StatusOK, "GET", "/v1/bandits/"+name, ""), &v); err != nil {
			t.Fatal(err)
		}
		if v.Status.ModelVersion >= want {
			return v.Status.ModelVersion
		}
		if time.Now().After(deadline) {
			t.Fatalf("bandit %s: model_version %d after 10s, want at least %d", name, v.Status.ModelVersion, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// renamed returns snap as the bandit named name, with modify applied
// and its checksum made again.
func renamed(t *testing.T, snap bandit.SnapshotFile, name string, modify func(*bandit.SnapshotFile)) string {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal(snap.Bandit, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg["name"] = name
	var err error
	if snap.Bandit, err = json.Marshal(cfg); err != nil {
		t.Fatal(err)
	}
	modify(&snap)
	snap.SHA256 = snap.Sum()
	out, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// TestSnapshotImportRefusesVersionsNearOverflow: a snapshot whose
// model_version is past bandit.MaxModelVersion (2^63 - 1 made the next
// version negative) is a 400 naming model_version, and nothing is
// created; at the limit the bandit imports and trains on to the next
// version (issue 31, finding 8). On both stores.
func TestSnapshotImportRefusesVersionsNearOverflow(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(*testing.T) bandit.Store
	}{
		{"on the in-memory store", memoryStore},
		{"on PostgreSQL", postgresStore},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.store(t))
			snap := trainedSnapshot(t, f)
			for _, v := range []int64{math.MaxInt64, math.MaxInt64 - 1, bandit.MaxModelVersion + 1} {
				body := renamed(t, snap, "over", func(s *bandit.SnapshotFile) { s.ModelVersion = v })
				resp, out := f.call(t, "POST", "/v1/snapshots", "application/json", body)
				if p := problemOf(t, out); resp.StatusCode != 400 || p.Field != "model_version" {
					t.Errorf("import at model_version %d: %d %s, want 400 naming model_version", v, resp.StatusCode, out)
				}
			}
			if resp, _ := f.call(t, "GET", "/v1/bandits/over", "", ""); resp.StatusCode != 404 {
				t.Errorf("GET of the refused import: %d, want 404", resp.StatusCode)
			}
			body := renamed(t, snap, "edge", func(s *bandit.SnapshotFile) { s.ModelVersion = bandit.MaxModelVersion })
			f.must(t, http.StatusCreated, "POST", "/v1/snapshots", body)
			f.must(t, http.StatusCreated, "POST", "/v1/bandits/edge/decisions", `{"event_id": "e1", "context": {"color": "blue", "size": 2}}`)
			f.must(t, http.StatusNoContent, "POST", "/v1/bandits/edge/events/e1/reward", `{"value": 0}`)
			if got := waitVersion(t, f, "edge", bandit.MaxModelVersion+1); got != bandit.MaxModelVersion+1 {
				t.Errorf("after training at the limit: model_version %d, want %d", got, int64(bandit.MaxModelVersion+1))
			}
		})
	}
}

// problemOf decodes a problem+json body.
func problemOf(t *testing.T, body []byte) api.Problem {
	t.Helper()
	var p api.Problem
	if err := json.Unmarshal(body, &p); err != nil && !strings.Contains(string(body), "{") {
		t.Fatalf("body %q is not a problem: %v", body, err)
	}
	return p
}

// TestSnapshotImportRefusesCreatedAtBefore1970: a snapshot made in year
// 0 (its checksum made again) is a 400 naming created_at, and nothing is
// created (issue 31, finding 12). On both stores.
func TestSnapshotImportRefusesCreatedAtBefore1970(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store func(*testing.T) bandit.Store
	}{
		{"on the in-memory store", memoryStore},
		{"on PostgreSQL", postgresStore},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.store(t))
			snap := trainedSnapshot(t, f)
			for _, at := range []time.Time{{}, time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC)} {
				body := renamed(t, snap, "ancient", func(s *bandit.SnapshotFile) { s.CreatedAt = at })
				resp, out := f.call(t, "POST", "/v1/snapshots", "application/json", body)
				if p := problemOf(t, out); resp.StatusCode != 400 || p.Field != "created_at" {
					t.Errorf("import created at %v: %d %s, want 400 naming created_at", at, resp.StatusCode, out)
				}
			}
			if resp, _ := f.call(t, "GET", "/v1/bandits/ancient", "", ""); resp.StatusCode != 404 {
				t.Errorf("GET of the refused import: %d, want 404", resp.StatusCode)
			}
			body := renamed(t, snap, "recent", func(s *bandit.SnapshotFile) { s.CreatedAt = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC) })
			f.must(t, http.StatusCreated, "POST", "/v1/snapshots", body)
		})
	}
}
