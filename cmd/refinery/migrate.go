package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/refinery-bandits/refinery/internal/plural"
	"github.com/refinery-bandits/refinery/store"
)

func init() {
	register(command{name: "migrate", summary: "apply, revert, force or show the database schema version", run: runMigrate})
}

const migrateUsage = `usage: refinery migrate <action> [--database-url URL] [--yes]

actions (as golang-migrate's CLI):
  up [N]      apply every migration not yet applied (or the next N)
  down [N]    revert the newest migration (or the newest N)
  down --all  revert every migration: drops all of Refinery's tables
  goto V      apply or revert migrations until the schema is at version V
  force V     record version V (-1: none) and clear the dirty flag, running
              no migration (after repairing a half-applied one by hand)
  version     print the schema version

A down or goto refuses (exit status 1), naming them, while the tables
or columns that the down steps it runs drop hold rows (0006 drops
trainer_leases and the snapshots' lease tokens, 0005 replicas, 0004
api_keys, 0003 the bandits' archived and deleted times, 0001 every
other table), unless --yes confirms it. Bad command lines exit with
status 2.

flags:
  --database-url URL  PostgreSQL URL (default $DATABASE_URL)
  --all               with down: revert every migration
  --yes               with down and goto: confirm deleting the stored data
`

// databaseURLFlag defines --database-url on fs into p: the PostgreSQL
// URL, $DATABASE_URL unless given, of every command that opens the
// database (serve, migrate, keys, export, evaluate).
func databaseURLFlag(fs *flag.FlagSet, p *string, usage string) {
	fs.StringVar(p, "database-url", os.Getenv("DATABASE_URL"), usage)
}

// parseInterleaved parses fs's flags wherever they come among args and
// returns the other arguments in order; -h prints usage to stdout and
// returns flag.ErrHelp, a bad flag is a usageError.
func parseInterleaved(fs *flag.FlagSet, args []string, usage string, stdout io.Writer) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(stdout, usage)
				return nil, err
			}
			return nil, usageError{err}
		}
		if fs.NArg() == 0 {
			return pos, nil
		}
		pos, args = append(pos, fs.Arg(0)), fs.Args()[1:]
	}
}

