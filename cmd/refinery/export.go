package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/refinery-bandits/refinery/bandit"
	"github.com/refinery-bandits/refinery/internal/logfmt"
	"github.com/refinery-bandits/refinery/store"
)

func init() {
	register(command{name: "export", summary: "write a bandit's decision log as DSJSON (Vowpal Wabbit) or Open Bandit Pipeline CSV", run: runExport})
}

const exportUsage = `usage: refinery export --bandit NAME [--format dsjson|obp-csv] [--from TIME] [--to TIME]
                       [--unrewarded] [--out FILE] [--database-url URL]

Streams the decisions of one bandit made in [--from, --to) from PostgreSQL,
oldest first, with their context, chosen arm, propensities and reward.
TIME is RFC 3339 (2026-11-24T01:00:00Z) or a date (2026-11-24, midnight UTC);
without --from or --to the range is unbounded on that side. Decisions without
a reward are left out unless --unrewarded.

  dsjson   one JSON object per line in Vowpal Wabbit's decision-service
           layout: _label_cost (the negated reward: VW minimizes cost),
           _label_probability (the chosen arm's propensity), _label_Action
           (1-based) and _labelIndex (0-based), Timestamp, Version "1",
           EventId, a (action IDs, 1-based, the chosen one first), p (their
           propensities, in the order of a), c (the context as the client
           sent it in namespace "Context", and _multi: one {"Arm": {"name":
           ARM}} per arm, in the bandit's order, with the arm's features
           in namespace "ArmFeatures" when the bandit has arm features,
           as it was created or added) and VWState.m (the
           posterior version); _slot, on a ranking's decisions, its place
           (1 at the top); and _shadow, on decisions of a bandit with a
           candidate (shadow): {"a": its action, 1-based, "p": its
           probability of every arm in the bandit's order, and on a slot
           below the first "above": the candidate's probability of the
           live arms of the slots above over the live policy's, the
           weight of the slot in its estimate}; refinery evaluate --log
           reads them back (an action beyond the arms, a p not of one per
           arm or an above not a number >= 0 on a slot below the first is
           an error) and does not use them. Unrewarded decisions
           (--unrewarded) have no _label_* members and "_skipLearn": true.
  obp-csv  a CSV header and one row per decision in Open Bandit Pipeline's
           layout: event_id, timestamp, action (the arm's 0-based index in
           the bandit's arms), reward (empty when none), pscore (the chosen
           arm's propensity), then context_0 .. context_{d-1}, the encoded
           context the model saw (one-hot categories, standardized numbers;
           decisions made before category values were added are encoded
           again in the current columns). What each context column is
           (color=red, (hour - 12) / 6) goes to FILE.columns.json beside
           --out FILE, or to stderr.

A deleted bandit whose decision log was kept exports it.

flags:
  --database-url URL  PostgreSQL URL (default $DATABASE_URL)
`

func runExport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("export", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var url string
	databaseURLFlag(fs, &url, "")
	name := fs.String("bandit", "", "")
	format := fs.String("format", "dsjson", "")
	fromS := fs.String("from", "", "")
	toS := fs.String("to", "", "")
	unrewarded := fs.Bool("unrewarded", false, "")
	out := fs.String("out", "", "")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, exportUsage)
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	from, err := parseTime("--from", *fromS)
	if err != nil {
		return err
	}
	to, err := parseTime("--to", *toS)
	if err != nil {
		return err
	}
	var write func(w *bufio.Writer, b *logfmt.Bandit, rec *bandit.DecisionRecord) error
	switch *format {
	case "dsjson":
		write = logfmt.WriteDSJSON
	case "obp-csv":
		write = logfmt.WriteOBP
	default:
		return usageError{fmt.Errorf("--format %q: want dsjson or obp-csv", *format)}
	}
	switch {
	case *name == "":
		return usageError{errors.New("--bandit: which bandit's decisions to export")}
	case url == "":
		return usageError{errors.New("no database: pass --database-url or set DATABASE_URL")}
	case !from.IsZero() && !to.IsZero() && !from.Before(to):
		return usageError{fmt.Errorf("--from %s is not before --to %s", *fromS, *toS)}
	}
	st, err := store.OpenPostgres(ctx, url, store.Config{})
	if err != nil {
		return err
	}
	defer st.Close()
	b, err := st.GetBandit(ctx, *name)
	if errors.Is(err, bandit.ErrNotFound) {
		// A deleted bandit whose decision log was kept exports it.
		b, err = st.KeptLog(ctx, *name)
	}
	if errors.Is(err, bandit.ErrNotFound) {
		return fmt.Errorf("--bandit: no bandit named %q in the database", *name)
	} else if err != nil {
		return err
	}
	var cfg bandit.Config
	if err := json.Unmarshal(b.Config, &cfg); err != nil || len(cfg.Arms) == 0 || len(cfg.Features) == 0 {
		return fmt.Errorf("bandit %s: its stored configuration has no arms or no features (%v)", *name, err)
	}
	eb := &logfmt.Bandit{Arms: cfg.Arms, Enc: bandit.NewEncoder(bandit.ContextFeatures(&cfg)), ArmValues: cfg.ArmValues}
	dst := stdout
	var f *os.File
	if *out != "" {
		if f, err = os.Create(*out); err != nil {
			return err
		}
		defer f.Close()
		dst = f
	}
	w := bufio.NewWriterSize(dst, 64<<10)
	if *format == "obp-csv" {
		logfmt.WriteOBPHeader(w, eb)
	}
	var n, skipped int
	err = st.Export(ctx, *name, from, to, func(rec *bandit.DecisionRecord) error {
		if rec.Reward == nil && !*unrewarded {
			skipped++
			return nil
		}
		n++
		return write(w, eb, rec)
	})
	if err != nil {
		return err
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if f != nil {
		if err := f.Close(); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "exported %d decisions of %s (arms %q) as %s", n, *name, cfg.Arms, *format)
	if skipped > 0 {
		fmt.Fprintf(stderr, "; %d without a reward left out (--unrewarded includes them)", skipped)
	}
	fmt.Fprintln(stderr)
	if *format == "obp-csv" {
		// What each context_i column is: beside the file, or on stderr.
		cols := logfmt.OBPColumns(eb.Enc)
		if *out == "" {
			descr := make([]string, len(cols))
			for i, c := range cols {
				descr[i] = c.Name + " " + c.Describe
			}
			fmt.Fprintf(stderr, "context columns: %s\n", strings.Join(descr, "; "))
			return nil
		}
		b, err := json.MarshalIndent(cols, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*out+".columns.json", append(b, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "context columns described in %s.columns.json\n", *out)
	}
	return nil
}

// parseTime reads an RFC 3339 time or a date (midnight UTC); "" is zero.
func parseTime(flagName, s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	return time.Time{}, usageError{fmt.Errorf("%s %q: want RFC 3339 (2026-11-24T01:00:00Z) or a date (2026-11-24)", flagName, s)}
}
