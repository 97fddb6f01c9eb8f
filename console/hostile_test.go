package console_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/egresskit/egresskit/console"
	"github.com/egresskit/egresskit/hoststate"
)

// rawStore returns the records it is given as they are, as a Store that
// something else wrote to might.
type rawStore struct {
	hoststate.Memory
	halts []hoststate.Halt
	notes []hoststate.Note
}

func (s *rawStore) Halts(context.Context, int) ([]hoststate.Halt, error) { return s.halts, nil }
func (s *rawStore) History(context.Context, string) ([]hoststate.Halt, []hoststate.Note, error) {
	return s.halts, s.notes, nil
}

// maxPage is the most a page may weigh.
const maxPage = 1 << 20

// checkPage fails when page carries a control character (other than
// newline and tab), a C1 control or a bidirectional control, or is not
// under 1 MB.
func checkPage(t *testing.T, what, page string) {
	t.Helper()
	if len(page) >= maxPage {
		t.Errorf("%s: %d bytes, want under 1 MB", what, len(page))
	}
	for i, r := range page {
		bad := r < 0x20 && r != '\n' && r != '\t' || r >= 0x7f && r <= 0x9f ||
			r >= 0x202a && r <= 0x202e || r >= 0x2066 && r <= 0x2069 || r == utf8.RuneError && !strings.HasPrefix(page[i:], "\uFFFD")
		if bad {
			t.Errorf("%s: %U at byte %d: %q", what, r, i, page[max(0, i-40):min(len(page), i+40)])
			return
		}
	}
}

func hostileConsole(t *testing.T, halts []hoststate.Halt, notes []hoststate.Note) *client {
	t.Helper()
	mem, err := hoststate.NewMemory(hoststate.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := console.New(console.Config{Store: &rawStore{Memory: mem, halts: halts, notes: notes}})
	if err != nil {
		t.Fatal(err)
	}
	return newClient(t, h)
}

// TestHostileRecords: records with terminal escapes, C1 and bidi
// controls, a 64 MiB body and 200,000 markers, and a queue of 500 of the
// largest records: each page stays under 1 MB with no control character.
func TestHostileRecords(t *testing.T) {
	hostile := "\x1b[2J\x1b]0;pwned\x07\u009b31m\u202eDETCADER\u2066\"<>&'"
	huge := strings.Repeat(`"<&`, 64<<20/3)
	markers := make([]string, 200_000)
	for i := range markers {
		markers[i] = hostile + strings.Repeat(`"`, 100)
	}
	big := hoststate.Halt{Host: "evil.example", Reason: huge, Worker: huge, Evidence: huge, URL: huge, BodyHead: huge, Markers: markers, Status: 403}
	halts := make([]hoststate.Halt, 500)
	for i := range halts {
		halts[i] = big
	}
	notes := make([]hoststate.Note, 1000)
	for i := range notes {
		notes[i] = hoststate.Note{Host: "evil.example", By: huge, Text: huge}
	}
	c := hostileConsole(t, halts, notes)
	for _, p := range []string{"", "host?h=evil.example"} {
		code, page, _ := c.do("GET", p, nil, nil)
		if code != http.StatusOK {
			t.Fatalf("%q: %d", p, code)
		}
		checkPage(t, "page "+p, page)
		if strings.Contains(page, "\x1b") || strings.Contains(page, "DETCADER") && strings.Contains(page, "\u202e") {
			t.Errorf("page %q shows a raw escape", p)
		}
		t.Logf("page %q: %d bytes", p, len(page))
	}
}

// FuzzPages: whatever the records hold, the queue and a host's page are
// under 1 MB and carry no control character.
func FuzzPages(f *testing.F) {
	f.Add("\x1b[2J", "http://e/\u202e", "body\x00\u0085", "m\u2066", "by\x07", 3)
	f.Fuzz(func(t *testing.T, reason, u, body, marker, by string, n int) {
		n = 1 + max(0, n%50)
		ms := make([]string, n)
		for i := range ms {
			ms[i] = marker
		}
		h := hoststate.Halt{Host: "h.example", Reason: reason, URL: u, BodyHead: body, Worker: by, Evidence: marker, Markers: ms}
		c := hostileConsole(t, []hoststate.Halt{h, h}, []hoststate.Note{{Host: "h.example", By: by, Text: reason}})
		for _, p := range []string{"", "host?h=h.example"} {
			_, page, _ := c.do("GET", p, nil, nil)
			checkPage(t, "page "+p, page)
		}
	})
}