// runMigrate runs `refinery migrate`. Flags may come before or after the
// action and its argument.
func runMigrate(ctx context.Context, args []string, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var url string
	databaseURLFlag(fs, &url, "")
	all := fs.Bool("all", false, "")
	yes := fs.Bool("yes", false, "")
	// A negative version (force -1) would parse as a flag: take such
	// arguments out first (none is the value of a flag).
	var negative, rest []string
	for i, a := range args {
		if len(a) > 1 && a[0] == '-' && strings.Trim(a[1:], "0123456789") == "" && (i == 0 || !strings.HasSuffix(args[i-1], "database-url")) {
			negative = append(negative, a)
			continue
		}
		rest = append(rest, a)
	}
	pos, err := parseInterleaved(fs, rest, migrateUsage, stdout)
	if err != nil {
		return err
	}
	pos = append(pos, negative...)
	if len(pos) == 0 {
		return usageError{errors.New("missing action: up, down, goto, force or version")}
	}
	action, rest := pos[0], pos[1:]
	if strings.HasPrefix(action, "-") {
		return usageError{fmt.Errorf("missing action before %s", action)}
	}
	// n is the action's number: N of up and down (default 1), V of goto
	// and force (required).
	n, hasN := 1, false
	switch action {
	case "up", "down", "goto", "force":
		if len(rest) > 1 {
			return usageError{fmt.Errorf("unexpected argument %q after %s %s", rest[1], action, rest[0])}
		}
		if len(rest) == 1 {
			v, err := strconv.Atoi(rest[0])
			lo := map[string]int{"up": 1, "down": 1, "goto": 0, "force": -1}[action]
			if err != nil || v < lo {
				return usageError{fmt.Errorf("%s %q: want an integer of at least %d", action, rest[0], lo)}
			}
			n, hasN = v, true
		}
		if (action == "goto" || action == "force") && !hasN {
			return usageError{fmt.Errorf("%s needs a version: %s V", action, action)}
		}
	case "version":
		if len(rest) > 0 {
			return usageError{fmt.Errorf("unexpected argument %q after version", rest[0])}
		}
	default:
		return usageError{fmt.Errorf("unknown action %q: want up, down, goto, force or version", action)}
	}
	switch {
	case *all && action != "down":
		return usageError{fmt.Errorf("--all goes with down, not %s", action)}
	case *all && hasN:
		return usageError{fmt.Errorf("down takes either N or --all, not both")}
	case *yes && action != "down" && action != "goto":
		return usageError{fmt.Errorf("--yes goes with down and goto, not %s", action)}
	case url == "":
		return usageError{errors.New("no database: pass --database-url or set DATABASE_URL")}
	}
	latest, err := store.LatestMigration()
	if err != nil {
		return err
	}
	if (action == "goto" || action == "force") && n > int(latest) {
		return usageError{fmt.Errorf("%s %d: the newest migration is %d", action, n, latest)}
	}
	// up N and down N beyond what is left: say so rather than
	// golang-migrate's "file does not exist".
	if hasN && (action == "up" || action == "down") {
		current, _, err := store.SchemaVersion(ctx, url)
		if err != nil {
			return err
		}
		if left := int(latest) - int(current); action == "up" && n > left {
			return fmt.Errorf("up %d: schema version %d, newest migration %d: only %s to apply", n, current, latest, plural.Count(left, "migration", "migrations"))
		}
		if action == "down" && n > int(current) {
			return fmt.Errorf("down %d: schema version %d: only %s to revert", n, current, plural.Count(int(current), "migration", "migrations"))
		}
	}

	// A revert deletes what the down steps it runs drop: refuse without
	// --yes while any of that holds rows.
	if (action == "down" || action == "goto") && !*yes {
		current, _, err := store.SchemaVersion(ctx, url)
		if err != nil {
			return err
		}
		// The versions reverted are (lowest, current].
		var lowest uint
		switch {
		case action == "goto":
			lowest = min(uint(n), current)
		case !*all && uint(n) < current:
			lowest = current - uint(n)
		}
		if err := refuseDataLoss(ctx, url, lowest, current); err != nil {
			return err
		}
	}
	switch {
	case action == "up" && !hasN:
		err = store.Migrate(ctx, url, store.Up)
	case action == "up":
		err = store.MigrateSteps(ctx, url, n)
	case action == "down" && *all:
		err = store.Migrate(ctx, url, store.Down)
	case action == "down":
		err = store.MigrateSteps(ctx, url, -n)
	case action == "goto":
		err = store.MigrateTo(ctx, url, uint(n))
	case action == "force":
		err = store.ForceVersion(ctx, url, n)
	}
	if err != nil {
		return err
	}
	version, dirty, err := store.SchemaVersion(ctx, url)
	if err != nil {
		return err
	}
	switch {
	case dirty:
		_, err = fmt.Fprintf(stdout, "schema version %d (dirty: that migration failed half-way; repair the database by hand, then run 'refinery migrate force V' with the version it is now at)\n", version)
	case version == 0:
		_, err = fmt.Fprintln(stdout, "schema version 0 (no migration applied)")
	default:
		_, err = fmt.Fprintf(stdout, "schema version %d\n", version)
	}
	return err
}

// refuseDataLoss returns an error naming the rows that reverting the
// migrations after lowest up to current would delete, or nil when the
// tables and columns their down steps drop are empty.
func refuseDataLoss(ctx context.Context, url string, lowest, current uint) error {
	var drops []store.Drop
	for v := current; v > lowest; v-- {
		d, err := store.Drops(v)
		if err != nil {
			return err
		}
		drops = append(drops, d...)
	}
	held, err := store.CountHeld(ctx, url, drops)
	if err != nil || len(held) == 0 {
		return err
	}
	var names []string
	for _, h := range held {
		s := plural.Count(h.Rows, "row", "rows") + " in " + h.Table
		if h.Column != "" {
			s = plural.Count(h.Rows, "row", "rows") + " of " + h.Table + " with " + h.Column + " set"
		}
		names = append(names, s)
	}
	return fmt.Errorf("refusing to revert: the database holds %s, which reverting deletes; pass --yes to confirm", strings.Join(names, ", "))
}
