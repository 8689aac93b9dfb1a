package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/refinery-bandits/refinery/bandit"
)

func init() {
	register(command{name: "snapshot", summary: "export a bandit (configuration and posterior) from a service, or import one into a service (export|import)", run: runSnapshot})
}

const snapshotUsage = `usage: refinery snapshot export --url URL [--api-key SECRET] --bandit NAME [--out FILE]
       refinery snapshot import --url URL [--api-key SECRET] FILE

export  writes the bandit's snapshot (GET /v1/bandits/NAME/snapshot): its
        configuration and its published posterior, with the snapshot format's
        version, the model layout's version and a SHA-256 checksum, as JSON to
        FILE (default standard output).
import  checks FILE (- for standard input: format, versions, checksum) and
        creates its bandit on the service at URL with that posterior, of the
        same version (POST /v1/snapshots). A snapshot of another model layout,
        an altered one, or a name the service already has is an error.

flags:
  --url URL         the service (default http://127.0.0.1:8080)
` + apiKeyUsage

func runSnapshot(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "export" && args[0] != "import") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(stdout, snapshotUsage)
			return usageError{flag.ErrHelp}
		}
		return usageError{errors.New("want export or import (refinery snapshot --help)")}
	}
	action := args[0]
	fs := flag.NewFlagSet("snapshot", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var svc serviceFlags
	svc.register(fs, "http://127.0.0.1:8080")
	name := fs.String("bandit", "", "")
	out := fs.String("out", "", "")
	var file string
	rest := args[1:]
	for {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fmt.Fprint(stdout, snapshotUsage)
			}
			return usageError{err}
		}
		if fs.NArg() == 0 {
			break
		}
		if file != "" || action == "export" {
			return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
		}
		file, rest = fs.Arg(0), fs.Args()[1:]
	}
	cl, err := svc.client(nil)
	if err != nil {
		return err
	}
	if action == "export" {
		if *name == "" {
			return usageError{errors.New("--bandit: which bandit to export")}
		}
		f, err := cl.Snapshot(ctx, *name)
		if err != nil {
			return err
		}
		b, err := json.MarshalIndent(f, "", "  ")
		if err != nil {
			return err
		}
		b = append(b, '\n')
		if *out == "" {
			_, err = stdout.Write(b)
			return err
		}
		if err := os.WriteFile(*out, b, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s: bandit %s, posterior version %d, model layout %d, sha256 %s\n", *out, *name, f.ModelVersion, f.ModelLayout, f.SHA256)
		return nil
	}
	switch {
	case file == "":
		return usageError{errors.New("import: which snapshot file (- for standard input)")}
	case *name != "" || *out != "":
		return usageError{errors.New("import takes --url, --api-key and a file only")}
	}
	var raw []byte
	if file == "-" {
		raw, err = io.ReadAll(os.Stdin)
	} else {
		raw, err = os.ReadFile(file)
	}
	if err != nil {
		return err
	}
	var f bandit.SnapshotFile
	if err := bandit.DecodeStrict(raw, &f); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	if err := bandit.VerifySnapshot(&f); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	b, err := cl.ImportSnapshot(ctx, json.RawMessage(raw))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "imported bandit %s (%s) at posterior version %d\n", b.Name, b.Policy.Kind, b.Status.ModelVersion)
	return nil
}
