package store

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/refinery-bandits/refinery/store/storetest"
)

// dumpSchema describes a schema's tables, columns, indexes, constraints
// and sequences, one line each, in a stable order.
func dumpSchema(t *testing.T, url string) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `
		SELECT 'column ' || table_name || '.' || column_name || ' #' || ordinal_position || ' ' || udt_name
		       || ' nullable=' || is_nullable || ' default=' || coalesce(column_default, '-')
		FROM information_schema.columns WHERE table_schema = current_schema()
		UNION ALL
		SELECT 'index ' || indexname || ': ' || indexdef FROM pg_indexes WHERE schemaname = current_schema()
		UNION ALL
		SELECT 'constraint ' || conrelid::regclass || '.' || conname || ': ' || pg_get_constraintdef(oid)
		FROM pg_constraint WHERE connamespace = current_schema()::regnamespace
		UNION ALL
		SELECT 'sequence ' || sequence_name || ' ' || data_type || ' start=' || start_value || ' increment=' || increment
		FROM information_schema.sequences WHERE sequence_schema = current_schema()
		ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

func TestMigrateUpDownUpLeavesTheSameSchema(t *testing.T) {
	url := storetest.FreshSchemaURL(t)
	ctx := context.Background()
	latest, err := latestMigration()
	if err != nil {
		t.Fatal(err)
	}
	version := func(want uint) {
		t.Helper()
		got, dirty, err := SchemaVersion(ctx, url)
		if err != nil || got != want || dirty {
			t.Fatalf("SchemaVersion = %d, dirty %v, %v; want %d, clean", got, dirty, err, want)
		}
	}
	version(0)
	if err := Migrate(ctx, url, Up); err != nil {
		t.Fatalf("up: %v", err)
	}
	version(latest)
	afterUp := dumpSchema(t, url)
	for _, want := range []string{
		"column decisions.encoded #5 _float8 nullable=NO default=-",
		"constraint decisions.decisions_bandit_event_id_key: UNIQUE (bandit, event_id)",
		"constraint rewards.rewards_decision_id_key: UNIQUE (decision_id)",
		"constraint snapshots.snapshots_pkey: PRIMARY KEY (bandit, version)",
	} {
		if !slices.Contains(afterUp, want) {
			t.Errorf("after up, the schema lacks %q; it has:\n%s", want, strings.Join(afterUp, "\n"))
		}
	}
	for _, index := range []string{"decisions_bandit_created_at_idx", "unrewarded_bandit_created_at_idx", "rewards_bandit_seq_idx"} {
		if !slices.ContainsFunc(afterUp, func(l string) bool { return strings.HasPrefix(l, "index "+index+":") }) {
			t.Errorf("after up, index %s is missing", index)
		}
	}
	if err := Migrate(ctx, url, Up); err != nil {
		t.Errorf("up when nothing is left to apply = %v, want nil", err)
	}

	if err := Migrate(ctx, url, Down); err != nil {
		t.Fatalf("down: %v", err)
	}
	version(0)
	afterDown := dumpSchema(t, url)
	for _, l := range afterDown {
		if !strings.Contains(l, "schema_migrations") {
			t.Errorf("after down, the schema still has %q", l)
		}
	}
	if err := Migrate(ctx, url, Down); err != nil {
		t.Errorf("down when nothing is left to revert = %v, want nil", err)
	}

	if err := Migrate(ctx, url, Up); err != nil {
		t.Fatalf("up again: %v", err)
	}
	version(latest)
	if again := dumpSchema(t, url); !slices.Equal(again, afterUp) {
		t.Errorf("up, down, up left a different schema.\nafter the first up:\n%s\nafter up again:\n%s",
			strings.Join(afterUp, "\n"), strings.Join(again, "\n"))
	}

	if err := MigrateSteps(ctx, url, -1); err != nil {
		t.Fatalf("one step down: %v", err)
	}
	version(latest - 1)
	if err := Migrate(ctx, url, "sideways"); err == nil || !strings.Contains(err.Error(), `unknown direction "sideways"`) {
		t.Errorf("Migrate(sideways) = %v, want an unknown direction error", err)
	}
}

func TestPingChecksTheSchema(t *testing.T) {
	pcfg, _ := storetest.FreshSchema(t)
	ctx := context.Background()
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s, err := NewPostgres(pool, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Ping(ctx); err == nil || !strings.Contains(err.Error(), "migrate up") {
		t.Errorf("Ping before migrating = %v, want an error that says to run migrate up", err)
	}
	if err := MigrateConfig(ctx, pcfg.ConnConfig, Up); err != nil {
		t.Fatal(err)
	}
	if err := s.Ping(ctx); err != nil {
		t.Errorf("Ping after migrating = %v, want nil", err)
	}
}

func TestOpenPostgresRefusesAnUnmigratedDatabase(t *testing.T) {
	url := storetest.FreshSchemaURL(t)
	ctx := context.Background()
	if s, err := OpenPostgres(ctx, url, Config{}); err == nil {
		s.Close()
		t.Fatal("OpenPostgres on an empty schema = nil error, want one")
	}
	if err := Migrate(ctx, url, Up); err != nil {
		t.Fatal(err)
	}
	s, err := OpenPostgres(ctx, url, Config{})
	if err != nil {
		t.Fatalf("OpenPostgres after migrating = %v", err)
	}
	if s.Ephemeral() {
		t.Error("Postgres.Ephemeral() = true, want false")
	}
	if err := s.Close(); err != nil {
		t.Errorf("Close = %v", err)
	}
	if err := s.Pool().Ping(ctx); err == nil {
		t.Error("the pool OpenPostgres made is still open after Close")
	}
}

func TestDropsNamesWhatEachDownStepDeletes(t *testing.T) {
	want := map[uint][]Drop{
		1: {{Table: "snapshots"}, {Table: "rewards"}, {Table: "unrewarded"}, {Table: "decisions"}, {Table: "bandits"}},
		2: nil,
		3: {{Table: "bandits", Column: "deleted_at"}, {Table: "bandits", Column: "archived_at"}},
		4: {{Table: "api_keys"}},
		5: {{Table: "replicas"}},
		6: {{Table: "snapshots", Column: "lease_token"}, {Table: "trainer_leases"}},
		7: {{Table: "decisions", Column: "shadow_propensities"}, {Table: "decisions", Column: "shadow_arm"}},
		8: {{Table: "decisions", Column: "shadow_above"}, {Table: "decisions", Column: "slot"}},
	}
	latest, err := latestMigration()
	if err != nil {
		t.Fatal(err)
	}
	if uint(len(want)) != latest {
		t.Fatalf("%d cases for %d migrations: add one for each new migration", len(want), latest)
	}
	for v := uint(1); v <= latest; v++ {
		got, err := Drops(v)
		if err != nil || !slices.Equal(got, want[v]) {
			t.Errorf("Drops(%d) = %v, %v; want %v", v, got, err, want[v])
		}
	}
	if _, err := Drops(latest + 1); err == nil {
		t.Errorf("Drops(%d) of a migration that does not exist = nil error", latest+1)
	}
}
