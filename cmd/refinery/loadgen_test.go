package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apiclient "github.com/refinery-bandits/refinery/api/client"
	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/simulators"
)

// TestLoadgenTable drives an in-memory serve with the load generator for
// two short levels and checks the table: a row per level with every
// column, decisions made, no errors, and the CPU of serving, training
// and refinement (serve's metrics) and of the loader in cores; the
// refined-sample columns and PostgreSQL's CPU are "-" (eps-greedy, no
// --database-url).
func TestLoadgenTable(t *testing.T) {
	data := mushroomData(t)
	m := startServe(t, "")
	c := loadgenConfig{
		service: serviceFlags{url: m.URL()}, policy: "eps-greedy", levels: []int{1, 4}, duration: 400 * time.Millisecond,
		warm: true, rewards: true, header: true, train: 40, seed: 1, profileLevel: 64,
	}
	var out bytes.Buffer
	if err := loadgen(context.Background(), c, data, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("want a header, a rule and 2 rows:\n%s", out.String())
	}
	header := cells(lines[0])
	if len(header) != 17 || header[1] != "clients" || header[12] != "CPU serving" || header[16] != "CPU loader" {
		t.Fatalf("header %q", header)
	}
	for i, line := range lines[2:] {
		row := cells(line)
		if len(row) != len(header) {
			t.Fatalf("row %q has %d cells, the header %d", line, len(row), len(header))
		}
		if row[0] != "eps-greedy" || row[1] != strconv.Itoa(c.levels[i]) {
			t.Errorf("row %q: want eps-greedy at %d clients", line, c.levels[i])
		}
		if n, err := strconv.Atoi(row[2]); err != nil || n <= 0 || row[10] != "0" {
			t.Errorf("row %q: want decisions and no errors", line)
		}
		for _, col := range []int{7, 8, 9, 11, 15} { // refined, uses, age, bank, PostgreSQL
			if row[col] != "-" {
				t.Errorf("row %q: %s = %q, want -", line, header[col], row[col])
			}
		}
		var serving float64
		for _, col := range []int{12, 13, 14, 16} {
			v, err := strconv.ParseFloat(row[col], 64)
			if err != nil || v < 0 || v > 64 {
				t.Errorf("row %q: %s = %q, want a number of cores", line, header[col], row[col])
			}
			if col == 12 {
				serving = v
			}
		}
		if serving <= 0 {
			t.Errorf("row %q: serving used no CPU", line)
		}
	}
}

// cells splits a Markdown table row into its trimmed cells.
func cells(line string) []string {
	f := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), "|")
	for i := range f {
		f[i] = strings.TrimSpace(f[i])
	}
	return f
}

// With --batch the loader sends its decisions in batches: every
// decision of every batch is counted and stored, and rewarded.
func TestLoadgenBatches(t *testing.T) {
	data := mushroomData(t)
	m := startServe(t, "")
	c := loadgenConfig{
		service: serviceFlags{url: m.URL()}, policy: "eps-greedy", levels: []int{2}, duration: 400 * time.Millisecond,
		rewards: true, header: false, train: 40, seed: 1, profileLevel: 64, batch: 20, // an answer of 20 decisions is larger than net/http buffers: it must still carry its length
	}
	var out bytes.Buffer
	if err := loadgen(context.Background(), c, data, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	row := cells(strings.TrimSpace(out.String()))
	n, err := strconv.Atoi(row[2])
	if err != nil || n <= 0 || n%c.batch != 0 || row[10] != "0" {
		t.Fatalf("row %q: want decisions in batches of %d and no errors", out.String(), c.batch)
	}
	cl, err := apiclient.New(m.URL(), nil)
	if err != nil {
		t.Fatal(err)
	}
	bs, err := cl.Bandits(context.Background())
	if err != nil || len(bs) != 1 {
		t.Fatalf("bandits: %v, %v", bs, err)
	}
	if st := bs[0].Status; st.Decisions != int64(c.train+n) || st.Rewards != int64(c.train+n) {
		t.Errorf("stored %d decisions and %d rewards; want the %d of training and the %d of the row, each rewarded", st.Decisions, st.Rewards, c.train, n)
	}
}

// loadgen --config sets its settings over the mushroom bandit (the kind
// of --policy stays unless --config names another), the result is a
// configuration the service takes, and an unknown setting is an error
// naming it.
func TestLoadgenBanditConfig(t *testing.T) {
	data := mushroomData(t)
	cfg, err := loadgenBandit(data, "lg", bandit.EpsGreedy, `{"policy": {"epsilon": 0.2}, "model": {"hidden": [16]}}`)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Policy.Kind != bandit.EpsGreedy || cfg.Policy.Epsilon == nil || *cfg.Policy.Epsilon != 0.2 || !slices.Equal(cfg.Model.Hidden, []int{16}) || len(cfg.Features) != len(simulators.MushroomAttributes) {
		t.Errorf("loadgenBandit = %+v, want eps-greedy at epsilon 0.2, hidden [16], the %d mushroom features", cfg, len(simulators.MushroomAttributes))
	}
	body, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bandit.ParseConfig(body); err != nil {
		t.Errorf("the service refuses the body %s: %v", body, err)
	}
	if _, err := loadgenBandit(data, "lg", bandit.EpsGreedy, `{"modle": {"hidden": [16]}}`); err == nil || !strings.Contains(err.Error(), "modle") {
		t.Errorf("an unknown setting: %v, want an error naming it", err)
	}
}
