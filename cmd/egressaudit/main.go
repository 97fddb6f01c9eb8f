package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/egresskit/egresskit/telemetry"
)

// Exit statuses, the convention of every egresskit command; see the
// package documentation.
const (
	exitOK       = 0
	exitFailure  = 1 // could not do it: a file missing or unreadable
	exitUsage    = 2
	exitTampered = 3 // the verdict: the log does not verify
)

const usage = `Usage:
  egressaudit verify [-anchor SEQ:HASH] FILE   check the hash chain; exit 3 names the first bad line
  egressaudit show [flags] FILE                print the records (-help for the filters)
  egressaudit head FILE                        print the anchor SEQ:HASH of the last line

Exit status: 0 valid; 1 failure (a file missing or unreadable); 2 usage;
3 TAMPERED: edited, cut short, or missing its anchor.
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is an error the user can fix on the command line; it exits
// with status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// run is the command; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return exitUsage
	}
	var err error
	switch args[0] {
	case "verify":
		err = verifyCmd(args[1:], stdout)
	case "show":
		err = showCmd(args[1:], stdout, stderr)
	case "head":
		err = headCmd(args[1:], stdout)
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, usage)
		return exitOK
	default:
		err = usagef("unknown command %q", args[0])
	}
	var ue usageError
	var help helpError
	var ve *telemetry.VerifyError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &help):
		fmt.Fprintf(stdout, "Usage:\n  egressaudit %s\n", subUsage[help.fs.Name()])
		help.fs.SetOutput(stdout)
		help.fs.PrintDefaults()
		return exitOK
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "egressaudit: %v\n\n%s", err, usage)
		return exitUsage
	case errors.As(err, &ve):
		out := stdout
		if args[0] == "show" { // stdout holds the lines shown
			out = stderr
		}
		fmt.Fprintln(out, describe(ve))
		return exitTampered
	}
	fmt.Fprintf(stderr, "egressaudit: %v\n", err)
	return exitFailure // a file that cannot be read
}

// describe says where a log is bad, in the form FILE:LINE: reason.
func describe(ve *telemetry.VerifyError) string {
	where := ve.File
	if ve.Line > 0 {
		where += ":" + strconv.Itoa(ve.Line)
	}
	return fmt.Sprintf("TAMPERED %s: %s", where, ve.Reason)
}

// parse parses flags that may come before or after the one positional
// argument, FILE.
func parse(fs *flag.FlagSet, args []string) (string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return "", helpError{fs}
			}
			return "", usagef("%s: %v", fs.Name(), err)
		}
		args = fs.Args()
		if len(args) == 0 {
			break
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
	if len(pos) != 1 {
		return "", usagef("%s: want one FILE, got %d arguments", fs.Name(), len(pos))
	}
	return pos[0], nil
}

// helpError is a subcommand's -h or -help: run prints its usage.
type helpError struct{ fs *flag.FlagSet }

func (helpError) Error() string        { return "help requested" }
func (helpError) Is(target error) bool { return target == flag.ErrHelp }

// subUsage is each subcommand's synopsis, for its -help.
var subUsage = map[string]string{
	"verify": "verify [-anchor SEQ:HASH] FILE    check the hash chain; exit 3 names the first bad line",
	"show":   "show [flags] FILE                 print the records, filtered by the flags:",
	"head":   "head FILE                         print the anchor SEQ:HASH of the last line",
}

func newFlags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// files returns the files of the log whose current file is path, oldest
// first.
func files(path string) ([]string, error) {
	fi, err := os.Stat(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("%s: is a directory, want the log file", path)
	}
	fs, err := telemetry.AuditFiles(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return fs, nil
}

// parseAnchor reads SEQ:HASH.
func parseAnchor(s string) (telemetry.Head, error) {
	seqText, hash, ok := strings.Cut(s, ":")
	seq, err := strconv.ParseUint(seqText, 10, 64)
	if !ok || err != nil || seq == 0 || len(hash) != hashLen || strings.Trim(hash, "0123456789abcdef") != "" {
		return telemetry.Head{}, usagef("-anchor %q: want SEQ:HASH as head prints it (a positive number, a colon, 64 lower-case hex digits)", s)
	}
	return telemetry.Head{Seq: seq, Hash: hash}, nil
}

// hashLen is the length of a line's hash: a SHA-256 in lower-case hex.
const hashLen = 64

func formatHead(h telemetry.Head) string { return strconv.FormatUint(h.Seq, 10) + ":" + h.Hash }
