package main

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestQuickstart(t *testing.T) {
	var out bytes.Buffer
	if err := run(&out); err != nil {
		t.Fatal(err)
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		f := strings.Fields(line)
		if len(f) == 10 {
			rows[f[0]] = f
		}
	}
	// columns: host requests attempts retries ok transient throttled refused not-sent waited
	want := map[string]func(f []string) bool{
		"healthy":    func(f []string) bool { return f[1] == "3" && f[4] == "3" },
		"throttling": func(f []string) bool { return f[4] == "3" && f[3] != "0" },
		"challenge":  func(f []string) bool { return f[7] == "1" && f[2] == "3" && f[8] == "2" },
		"hung":       func(f []string) bool { return f[4] == "0" && f[5] != "0" },
	}
	for host, ok := range want {
		if f, found := rows[host]; !found || !ok(f) {
			t.Errorf("row for %s = %v; output:\n%s", host, f, out.String())
		}
	}
	for _, col := range []string{"Legend", "requests", "not sent", "waited", "10s Timeout"} {
		if !strings.Contains(out.String(), col) {
			t.Errorf("the legend does not explain %q:\n%s", col, out.String())
		}
	}
	if !strings.Contains(out.String(), "escalation: host") {
		t.Errorf("no escalation printed:\n%s", out.String())
	}
}
