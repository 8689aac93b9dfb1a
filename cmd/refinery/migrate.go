package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/refinery-bandits/refinery/store"
)

func init() {
	register(command{name: "migrate", summary: "apply, revert or show the database schema (up|down|version)", run: runMigrate})
}

const migrateUsage = `usage: refinery migrate up|down|version [--database-url URL] [--all]

  up       apply every migration not yet applied
  down     revert the newest migration (with --all: every migration,
           which drops all of Refinery's tables and their data)
  version  print the schema version

flags:
  --database-url URL  PostgreSQL URL (default $DATABASE_URL)
  --all               with down: revert every migration
`

// runMigrate runs `refinery migrate`. Flags may come before or after the
// action.
func runMigrate(ctx context.Context, args []string, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	databaseURL := fs.String("database-url", "", "")
	all := fs.Bool("all", false, "")
	var action string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(stdout, migrateUsage)
			}
			return usageError{err}
		}
		if fs.NArg() == 0 {
			break
		}
		if action != "" {
			return usageError{fmt.Errorf("unexpected argument %q after %s", fs.Arg(0), action)}
		}
		action, args = fs.Arg(0), fs.Args()[1:]
	}
	url := *databaseURL
	if url == "" {
		url = os.Getenv("DATABASE_URL")
	}
	switch {
	case action == "":
		return usageError{errors.New("missing action: up, down or version")}
	case action != "up" && action != "down" && action != "version":
		return usageError{fmt.Errorf("unknown action %q: want up, down or version", action)}
	case *all && action != "down":
		return usageError{fmt.Errorf("--all goes with down, not %s", action)}
	case url == "":
		return usageError{errors.New("no database: pass --database-url or set DATABASE_URL")}
	}

	var err error
	switch {
	case action == "up":
		err = store.Migrate(ctx, url, store.Up)
	case action == "down" && *all:
		err = store.Migrate(ctx, url, store.Down)
	case action == "down":
		err = store.MigrateSteps(ctx, url, -1)
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
		_, err = fmt.Fprintf(stdout, "schema version %d (dirty: that migration failed half-way; fix the database by hand)\n", version)
	case version == 0:
		_, err = fmt.Fprintln(stdout, "schema version 0 (no migration applied)")
	default:
		_, err = fmt.Fprintf(stdout, "schema version %d\n", version)
	}
	return err
}
