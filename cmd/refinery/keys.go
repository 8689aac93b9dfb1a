package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/refinery-bandits/refinery/internal/keys"
	"github.com/refinery-bandits/refinery/store"
)

func init() {
	register(command{name: "keys", summary: "create, list and revoke the API keys of a PostgreSQL-backed service", run: runKeys})
}

const keysUsage = `usage: refinery keys create --name NAME --scopes SCOPE[,SCOPE] [--database-url URL]
       refinery keys list [--database-url URL]
       refinery keys revoke ID [--database-url URL]

API keys are kept in PostgreSQL, hashed (SHA-256 of a 256-bit random
secret): create prints the secret once, on stdout alone (so that
KEY=$(refinery keys create ...) keeps it), and nothing can show it again.
Scopes: admin (create, change and delete bandits, import snapshots; includes
the others), decide (decisions and rewards), read (every GET: bandits, the
dashboard and its decisions, /metrics, /openapi.json). A client sends its
key as "Authorization: Bearer <secret>"; the dashboard asks for a read key
in its login form. A revoked key stops working within 5 s on a running
server (it caches checked keys that long).

flags:
  --database-url URL  PostgreSQL URL (default $DATABASE_URL)
  --name NAME         with create: what the key is for (1 to 64 characters)
  --scopes LIST       with create: comma-separated scopes
`

// runKeys runs `refinery keys`. Flags may come before or after the
// action and its argument.
func runKeys(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("keys", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var databaseURL string
	databaseURLFlag(fs, &databaseURL, "")
	name := fs.String("name", "", "")
	scopeList := fs.String("scopes", "", "")
	pos, err := parseInterleaved(fs, args, keysUsage, stdout)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageError{errors.New("missing action: create, list or revoke")}
	}
	action := pos[0]
	var scopes []keys.Scope
	switch action {
	case "create":
		if len(pos) > 1 {
			return usageError{fmt.Errorf("unexpected argument %q after create", pos[1])}
		}
		if *name == "" || *scopeList == "" {
			return usageError{errors.New("create needs --name and --scopes (admin, decide, read)")}
		}
		if scopes, err = keys.ParseScopes(*scopeList); err != nil {
			return usageError{fmt.Errorf("--scopes: %s", strings.TrimPrefix(err.Error(), keys.ErrInvalid.Error()+": "))}
		}
		if _, _, err := keys.New(nil, *name, scopes, time.Now()); err != nil {
			return usageError{fmt.Errorf("--name: %s", strings.TrimPrefix(err.Error(), keys.ErrInvalid.Error()+": "))}
		}
	case "list":
		if len(pos) > 1 {
			return usageError{fmt.Errorf("unexpected argument %q after list", pos[1])}
		}
	case "revoke":
		if len(pos) != 2 {
			return usageError{errors.New("revoke needs one key ID: revoke ID (refinery keys list shows them)")}
		}
	default:
		return usageError{fmt.Errorf("unknown action %q: want create, list or revoke", action)}
	}
	if action != "create" && (*name != "" || *scopeList != "") {
		return usageError{fmt.Errorf("--name and --scopes go with create, not %s", action)}
	}
	if databaseURL == "" {
		return usageError{errors.New("no database: pass --database-url or set DATABASE_URL (the in-memory store of serve makes its own admin key)")}
	}
	pg, err := store.OpenPostgres(ctx, databaseURL, store.Config{})
	if err != nil {
		return err
	}
	defer pg.Close()
	switch action {
	case "create":
		secret, k, err := keys.New(nil, *name, scopes, time.Now())
		if err != nil {
			return err
		}
		if err := pg.CreateKey(ctx, k); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "created key %s (%s) with the scopes %s; its secret, shown only now:\n", k.ID, k.Name, joinScopes(k.Scopes))
		_, err = fmt.Fprintln(stdout, secret)
		return err
	case "list":
		ks, err := pg.ListKeys(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tNAME\tSCOPES\tCREATED\tREVOKED")
		for _, k := range ks {
			revoked := "-"
			if k.RevokedAt != nil {
				revoked = k.RevokedAt.Format(time.RFC3339)
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", k.ID, k.Name, joinScopes(k.Scopes), k.CreatedAt.Format(time.RFC3339), revoked)
		}
		return tw.Flush()
	default: // revoke
		if err := pg.RevokeKey(ctx, pos[1], time.Now()); err != nil {
			if errors.Is(err, keys.ErrNotFound) {
				return fmt.Errorf("no key %q (refinery keys list shows them)", pos[1])
			}
			return err
		}
		_, err := fmt.Fprintf(stdout, "revoked key %s\n", pos[1])
		return err
	}
}

func joinScopes(ss []keys.Scope) string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return strings.Join(out, ",")
}
