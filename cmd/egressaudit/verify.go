package main

import (
	"fmt"
	"io"

	"github.com/egresskit/egresskit/telemetry"
)

// testHookVerified, when set (by tests only), is called once the log is
// verified, before its head is printed.
var testHookVerified func()

func verifyCmd(args []string, stdout io.Writer) error {
	fs := newFlags("verify")
	anchor := fs.String("anchor", "", "`SEQ:HASH` of a line the log must contain, as head printed it earlier")
	path, err := parse(fs, args)
	if err != nil {
		return err
	}
	var v telemetry.Verifier
	if *anchor != "" {
		if v.Anchor, err = parseAnchor(*anchor); err != nil {
			return err
		}
	}
	paths, err := files(path)
	if err != nil {
		return err
	}
	h, err := v.VerifyFiles(paths...)
	if err != nil {
		return err
	}
	n := h.Seq // lines checked: seqs count from 1, and every line is checked
	if testHookVerified != nil {
		testHookVerified()
	}
	fmt.Fprintf(stdout, "OK %d lines in %d files, head %s\n", n, len(paths), formatHead(h))
	return nil
}

func headCmd(args []string, stdout io.Writer) error {
	path, err := parse(newFlags("head"), args)
	if err != nil {
		return err
	}
	paths, err := files(path)
	if err != nil {
		return err
	}
	// An anchor of a tampered log would vouch for the tampering: the head
	// is of the last line verified, from the same reading.
	h, err := telemetry.Verifier{}.VerifyFiles(paths...)
	if err != nil {
		return err
	}
	if testHookVerified != nil {
		testHookVerified()
	}
	fmt.Fprintln(stdout, formatHead(h))
	return nil
}
