package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/egresskit/egresskit/telemetry"
)

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
	if err := v.VerifyFiles(paths...); err != nil {
		return err
	}
	h, n, err := lastHead(paths)
	if err != nil {
		return err
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
	// An anchor of a tampered log would vouch for the tampering.
	if err := telemetry.VerifyFiles(paths...); err != nil {
		return err
	}
	h, _, err := lastHead(paths)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, formatHead(h))
	return nil
}

// lastHead returns the seq and hash of the last line of a verified log and
// its number of lines.
func lastHead(paths []string) (telemetry.Head, int, error) {
	var last []byte
	n := 0
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			return telemetry.Head{}, 0, err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for sc.Scan() {
			last = append(last[:0], sc.Bytes()...)
			n++
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return telemetry.Head{}, 0, fmt.Errorf("%s: %w", p, err)
		}
	}
	var line struct {
		Seq  uint64 `json:"seq"`
		Hash string `json:"hash"`
	}
	if err := json.Unmarshal(last, &line); err != nil {
		return telemetry.Head{}, 0, fmt.Errorf("reading the last line: %w", err)
	}
	return telemetry.Head{Seq: line.Seq, Hash: line.Hash}, n, nil
}
