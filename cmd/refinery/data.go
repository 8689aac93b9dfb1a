package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/refinery-bandits/refinery/simulators"
)

func init() {
	register(command{
		name:    "data",
		summary: "fetch the UCI mushroom data (copy from ../shared or download; sha256 checked)",
		run:     runData,
	})
}

// sourcesFlag collects repeated --source values.
type sourcesFlag []string

func (s *sourcesFlag) String() string     { return strings.Join(*s, ",") }
func (s *sourcesFlag) Set(v string) error { *s = append(*s, v); return nil }

func runData(ctx context.Context, args []string, stdout, _ io.Writer) error {
	fs := flag.NewFlagSet("data", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	dir := fs.String("dir", "data", "directory to put "+simulators.MushroomFile+" in")
	var sources sourcesFlag
	fs.Var(&sources, "source", "where to get the file, tried in the order given: a directory, the file itself, or an http(s) URL of the zip or the file (repeatable; default "+strings.Join(simulators.DefaultMushroomSources, " then ")+")")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stdout, "usage: refinery data [--dir DIR] [--source SRC]...")
			fmt.Fprintln(stdout)
			fmt.Fprintln(stdout, "Makes sure DIR/"+simulators.MushroomFile+" exists with sha256 "+simulators.MushroomSHA256+",")
			fmt.Fprintln(stdout, "copying or downloading it from the first source that has it.")
			fmt.Fprintln(stdout)
			fs.SetOutput(stdout)
			fs.PrintDefaults()
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	got, err := simulators.FetchMushroom(ctx, *dir, sources...)
	if err != nil {
		return err
	}
	if got.From == "" {
		_, err = fmt.Fprintf(stdout, "%s: already present (sha256 ok)\n", got.Path)
	} else {
		_, err = fmt.Fprintf(stdout, "%s: fetched from %s (sha256 ok)\n", got.Path, got.From)
	}
	return err
}
