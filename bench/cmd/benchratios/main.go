// Command benchratios reads the output of the bench module's benchmarks
// (go test -bench, any number of runs) and writes, as Markdown, the
// targets of the egresskit chain with their measured values and a verdict
// (met, missed, or not run), every contender compared with the bare
// client, and a closing note quoting the key ratios. Values are medians
// over the runs, as benchstat reports them.
//
// Usage:
//
//	benchratios [-part summary|closing] [file ...]
//
// -part summary (the default) writes the targets and the comparison with
// the bare client; -part closing writes the closing note alone. With no
// file it reads standard input. It exits with status 1 when the
// input cannot be read or holds no benchmark result.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
)

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run parses the command line args, reads the files it names (stdin when
// there are none) and writes the part of the report it asks for to w.
func run(args []string, stdin io.Reader, w io.Writer) error {
	fs := flag.NewFlagSet("benchratios", flag.ContinueOnError)
	part := fs.String("part", "summary", "what to write: summary (targets and comparison) or closing (the closing note)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *part != "summary" && *part != "closing" {
		return fmt.Errorf("benchratios: -part %q is not summary or closing", *part)
	}
	args = fs.Args()
	readers := []io.Reader{stdin}
	if len(args) > 0 {
		readers = readers[:0]
		for _, name := range args {
			f, err := os.Open(name)
			if err != nil {
				return fmt.Errorf("benchratios: %w", err)
			}
			defer f.Close()
			readers = append(readers, f)
		}
	}
	s, err := parse(io.MultiReader(readers...))
	if err != nil {
		return err
	}
	r := compute(s)
	if *part == "closing" {
		return r.closingMarkdown(w)
	}
	return r.markdown(w)
}
