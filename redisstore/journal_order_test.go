package redisstore

import (
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestJournalKeepsOrderOfChanges: a resume and a halt of one host racing
// each other leave the journal saying what the Store holds. The resume's
// line is held back until the halt has had every chance to run in between
// (its map change and its own line); whatever the halt could do, a Store
// loaded from the journal then knows the same halts as the one that wrote
// it.
func TestJournalKeepsOrderOfChanges(t *testing.T) {
	const host = "api.example"
	t0 := time.UnixMicro(1_800_000_000_000_000)
	t1 := t0.Add(time.Minute)
	for _, tt := range []struct {
		name   string
		first  func(*Store) // its journal line is held back
		second func(*Store) // run while first's line is held back
		prefix string       // of first's line
	}{
		{"resume, then halt", func(s *Store) { s.forget(host) }, func(s *Store) { s.remember(host, t1) }, "R "},
		{"halt, then resume", func(s *Store) { s.remember(host, t1) }, func(s *Store) { s.forget(host) }, "H "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "halts")
				j, halts, err := loadJournal(path)
				if err != nil {
					t.Fatal(err)
				}
				s := &Store{journal: j, known: halts}
				if tt.prefix == "R " {
					s.remember(host, t0) // halted, to be resumed
				}
				held := false
				testHookAppend = func(line string) {
					if held || !strings.HasPrefix(line, tt.prefix) {
						return
					}
					held = true
					go tt.second(s)
					synctest.Wait() // second ran to its end, or waits its turn
				}
				t.Cleanup(func() { testHookAppend = nil })
				tt.first(s)
				synctest.Wait() // second, if it waited, is done
				if !held {
					t.Fatalf("no %q line was written", tt.prefix)
				}
				_, reloaded, err := loadJournal(path)
				if err != nil {
					t.Fatal(err)
				}
				s.mu.Lock()
				known := maps.Clone(s.known)
				s.mu.Unlock()
				if !maps.EqualFunc(reloaded, known, time.Time.Equal) {
					t.Errorf("journal reloaded = %v, want the halts the Store holds, %v", reloaded, known)
				}
			})
		})
	}
}
