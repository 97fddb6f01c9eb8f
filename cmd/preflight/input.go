package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/egresskit/egresskit/egress"
	"github.com/egresskit/egresskit/internal/preflightinput"
	"github.com/egresskit/egresskit/probe"
)

// readInputs reads the targets and the proxies, giving up at deadline: a
// standard input (or a named pipe) that never ends must not hold the run
// past its -timeout. Giving up is a usage error and nothing is probed: a
// list cut at an arbitrary point, perhaps inside a line, is not the list
// the caller meant. The reading goroutine is abandoned to its read; the
// command exits soon after.
func readInputs(cfg *config, stdin io.Reader, deadline time.Time) ([]probe.Target, []egress.Endpoint, error) {
	type inputs struct {
		targets []probe.Target
		proxies []egress.Endpoint
		err     error
	}
	done := make(chan inputs, 1)
	go func() {
		var in inputs
		in.targets, in.err = readTargets(cfg, stdin)
		if in.err == nil {
			in.proxies, in.err = readProxies(cfg)
		}
		done <- in
	}()
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case in := <-done:
		return in.targets, in.proxies, in.err
	case <-timer.C:
		return nil, nil, usagef("the input did not end within -timeout %v: close standard input, or name a file with -targets", cfg.timeout)
	}
}

// readTargets gathers the targets of -targets FILE and of the arguments;
// "-" (as FILE or as an argument) reads standard input, once.
func readTargets(cfg *config, stdin io.Reader) ([]probe.Target, error) {
	var targets []probe.Target
	stdinRead := false
	fromReader := func(name string, r io.Reader) error {
		ts, err := preflightinput.Targets(r)
		if errors.Is(err, probe.ErrNoTargets) {
			return nil // an empty source is fine if another has targets
		}
		if err != nil {
			return describe(name, err)
		}
		targets = append(targets, ts...)
		return nil
	}
	fromStdin := func() error {
		if stdinRead {
			return nil
		}
		stdinRead = true
		return fromReader("standard input", stdin)
	}
	if f := cfg.targetsFile; f != "" {
		var err error
		if f == "-" {
			err = fromStdin()
		} else {
			err = fromFile(f, fromReader)
		}
		if err != nil {
			return nil, err
		}
	}
	for i, a := range cfg.args {
		if a == "-" {
			if err := fromStdin(); err != nil {
				return nil, err
			}
			continue
		}
		name := fmt.Sprintf("argument %d", i+1)
		if strings.ContainsAny(a, " \t\r\n") {
			return nil, usagef("%s: a URL contains no white space", name)
		}
		ts, err := preflightinput.Targets(strings.NewReader(a))
		if err != nil {
			return nil, describe(name, err)
		}
		targets = append(targets, ts...)
	}
	if len(targets) == 0 {
		return nil, usagef("no targets: give URLs as arguments, -targets FILE, or - to read standard input")
	}
	return targets, nil
}

// fromFile opens name and hands it to read.
func fromFile(name string, read func(string, io.Reader) error) error {
	f, err := os.Open(name)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return usagef("%s: %v", name, err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.IsDir() {
		return usagef("%s: is a directory, want a file", name)
	}
	return read(name, f)
}

// readProxies gathers the proxies of -proxy flags and -proxies FILE.
func readProxies(cfg *config) ([]egress.Endpoint, error) {
	var eps []egress.Endpoint
	for i, p := range cfg.proxies {
		name := fmt.Sprintf("-proxy #%d", i+1)
		if strings.ContainsAny(p, " \t\r\n") {
			return nil, usagef("%s: a proxy URL contains no white space", name)
		}
		got, err := preflightinput.Proxies(strings.NewReader(p))
		if err != nil {
			return nil, describe(name, err)
		}
		eps = append(eps, got...)
	}
	if f := cfg.proxiesFile; f != "" {
		err := fromFile(f, func(name string, r io.Reader) error {
			got, err := preflightinput.Proxies(r)
			if err != nil {
				return describe(name, err)
			}
			eps = append(eps, got...)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return eps, nil
}

// describe turns an input error of package probe into a usage error that
// names the source and, for files, the line. Package probe's errors carry
// no credentials.
func describe(source string, err error) error {
	var te *probe.TargetError
	var pe *probe.InvalidProxyError
	switch {
	case errors.As(err, &te) && te.Line > 0:
		where := source
		if !strings.HasPrefix(source, "argument") && !strings.HasPrefix(source, "-proxy") {
			where = fmt.Sprintf("%s: line %d", source, te.Line)
		}
		if te.URL != "" {
			return usagef("%s: %q: %v", where, te.URL, te.Err)
		}
		return usagef("%s: %v", where, te.Err)
	case errors.As(err, &pe) && pe.Line > 0:
		where := source
		if !strings.HasPrefix(source, "argument") && !strings.HasPrefix(source, "-proxy") {
			where = fmt.Sprintf("%s: line %d", source, pe.Line)
		}
		return usagef("%s: proxy: %v", where, pe.Err)
	case errors.Is(err, preflightinput.ErrNoProxies), errors.Is(err, probe.ErrNoTargets), errors.Is(err, probe.ErrTooManyProbes):
		return usagef("%s: %v", source, err)
	}
	// A read error: the input is unreadable, which the caller fixes like
	// a missing file (exit 2, usage); nothing was sent.
	var pathErr *os.PathError
	if errors.As(err, &pathErr) {
		err = pathErr.Err
	}
	return usagef("%s: %v", source, err)
}
