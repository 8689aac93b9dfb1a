// Command refinery is the one binary of the Refinery contextual-bandit
// platform: serve (the decision service), simulate (offline regret),
// evaluate and export (a bandit's decision log), snapshot (move a bandit
// between services), migrate and keys (the PostgreSQL schema and API
// keys), data and version. `refinery help` lists them and `refinery help
// COMMAND` prints a command's flags; docs/operations.md, docs/simulate.md
// and docs/evaluate.md describe them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"slices"
	"syscall"

	"github.com/refinery-bandits/refinery/nn/kern"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// command is one subcommand of the binary.
type command struct {
	name    string
	summary string
	hidden  bool // left out of the usage (developer tools)
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

// commands lists the subcommands in the order `refinery help` shows them.
// Each lives in its own file.
var commands []command

func register(c command) { commands = append(commands, c) }

func init() {
	register(command{name: "version", summary: "print the version", run: runVersion})
}

const versionUsage = `usage: refinery version   (or refinery --version)

prints the version (set at build time) and the float32 kernels in use:
the instruction set this CPU runs them on, or portable.
`

func runVersion(_ context.Context, args []string, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("version", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	pos, err := parseInterleaved(fs, args, versionUsage, stdout)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", pos[0])}
	}
	_, err = fmt.Fprintf(stdout, "refinery %s (kernels: %s)\n", version, kern.Current())
	return err
}

// usageError marks a bad command line: the message is printed on one line
// and the exit status is 2. Every other error of a command is a run-time
// failure, exit status 1: the command line was well formed but something
// it names failed (a file that cannot be read or holds an invalid
// configuration, an unreachable database, a failed run). One kind of
// mistake, one status (issue 18, finding 8).
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

// interrupted is the end of a command that SIGINT or SIGTERM stopped
// after it kept what it had done: its message is printed on one line and
// the exit status is 130 (128 + SIGINT, the shell's convention), so that a
// script tells an interrupted run from a failed one.
type interrupted struct{ msg string }

func (e interrupted) Error() string { return e.msg }

// flagDashRE finds the flag names in the flag package's errors, which
// it writes with one dash ("flag provided but not defined: -bogus",
// "invalid value "x" for flag -steps"), while the usage and the docs
// write two.
var flagDashRE = regexp.MustCompile(`(defined: |argument: |flag |for )-(\w)`)

// doubleDash writes the flag names of a flag package error with two
// dashes.
func doubleDash(msg string) string { return flagDashRE.ReplaceAllString(msg, "$1--$2") }

func usage(w io.Writer) {
	fmt.Fprintln(w, "usage: refinery <command> [flags]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "commands:")
	for _, c := range commands {
		if c.hidden {
			continue
		}
		fmt.Fprintf(w, "  %-10s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "run 'refinery help <command>' (or 'refinery <command> -h') for the flags of a command;")
	fmt.Fprintln(w, "'refinery --version' prints the version")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "exit status: 0 success, 1 a valid command that failed at run time,")
	fmt.Fprintln(w, "2 a bad command line (unknown command, flag or action; a malformed or")
	fmt.Fprintln(w, "out-of-range argument), 130 interrupted by Ctrl-C (simulate keeps what it did)")
}

// run executes the command line and returns the process exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		usage(stderr)
		return 2
	case args[0] == "--version" || args[0] == "-version":
		args = append([]string{"version"}, args[1:]...)
	case len(args) == 2 && args[0] == "help":
		// help <command> is <command> -h.
		if !slices.ContainsFunc(commands, func(c command) bool { return c.name == args[1] }) {
			fmt.Fprintf(stderr, "refinery help: unknown command %q (run 'refinery help')\n", args[1])
			return 2
		}
		args = []string{args[1], "-h"}
	case len(args) > 2 && args[0] == "help":
		fmt.Fprintf(stderr, "refinery help: unexpected argument %q (want 'refinery help [command]')\n", args[2])
		return 2
	case args[0] == "help" || args[0] == "-h" || args[0] == "--help":
		usage(stdout)
		return 0
	}
	for _, c := range commands {
		if c.name != args[0] {
			continue
		}
		if err := kern.EnvError(); err != nil {
			fmt.Fprintf(stderr, "refinery %s: %v\n", c.name, err)
			return 2
		}
		err := c.run(ctx, args[1:], stdout, stderr)
		switch {
		case err == nil:
			return 0
		case errors.Is(err, flag.ErrHelp):
			return 0
		case errors.As(err, new(interrupted)):
			fmt.Fprintf(stderr, "refinery %s: %v\n", c.name, err)
			return 130
		case errors.As(err, new(usageError)):
			fmt.Fprintf(stderr, "refinery %s: %s\n", c.name, doubleDash(err.Error()))
			return 2
		default:
			fmt.Fprintf(stderr, "refinery %s: %v\n", c.name, err)
			return 1
		}
	}
	fmt.Fprintf(stderr, "refinery: unknown command %q (run 'refinery help')\n", args[0])
	return 2
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
