//go:build unix

package main

import (
	"bytes"
	"net"
	"os"
	"os/exec"
	"testing"
)

// TestEndToEndInterrupt interrupts a run whose target never answers: the
// partial report is still written, and the exit status is 130.
func TestEndToEndInterrupt(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err == nil {
			accepted <- c
		}
		close(accepted)
	}()

	cmd := exec.Command(binary, "-timeout", "1m", "http://"+ln.Addr().String()+"/never")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := <-accepted // the probe is in flight
	if c == nil {
		t.Fatal("the probe never connected")
	}
	defer c.Close()
	if err := cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	err = cmd.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != exitInterrupted {
		t.Fatalf("preflight: %v, want exit status %d; stderr %q", err, exitInterrupted, stderr.String())
	}
	m := checkStableJSON(t, stdout.String())
	r := m["results"].([]any)[0].(map[string]any)
	if r["outcome"] != "canceled" || r["error_message"] != "canceled" {
		t.Errorf("interrupted result = %v, want outcome and error_message \"canceled\"", r)
	}
}
