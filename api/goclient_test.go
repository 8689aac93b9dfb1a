package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/refinery-bandits/refinery/api"
	"github.com/refinery-bandits/refinery/api/client"
	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/internal/keys"
	"github.com/refinery-bandits/refinery/store"
)

// strictly decodes b into v, refusing members v does not have.
func strictly(t *testing.T, b []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Errorf("%T does not hold %s: %v", v, b, err)
	}
}

// The client drives every operation of the API, and its types hold
// every member of the answers (decoded strictly).
func TestClientDrivesTheAPI(t *testing.T) {
	srv := newFixture(t, store.NewMemory()).srv
	ctx := context.Background()
	c, err := client.New(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	eps := 0.1
	b, err := c.CreateBandit(ctx, &bandit.Config{
		Name: "toy", Arms: []string{"a", "b"},
		Features: []bandit.Feature{{Name: "color", Type: bandit.Categorical, Values: []string{"red", "blue"}}, {Name: "size", Type: bandit.Numeric}},
		Policy:   bandit.PolicyConfig{Kind: bandit.EpsGreedy, Epsilon: &eps},
		Model:    bandit.ModelConfig{Hidden: []int{4}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if b.Name != "toy" || b.Policy.Samples != bandit.DefaultSamples || b.Training.Iterations == 0 || b.Status == nil {
		t.Errorf("created bandit %+v: want the defaults filled in and a status", b)
	}
	if _, err := c.CreateBandit(ctx, []byte(`{"name": "toy", "arms": ["a", "b"], "features": [{"name": "x", "type": "numeric"}]}`)); client.StatusCode(err) != http.StatusConflict {
		t.Errorf("creating toy again: %v, want a 409", err)
	}
	_, err = c.CreateBandit(ctx, map[string]any{"name": "bad", "arms": []string{}})
	var e *client.Error
	if !errors.As(err, &e) || e.StatusCode != 400 || e.Problem.Field == "" || !strings.Contains(err.Error(), "POST /v1/bandits: 400 Bad Request: ") {
		t.Errorf("an invalid bandit: %v (%+v), want a 400 naming the field", err, e)
	} else if n := strings.Count(err.Error(), e.Problem.Field+":"); n != 1 {
		t.Errorf("an invalid bandit: %q names the field %s %d times, want once", err, e.Problem.Field, n)
	}

	d, err := c.Decide(ctx, "toy", client.DecisionRequest{EventID: "e1", Context: map[string]any{"color": "red", "size": 1.5}})
	if err != nil {
		t.Fatal(err)
	}
	if d.EventID != "e1" || d.Replayed || d.Propensity == nil || d.Sample != bandit.SamplePoint || len(d.Probabilities) != 2 {
		t.Errorf("decision %+v", d)
	}
	again, err := c.Decide(ctx, "toy", client.DecisionRequest{EventID: "e1", Context: json.RawMessage(`{"color": "red", "size": 1.5}`)})
	if err != nil || !again.Replayed || again.Arm != d.Arm || again.Propensity != nil {
		t.Errorf("replay %+v, %v: want the stored decision, replayed, without propensity", again, err)
	}
	if err := c.Reward(ctx, "toy", "e1", 1); err != nil {
		t.Fatal(err)
	}
	if err := c.Reward(ctx, "toy", "e1", 1); err != nil {
		t.Errorf("the same reward again: %v, want accepted", err)
	}
	if err := c.Reward(ctx, "toy", "e1", 2); client.StatusCode(err) != http.StatusConflict {
		t.Errorf("another reward: %v, want a 409", err)
	}
	if err := c.Reward(ctx, "toy", "nope", 2); client.StatusCode(err) != http.StatusNotFound {
		t.Errorf("the reward of an unknown event: %v, want a 404", err)
	}
	if _, err := c.Bandit(ctx, "nope"); client.StatusCode(err) != http.StatusNotFound || client.Temporary(err) {
		t.Errorf("an unknown bandit: %v, want a 404, not temporary", err)
	}
	got, err := c.Bandit(ctx, "toy")
	if err != nil || got.Status.Decisions != 1 || got.Status.Rewards != 1 {
		t.Fatalf("bandit %+v, %v: want 1 decision and 1 reward", got, err)
	}
	all, err := c.Bandits(ctx)
	if err != nil || len(all) != 1 || all[0].Name != "toy" {
		t.Errorf("bandits %+v, %v", all, err)
	}
	if err := c.Healthz(ctx); err != nil {
		t.Error(err)
	}
	if r, err := c.Ready(ctx); err != nil || r.Status != "ready" || !r.EphemeralStore {
		t.Errorf("ready %+v, %v", r, err)
	}
	rec, err := c.Decision(ctx, "toy", "e1")
	if err != nil || rec.Arm != d.Arm || rec.Reward == nil || rec.Reward.Value != 1 || string(rec.Context) != `{"color":"red","size":1.5}` {
		t.Errorf("Decision(e1) = %+v, %v: want its arm, context and reward 1", rec, err)
	}
	if _, err := c.Decision(ctx, "toy", "nope"); client.StatusCode(err) != http.StatusNotFound {
		t.Errorf("an unknown decision: %v, want a 404", err)
	}
	for _, id := range []string{"e2", "e3"} {
		if _, err := c.Decide(ctx, "toy", client.DecisionRequest{EventID: id, Context: map[string]any{"color": "blue", "size": 2}}); err != nil {
			t.Fatal(err)
		}
	}
	page, err := c.Decisions(ctx, "toy", client.DecisionQuery{Limit: 2})
	if err != nil || len(page.Decisions) != 2 || page.NextCursor == "" || page.Decisions[0].EventID != "e1" {
		t.Fatalf("Decisions(limit 2) = %+v, %v: want e1, e2 and a cursor", page, err)
	}
	var ids []string
	if err := c.AllDecisions(ctx, "toy", client.DecisionQuery{Limit: 1, Since: d.CreatedAt}, func(r client.DecisionRecord) error {
		ids = append(ids, r.EventID)
		return nil
	}); err != nil || strings.Join(ids, ",") != "e1,e2,e3" {
		t.Errorf("AllDecisions = %v, %v; want e1,e2,e3", ids, err)
	}
	if _, err := c.Decisions(ctx, "toy", client.DecisionQuery{Limit: -1}); client.StatusCode(err) != http.StatusBadRequest {
		t.Errorf("a page of -1: %v, want a 400", err)
	}
	up, err := c.UpdateBandit(ctx, "toy", map[string]any{"add_arms": []string{"c"}, "add_values": map[string][]string{"color": {"green"}}, "policy": map[string]any{"epsilon": 0.2}})
	if err != nil || len(up.Arms) != 3 || *up.Policy.Epsilon != 0.2 || len(up.Effects) == 0 || up.Features[0].Values[2] != "green" {
		t.Fatalf("UpdateBandit = %+v, %v", up, err)
	}
	if _, err := c.Decide(ctx, "toy", client.DecisionRequest{Context: map[string]any{"color": "green", "size": 1}}); err != nil {
		t.Errorf("a decision on the new value: %v", err)
	}
	if _, err := c.UpdateBandit(ctx, "toy", []byte(`{"add_arms": ["a"]}`)); client.StatusCode(err) != http.StatusBadRequest {
		t.Errorf("adding an arm that exists: %v, want a 400", err)
	}
	if up, err := c.UpdateBandit(ctx, "toy", &bandit.Patch{Archived: new(bool)}); err != nil || up.ArchivedAt != nil {
		t.Errorf("a patch of archived false on a live bandit: %+v, %v", up, err)
	}
	// The shadow (a candidate configuration): set, refused when invalid
	// with the field named, removed.
	if up, err := c.UpdateBandit(ctx, "toy", &bandit.Patch{Shadow: []byte(`{"policy": {"kind": "uniform"}}`)}); err != nil || up.Shadow == nil || up.Shadow.Policy.Kind != bandit.Uniform {
		t.Errorf("setting a uniform shadow: %+v, %v", up, err)
	}
	if _, err := c.UpdateBandit(ctx, "toy", &bandit.Patch{Shadow: []byte(`{"policy": {"kind": "eps-greedy", "epsilon": 2}}`)}); !errors.As(err, &e) || e.StatusCode != 400 || e.Problem.Field != "shadow.policy.epsilon" {
		t.Errorf("an invalid shadow: %v, want a 400 naming shadow.policy.epsilon", err)
	}
	if got, err := c.Bandit(ctx, "toy"); err != nil || got.Shadow == nil || got.Shadow.Policy.Kind != bandit.Uniform {
		t.Errorf("the bandit after a refused shadow: %+v, %v; want the uniform shadow kept", got, err)
	}
	if up, err := c.UpdateBandit(ctx, "toy", &bandit.Patch{Shadow: []byte(`null`)}); err != nil || up.Shadow != nil {
		t.Errorf("removing the shadow: %+v, %v", up, err)
	}
	var text bytes.Buffer
	if err := c.Metrics(ctx, &text); err != nil || !strings.Contains(text.String(), `refinery_rewards_total{bandit="toy"} 2`) {
		t.Errorf("metrics: %v", err)
	}

	// Strictly: the client's types hold every member of the answers.
	for path, v := range map[string]any{"/v1/bandits/toy": &client.Bandit{}, "/v1/bandits": &struct {
		Bandits []client.Bandit `json:"bandits"`
	}{}, "/readyz": &client.Readiness{}, "/v1/bandits/nope": &client.Problem{},
		"/v1/bandits/toy/decisions/e1": &client.DecisionRecord{}, "/v1/bandits/toy/decisions?limit=1": &client.DecisionPage{}} {
		getStrictly(t, srv.URL+path, v)
	}
	if err := c.DeleteBandit(ctx, "toy", false); err != nil {
		t.Errorf("DeleteBandit: %v", err)
	}
	if err := c.DeleteBandit(ctx, "toy", false); client.StatusCode(err) != http.StatusNotFound {
		t.Errorf("deleting again: %v, want a 404", err)
	}
	if err := c.DeleteBandit(ctx, "toy", true); err != nil {
		t.Errorf("purging the kept log: %v", err)
	}
}

// The client's types hold every member of the answers of the changing
// routes (decoded strictly).
func TestClientTypesHoldTheChanges(t *testing.T) {
	srv := newFixture(t, store.NewMemory()).srv
	body := func(method, path, in string) []byte {
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(in))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var buf bytes.Buffer
		buf.ReadFrom(resp.Body)
		return buf.Bytes()
	}
	body("POST", "/v1/bandits", `{"name": "toy", "arms": ["a", "b"], "features": [{"name": "x", "type": "numeric"}], "policy": {"kind": "uniform"}}`)
	strictly(t, body("PATCH", "/v1/bandits/toy", `{"archived": true, "add_arms": ["c"]}`), &client.BanditUpdate{})
	strictly(t, body("GET", "/v1/bandits/toy", ""), &client.Bandit{})
}

func TestClientDecisionAnswerIsStrict(t *testing.T) {
	srv := newFixture(t, store.NewMemory()).srv
	c, _ := client.New(srv.URL, nil)
	if _, err := c.CreateBandit(context.Background(), []byte(`{"name": "toy", "arms": ["a", "b"], "features": [{"name": "color", "type": "categorical", "values": ["red", "blue"]}, {"name": "size", "type": "numeric"}], "policy": {"kind": "uniform"}}`)); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(srv.URL+"/v1/bandits/toy/decisions", "application/json", strings.NewReader(`{"context": {"color": "blue", "size": 0}}`))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	resp.Body.Close()
	strictly(t, buf.Bytes(), &client.Decision{})
}

// A service that requires keys answers the client 401 without its key
// and 403 beyond its scope; WithAPIKey and Conn.SetAPIKey send it.
func TestClientSendsTheAPIKey(t *testing.T) {
	st := store.NewMemory()
	srv := newFixtureWith(t, st, func(c *api.Config) { c.RequireKeys, c.Keys = true, st }).srv
	ctx := context.Background()
	secret := func(scope keys.Scope) string {
		sec, k, err := keys.New(nil, "client "+string(scope), []keys.Scope{scope}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := st.CreateKey(ctx, k); err != nil {
			t.Fatal(err)
		}
		return sec
	}
	admin, decide := secret(keys.Admin), secret(keys.Decide)
	c, err := client.New(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{"name": "k", "arms": []string{"a", "b"}, "features": []map[string]any{{"name": "x", "type": "numeric"}}, "policy": map[string]any{"kind": "uniform"}}
	if _, err := c.CreateBandit(ctx, cfg); client.StatusCode(err) != 401 {
		t.Errorf("CreateBandit without a key: %v, want a 401", err)
	}
	if _, err := c.WithAPIKey(decide).CreateBandit(ctx, cfg); client.StatusCode(err) != 403 {
		t.Errorf("CreateBandit with a decide key: %v, want a 403", err)
	}
	if _, err := c.WithAPIKey(admin).CreateBandit(ctx, cfg); err != nil {
		t.Fatalf("CreateBandit with an admin key: %v", err)
	}
	if _, err := c.WithAPIKey(decide).Decide(ctx, "k", client.DecisionRequest{Context: map[string]float64{"x": 1}}); err != nil {
		t.Errorf("Decide with a decide key: %v", err)
	}
	conn, err := client.NewConn(srv.URL, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if code, out, err := conn.Decide("k", []byte(`{"context": {"x": 1}}`)); err != nil || code != 401 {
		t.Errorf("Conn.Decide without a key = %d %s %v, want 401", code, out, err)
	}
	conn.SetAPIKey(decide)
	if code, out, err := conn.Decide("k", []byte(`{"context": {"x": 1}}`)); err != nil || code != 201 {
		t.Errorf("Conn.Decide with a decide key = %d %s %v, want 201", code, out, err)
	}
}

// getStrictly GETs url and decodes the answer into v strictly.
func getStrictly(t *testing.T, url string, v any) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	buf.ReadFrom(resp.Body)
	resp.Body.Close()
	strictly(t, buf.Bytes(), v)
}

// TestClientArmFeatures: the client's types carry arm features, the
// patch's new arms with theirs and the retired arms (issue 32).
func TestClientArmFeatures(t *testing.T) {
	srv := newFixture(t, store.NewMemory()).srv
	ctx := context.Background()
	c, err := client.New(srv.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.CreateBandit(ctx, &bandit.Config{
		Name: "shop", Arms: []string{"a", "b"},
		Features:    []bandit.Feature{{Name: "x", Type: bandit.Numeric}},
		ArmFeatures: []bandit.Feature{{Name: "price", Type: bandit.Numeric}},
		ArmValues:   map[string]json.RawMessage{"a": json.RawMessage(`{"price": 1}`), "b": json.RawMessage(`{"price": 2}`)},
		Policy:      bandit.PolicyConfig{Kind: bandit.MeanFieldTS},
		Model:       bandit.ModelConfig{Hidden: []int{4}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.ArmFeatures) != 1 || len(b.ArmValues) != 2 {
		t.Errorf("created: arm features %+v, arm values %s", b.ArmFeatures, b.ArmValues)
	}
	up, err := c.UpdateBandit(ctx, "shop", &bandit.Patch{AddArms: []string{"c"}, ArmValues: map[string]json.RawMessage{"c": json.RawMessage(`{"price": 3}`)}, RetireArms: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(up.Arms, []string{"a", "b", "c"}) || !slices.Equal(up.Retired, []string{"a"}) || string(up.ArmValues["c"]) != `{"price":3}` {
		t.Errorf("after the patch: arms %q, retired %q, arm values %s", up.Arms, up.Retired, up.ArmValues)
	}
	if _, err := c.UpdateBandit(ctx, "shop", &bandit.Patch{AddArms: []string{"d"}}); client.StatusCode(err) != http.StatusBadRequest {
		t.Errorf("a new arm without its features: %v, want a 400", err)
	}
}
