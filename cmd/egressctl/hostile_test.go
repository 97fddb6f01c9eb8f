package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/redistest"
	"github.com/egresskit/egresskit/redisstore"
	"github.com/redis/go-redis/v9"
)

// hostile holds a terminal's escape sequences (clear the screen, set the
// title), C1 controls, bidirectional overrides and isolates, and HTML.
const hostile = "\x1b[2J\x1b]0;pwned\x07\u009b31m\u0085x?api_key=\u202eREDACTED\u2066\u2069\r\n\tby=root <b>&\""

// checkTerminal fails when out has a byte below 0x20 other than newline
// and tab, DEL, a C1 control or a bidirectional control, or is 1 MB or
// more.
func checkTerminal(t *testing.T, what string, out []byte) {
	t.Helper()
	if len(out) >= 1<<20 {
		t.Errorf("%s: %d bytes, want under 1 MB", what, len(out))
	}
	for i := 0; i < len(out); {
		r, n := utf8.DecodeRune(out[i:])
		bad := r < 0x20 && r != '\n' && r != '\t' || r >= 0x7f && r <= 0x9f ||
			r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == utf8.RuneError && n == 1
		if bad {
			t.Errorf("%s: %U at byte %d: %q", what, r, i, out[max(0, i-40):min(len(out), i+40)])
			return
		}
		i += n
	}
}

// TestHostileRecordInRedis: a halt record written straight into Redis
// (as any worker of a fleet, or anyone who reaches its Redis, could) with
// escape sequences, C1 and bidi controls, a 64 MiB body and 200,000
// markers: halts and show print it as data, under 1 MB, and so does the
// console's queue.
func TestHostileRecordInRedis(t *testing.T) {
	ctx := context.Background()
	addr := redistest.Addr(t)
	prefix := redistest.Prefix(t)
	c := redistest.Dial(t, addr)
	st, err := redisstore.New(c, redisstore.Config{Prefix: prefix, OnRedisError: redisstore.FailClosed, Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	push := func(host, list string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.LPush(ctx, prefix+":{"+host+"}:"+list, b).Err(); err != nil {
			t.Fatal(err)
		}
	}
	halt := func(host string) {
		a, err := st.Admit(ctx, host)
		if err != nil {
			t.Fatal(err)
		}
		st.Record(ctx, host, a, classify.Result{Outcome: classify.Refused, Status: 403})
		c.ZAdd(ctx, prefix+":halted", redis.Z{Score: float64(time.Now().UnixMicro()), Member: host})
	}
	markers := make([]string, 200_000)
	for i := range markers {
		markers[i] = hostile
	}
	halt("evil.example")
	push("evil.example", "halts", map[string]any{"kind": "halt", "halt": map[string]any{"host": "evil.example",
		"reason": hostile, "worker": hostile, "evidence": hostile, "url": "http://e/?" + strings.Repeat(hostile, 100),
		"body_head": hostile, "markers": markers[:100]}})
	push("evil.example", "notes", map[string]any{"kind": "note", "note": map[string]any{"by": hostile, "text": hostile}})
	halt("huge.example")
	push("huge.example", "halts", map[string]any{"kind": "halt", "halt": map[string]any{"host": "huge.example",
		"reason": hostile, "body_head": hostile + strings.Repeat("A", 64<<20) + hostile, "markers": markers}})

	g := []string{"-redis", addr, "-prefix", prefix}
	for _, args := range [][]string{
		{"halts"}, {"halts", "-json"},
		{"show", "evil.example"}, {"show", "-json", "evil.example"},
		{"show", "huge.example"}, {"show", "-json", "huge.example"},
	} {
		code, out, errs := ctl(t, nil, append(g, args...)...)
		if code != 0 {
			t.Errorf("%v: exit %d\n%s", args, code, errs)
		}
		checkTerminal(t, strings.Join(args, " "), []byte(out))
		t.Logf("%v: %d bytes", args, len(out))
		checkTerminal(t, strings.Join(args, " ")+" (stderr)", []byte(errs))
		if !strings.Contains(out, "REDACTED") && !strings.Contains(out, "not shown") {
			t.Errorf("%v does not show the record:\n%s", args, out)
		}
		if args[0] == "show" && !strings.Contains(args[len(args)-1], "json") {
			// One field a line: the reason's "by=root" is not a line of its own.
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(strings.TrimSpace(l), "by=root") {
					t.Errorf("show: a field's text makes a line of its own: %q", l)
				}
			}
		}
	}

	const token = "hostile-records-token-7d1e9a"
	base := serveConsole(t, []string{"EGRESSCTL_TOKEN=" + token}, append(g, "serve", "-addr", "127.0.0.1:0")...)
	for _, p := range []string{"", "host?h=evil.example", "host?h=huge.example"} {
		req, _ := http.NewRequest("GET", base+p, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		page, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !bytes.Contains(page, []byte("evil.example")) && p == "" {
			t.Errorf("console %q: %d", p, resp.StatusCode)
		}
		checkTerminal(t, "console page "+p, page)
		t.Logf("console page %q: %d bytes", p, len(page))
	}
}

// FuzzPrint: whatever a record holds, halts and show print no control
// character and stay under 1 MB.
func FuzzPrint(f *testing.F) {
	f.Add(hostile, "http://e/\u202e", "body\x00\u0085", "m\u2066", "by\x07", 3)
	f.Fuzz(func(t *testing.T, reason, u, body, marker, by string, n int) {
		n = max(0, n%1000)
		ms := make([]string, n)
		for i := range ms {
			ms[i] = marker
		}
		h := hoststate.Halt{Host: reason, Reason: reason, URL: u, BodyHead: body, Worker: by, Evidence: marker, Markers: ms, Time: time.Now()}
		hs := []hoststate.Halt{h, h, h}
		var out bytes.Buffer
		if err := printHalts(&out, hs, "redis "+by+", prefix "+marker); err != nil {
			t.Fatal(err)
		}
		checkTerminal(t, "halts", out.Bytes())
		out.Reset()
		notes := []hoststate.Note{{By: by, Text: reason}, {By: marker, Text: body, Resumed: true}}
		st := hoststate.Status{Halted: true}
		if err := printShow(&out, u, st, hs, notes, &trailView{Files: by, Verify: errString(reason)}, "redis "+by, time.Now()); err != nil {
			t.Fatal(err)
		}
		checkTerminal(t, "show", out.Bytes())
	})
}

type errString string

func (e errString) Error() string { return string(e) }
