package hoststatetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/egresskit/egresskit/classify"
	"github.com/egresskit/egresskit/hoststate"
)

// haltLogQueueAndHistory: the queue (Halts) lists the hosts halted now,
// newest first, each with its latest record; a record is bounded in size;
// a resume with its note takes the host off the queue, and History
// returns its halts and notes, newest first, by key or by URL.
func haltLogQueueAndHistory(t *testing.T, env Env) {
	ctx := context.Background()
	refuse := func(h string) time.Time {
		t.Helper()
		at := env.Now()
		send(t, env, h, classify.Refused)
		return at
	}
	at1 := refuse(host)
	long := strings.Repeat("x", 10000)
	markers := make([]string, 100)
	for i := range markers {
		markers[i] = long
	}
	put := func(h hoststate.Halt) {
		t.Helper()
		if err := env.Store.PutHalt(ctx, h); err != nil {
			t.Fatalf("PutHalt(%s) = %v", h.Host, err)
		}
	}
	put(hoststate.Halt{Host: host, Time: at1, Worker: "w1", Status: 403, Reason: "challenge",
		Markers: markers, URL: "https://" + host + "/" + long, BodyHead: long + "\x00\xff"})
	env.Advance(time.Second)
	at2 := refuse(other)
	put(hoststate.Halt{Host: "https://" + other + "/page", Time: at2, Worker: "w2", Status: 401, Reason: "agent named"})

	q, err := env.Store.Halts(ctx, 0)
	if err != nil || len(q) != 2 || q[0].Host != other || q[1].Host != host {
		t.Fatalf("Halts = %+v, %v; want %s then %s", q, err, other, host)
	}
	r := q[1]
	if !near(r.Time, at1) || r.Status != 403 || r.Worker != "w1" || r.Reason != "challenge" {
		t.Errorf("record of %s = %+v", host, r)
	}
	if len(r.URL) > 2048 || len(r.BodyHead) > 512 || len(r.Markers) > 16 || len(r.Markers[0]) > 64 ||
		strings.ContainsAny(r.BodyHead, "\x00") || !strings.HasPrefix(r.URL, "https://"+host+"/x") {
		t.Errorf("record not bounded: URL %d bytes, body %d bytes %q..., %d markers", len(r.URL), len(r.BodyHead), r.BodyHead[:8], len(r.Markers))
	}
	if q, err := env.Store.Halts(ctx, 1); err != nil || len(q) != 1 || q[0].Host != other {
		t.Errorf("Halts(limit 1) = %+v, %v", q, err)
	}

	env.Advance(time.Second)
	if err := env.Store.AddNote(ctx, hoststate.Note{Host: host, Time: env.Now(), By: "ana", Text: "asking legal"}); err != nil {
		t.Fatalf("AddNote = %v", err)
	}
	if err := env.Store.Resume(ctx, "http://"+host+"/anything"); err != nil {
		t.Fatalf("Resume by URL = %v", err)
	}
	env.Advance(time.Second)
	if err := env.Store.AddNote(ctx, hoststate.Note{Host: host, Time: env.Now(), By: "bo", Resumed: true, Text: "allowed by contract"}); err != nil {
		t.Fatalf("AddNote(resumed) = %v", err)
	}
	if q, err := env.Store.Halts(ctx, 0); err != nil || len(q) != 1 || q[0].Host != other {
		t.Errorf("Halts after resuming %s = %+v, %v; want only %s", host, q, err, other)
	}
	halts, notes, err := env.Store.History(ctx, "https://"+host+"/x")
	if err != nil || len(halts) != 1 || len(notes) != 2 || notes[0].By != "bo" || !notes[0].Resumed ||
		notes[1].Text != "asking legal" || notes[1].Resumed {
		t.Errorf("History(%s) = %+v, %+v, %v; want 1 halt, the resume then the note", host, halts, notes, err)
	}
	for range 40 {
		if err := env.Store.AddNote(ctx, hoststate.Note{Host: other, By: "c", Text: "still looking"}); err != nil {
			t.Fatal(err)
		}
	}
	halts, notes, err = env.Store.History(ctx, other)
	if err != nil || len(halts)+len(notes) > 32 {
		t.Errorf("History after 41 records = %d halts, %d notes, %v; want at most 32", len(halts), len(notes), err)
	}
	if q, err := env.Store.Halts(ctx, 0); err != nil || len(q) != 1 || q[0].Host != other || q[0].Status != 401 {
		t.Errorf("Halts after many notes = %+v, %v; want the latest halt record of %s kept", q, err, other)
	}
}
