package main

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/telemetry"
)

// TestExitCodes: egressctl and egressaudit follow one convention: 0 ok, 1
// failure (could not do it), 2 usage, 3 and up the tool's verdicts.
func TestExitCodes(t *testing.T) {
	addr := redistest.Addr(t)
	prefix := redistest.Prefix(t)
	key := haltOne(t, addr, prefix)
	g := []string{"-redis", addr, "-prefix", prefix}
	dir := t.TempDir()
	good := filepath.Join(dir, "good.audit")
	a, err := telemetry.NewAudit(telemetry.AuditConfig{Path: good})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	bad := filepath.Join(dir, "bad.audit")
	b, _ := os.ReadFile(good)
	os.WriteFile(bad, []byte(strings.Replace(string(b), `"open"`, `"opex"`, 1)), 0o600)

	for _, tt := range []struct {
		name  string
		audit bool // egressaudit, else egressctl
		args  []string
		code  int
		say   string // in stdout or stderr
	}{
		{"ctl ok", false, append(g, "halts"), 0, "prefix " + prefix},
		{"ctl help", false, []string{"-h"}, 0, "EGRESSCTL_REDIS"},
		{"ctl usage: no command", false, nil, 2, "Usage"},
		{"ctl usage: unknown flag", false, []string{"-frob", "halts"}, 2, "-frob"},
		{"ctl usage: bad -redis", false, []string{"-redis", "notaurl::", "halts"}, 2, "-redis"},
		{"ctl usage: bad -redis port", false, []string{"-redis", "localhost:http", "halts"}, 2, "port"},
		{"ctl usage: flag of another command", false, append(g, "halts", "-reason", "x"), 2, "not a flag of halts"},
		{"ctl usage: reason of two lines", false, append(g, "resume", key, "-by", "ana", "-reason", "a\nb"), 2, "one line"},
		{"ctl usage: zero-width reason", false, append(g, "resume", key, "-by", "ana", "-reason", "\u200b"), 2, "-reason"},
		{"ctl failure: no Redis", false, []string{"-redis", "127.0.0.1:1", "halts"}, 1, "127.0.0.1:1"},
		{"ctl failure: audit file in a missing directory", false, append(g, "-audit", filepath.Join(dir, "no", "x.audit"), "resume", key, "-by", "a", "-reason", "b"), 1, "audit"},
		{"ctl verdict: not halted", false, append(g, "resume", "never-halted.example", "-by", "a", "-reason", "b"), 3, "prefix " + prefix},
		{"ctl verdict: unknown host", false, append(g, "show", "never-halted.example"), 3, "not halted"},
		{"audit ok", true, []string{"verify", good}, 0, "OK"},
		{"audit help", true, []string{"-h"}, 0, "Exit status"},
		{"audit usage", true, []string{"verify"}, 2, "want one FILE"},
		{"audit usage: bad anchor", true, []string{"verify", "-anchor", "x", good}, 2, "SEQ:HASH"},
		{"audit failure: missing file", true, []string{"verify", filepath.Join(dir, "absent.audit")}, 1, "no such file"},
		{"audit verdict: tampered", true, []string{"verify", bad}, 3, "TAMPERED"},
	} {
		var code int
		var out, errs string
		if tt.audit {
			code, out, errs = audit(t, tt.args...)
		} else {
			code, out, errs = ctl(t, []string{"EGRESSCTL_REDIS=", "EGRESSCTL_PREFIX="}, tt.args...)
		}
		if code != tt.code || !strings.Contains(out+errs, tt.say) {
			t.Errorf("%s: exit %d, want %d saying %q\n%s%s", tt.name, code, tt.code, tt.say, out, errs)
		}
	}
}

// TestHelpListsEveryFlag: -h describes every flag of every command with
// its default, and the environment variables.
func TestHelpListsEveryFlag(t *testing.T) {
	code, out, _ := ctl(t, nil, "-h")
	if code != 0 {
		t.Fatalf("-h: exit %d", code)
	}
	var names []string
	globalFlags(new(global)).VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	commandFlags(new(cmdFlags), nil).VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	for _, n := range names {
		i := strings.Index(out, "  -"+n+" ")
		if i < 0 {
			t.Errorf("-h does not list -%s:\n%s", n, out)
			continue
		}
		entry, _, _ := strings.Cut(out[i+3:], "\n  -")
		if !strings.Contains(entry, "default") && !strings.Contains(entry, "required") {
			t.Errorf("-h: -%s has no default: %q", n, entry)
		}
		if len(strings.Fields(entry)) < 4 {
			t.Errorf("-h: -%s has no description: %q", n, entry)
		}
	}
	for _, w := range []string{"$EGRESSCTL_REDIS", "$EGRESSCTL_PREFIX", "EGRESSCTL_TOKEN", "127.0.0.1:6379", "Exit status"} {
		if !strings.Contains(out, w) {
			t.Errorf("-h does not mention %s", w)
		}
	}
}

// TestArgumentsRedacted: a HOST argument with a password is not echoed,
// and a long one is cut.
func TestArgumentsRedacted(t *testing.T) {
	for _, arg := range []string{"http://user:S3cretPw@exa mple.com/", "user:S3cretPw@host name", strings.Repeat("S3cretPw ", 10000)} {
		code, _, errs := ctl(t, nil, "-redis", "127.0.0.1:1", "show", arg)
		if code != 2 || strings.Contains(errs, "S3cretPw@") || strings.Contains(errs, "user:S3cretPw") || len(errs) > 2000 {
			t.Errorf("show %.40q: exit %d, stderr (%d bytes) %.300q", arg, code, len(errs), errs)
		}
	}
}
