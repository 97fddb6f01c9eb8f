package sessiontest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit/internal/sessionkit"
	"github.com/egresskit/egresskit/session"
	"github.com/egresskit/egresskit/session/sessionstore"
)

var storeScenarios = []scenario{
	{"Store/CreateGet", storeCreateGet},
	{"Store/InvalidID", storeInvalidID},
	{"Store/Expiry", storeExpiry},
	{"Store/SetExpiry", storeSetExpiry},
	{"Store/Fields", storeFields},
	{"Store/MergeCookies", storeMergeCookies},
	{"Store/CookieLimit", storeCookieLimit},
	{"Store/ConcurrentWriters", storeConcurrentWriters},
	{"Store/Lease", storeLease},
	{"Store/CrashedHolder", storeCrashedHolder},
	{"Store/Delete", storeDelete},
	{"Store/Isolation", storeIsolation},
	{"Store/CanceledContext", storeCanceledContext},
}

func create(t *testing.T, e env, fields, cookies map[string][]byte, ttl time.Duration) sessionstore.Record {
	t.Helper()
	now := e.clock.Now()
	r := sessionstore.Record{ID: sessionkit.NewID(), Created: now, Expires: now.Add(ttl), Fields: fields, Cookies: cookies}
	if err := e.store.Create(context.Background(), r); err != nil {
		t.Fatalf("Create(%q) = %v, want nil", r.ID, err)
	}
	return r
}

func get(t *testing.T, e env, id string) sessionstore.Record {
	t.Helper()
	r, err := e.store.Get(context.Background(), id, sessionstore.PartFields|sessionstore.PartCookies)
	if err != nil {
		t.Fatalf("Get(%q) = %v, want nil", id, err)
	}
	return r
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Errorf("%s = %v, want %v", what, err, want)
	}
}

func wantMap(t *testing.T, what string, got, want map[string][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s has %d entries %v, want %d", what, len(got), keys(got), len(want))
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || !bytes.Equal(g, v) {
			t.Errorf("%s[%q] = %q (present %v), want %q", what, k, g, ok, v)
		}
	}
}

// sameLease compares leases, their times by instant.
func sameLease(a, b sessionstore.Lease) bool {
	return a.ID == b.ID && a.Holder == b.Holder && a.Token == b.Token && a.Expires.Equal(b.Expires)
}

func keys(m map[string][]byte) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func storeCreateGet(t *testing.T, e env) {
	ctx := context.Background()
	fields := map[string][]byte{"a": []byte("1"), "b": {0, 1, 2, 255}}
	cookies := map[string][]byte{"c/x": []byte("cx")}
	r := create(t, e, fields, cookies, time.Hour)

	got := get(t, e, r.ID)
	if got.ID != r.ID || got.Version != 1 || !got.Created.Equal(r.Created) || !got.Expires.Equal(r.Expires) {
		t.Errorf("Get = {ID %q, Version %d, Created %v, Expires %v}, want {%q, 1, %v, %v}",
			got.ID, got.Version, got.Created, got.Expires, r.ID, r.Created, r.Expires)
	}
	wantMap(t, "Fields", got.Fields, fields)
	wantMap(t, "Cookies", got.Cookies, cookies)
	if got.Lease.Token != 0 {
		t.Errorf("Lease = %+v, want none", got.Lease)
	}

	only, err := e.store.Get(ctx, r.ID, sessionstore.PartFields)
	if err != nil || len(only.Cookies) != 0 || len(only.Fields) != 2 || only.Version != 1 {
		t.Errorf("Get(PartFields) = %d fields, %d cookies, version %d, %v; want 2, 0, 1, nil", len(only.Fields), len(only.Cookies), only.Version, err)
	}
	meta, err := e.store.Get(ctx, r.ID, 0)
	if err != nil || len(meta.Cookies)+len(meta.Fields) != 0 || meta.Version != 1 {
		t.Errorf("Get(0) = %d fields, %d cookies, version %d, %v; want 0, 0, 1, nil", len(meta.Fields), len(meta.Cookies), meta.Version, err)
	}

	again := r
	again.Fields = map[string][]byte{"a": []byte("2")}
	wantErr(t, "Create(existing)", e.store.Create(ctx, again), session.ErrExists)
	wantMap(t, "Fields after failed Create", get(t, e, r.ID).Fields, fields)

	_, err = e.store.Get(ctx, sessionkit.NewID(), sessionstore.PartFields|sessionstore.PartCookies)
	wantErr(t, "Get(unknown)", err, session.ErrNotFound)
}

func storeInvalidID(t *testing.T, e env) {
	ctx := context.Background()
	for _, id := range []string{"", "a\nb", "a\x00", "{tag}", "sp ace", "é", string(make([]byte, 128+1))} {
		now := e.clock.Now()
		wantErr(t, fmt.Sprintf("Create(%q)", id), e.store.Create(ctx, sessionstore.Record{ID: id, Created: now, Expires: now.Add(time.Hour)}), session.ErrInvalidID)
		_, err := e.store.Get(ctx, id, sessionstore.PartFields|sessionstore.PartCookies)
		wantErr(t, fmt.Sprintf("Get(%q)", id), err, session.ErrInvalidID)
		wantErr(t, fmt.Sprintf("SetFields(%q)", id), e.store.SetFields(ctx, id, 0, sessionstore.FieldWrite{}), session.ErrInvalidID)
		_, err = e.store.MergeCookies(ctx, id, 0, sessionstore.CookieMerge{})
		wantErr(t, fmt.Sprintf("MergeCookies(%q)", id), err, session.ErrInvalidID)
		_, err = e.store.Acquire(ctx, id, "h", time.Second)
		wantErr(t, fmt.Sprintf("Acquire(%q)", id), err, session.ErrInvalidID)
	}
}

func storeExpiry(t *testing.T, e env) {
	ctx := context.Background()
	r := create(t, e, map[string][]byte{"a": []byte("1")}, nil, 10*time.Second)
	e.clock.Advance(10*time.Second - time.Millisecond)
	get(t, e, r.ID)
	e.clock.Advance(time.Millisecond)

	_, err := e.store.Get(ctx, r.ID, sessionstore.PartFields|sessionstore.PartCookies)
	wantErr(t, "Get(expired)", err, session.ErrNotFound)
	wantErr(t, "SetFields(expired)", e.store.SetFields(ctx, r.ID, 0, sessionstore.FieldWrite{Set: []sessionstore.Field{{Name: "a", Value: []byte("2")}}}), session.ErrNotFound)
	_, err = e.store.MergeCookies(ctx, r.ID, 0, sessionstore.CookieMerge{Set: []sessionstore.Field{{Name: "c", Value: []byte("2")}}})
	wantErr(t, "MergeCookies(expired)", err, session.ErrNotFound)
	_, err = e.store.Acquire(ctx, r.ID, "h", time.Second)
	wantErr(t, "Acquire(expired)", err, session.ErrNotFound)
	wantErr(t, "Delete(expired)", e.store.Delete(ctx, r.ID, 0), session.ErrNotFound)
	wantErr(t, "SetExpiry(expired)", e.store.SetExpiry(ctx, r.ID, 0, e.clock.Now().Add(time.Hour)), session.ErrNotFound)

	// An expired record is replaced by Create, with nothing of the old one.
	now := e.clock.Now()
	if err := e.store.Create(ctx, sessionstore.Record{ID: r.ID, Created: now, Expires: now.Add(time.Hour)}); err != nil {
		t.Fatalf("Create(after expiry) = %v, want nil", err)
	}
	got := get(t, e, r.ID)
	if len(got.Fields) != 0 || got.Version != 1 {
		t.Errorf("re-created record = %d fields, version %d; want 0, 1", len(got.Fields), got.Version)
	}

	past := sessionstore.Record{ID: sessionkit.NewID(), Created: now, Expires: now}
	if err := e.store.Create(ctx, past); err == nil {
		t.Errorf("Create(Expires = now) = nil, want an error")
	}
}

func storeSetExpiry(t *testing.T, e env) {
	ctx := context.Background()
	r := create(t, e, nil, nil, 10*time.Second)
	e.clock.Advance(5 * time.Second)
	newExp := e.clock.Now().Add(20 * time.Second)
	if err := e.store.SetExpiry(ctx, r.ID, 0, newExp); err != nil {
		t.Fatalf("SetExpiry = %v, want nil", err)
	}
	e.clock.Advance(10 * time.Second)
	got := get(t, e, r.ID)
	if !got.Expires.Equal(newExp) || got.Version != 2 {
		t.Errorf("after SetExpiry: Expires %v, Version %d; want %v, 2", got.Expires, got.Version, newExp)
	}
	if err := e.store.SetExpiry(ctx, r.ID, 0, e.clock.Now()); err != nil {
		t.Fatalf("SetExpiry(now) = %v, want nil", err)
	}
	_, err := e.store.Get(ctx, r.ID, sessionstore.PartFields|sessionstore.PartCookies)
	wantErr(t, "Get(after SetExpiry(now))", err, session.ErrNotFound)
}

func storeFields(t *testing.T, e env) {
	ctx := context.Background()
	r := create(t, e, map[string][]byte{"a": []byte("1"), "b": []byte("2")}, nil, time.Hour)
	w := sessionstore.FieldWrite{Set: []sessionstore.Field{{Name: "a", Value: []byte("A")}, {Name: "c", Value: []byte("C")}}, Delete: []string{"b", "absent"}}
	if err := e.store.SetFields(ctx, r.ID, 0, w); err != nil {
		t.Fatalf("SetFields = %v, want nil", err)
	}
	got := get(t, e, r.ID)
	wantMap(t, "Fields", got.Fields, map[string][]byte{"a": []byte("A"), "c": []byte("C")})
	if got.Version != 2 {
		t.Errorf("Version = %d, want 2", got.Version)
	}

	cond := sessionstore.FieldWrite{Set: []sessionstore.Field{{Name: "d", Value: []byte("D")}, {Name: "a", Value: []byte("X")}}, IfAbsent: true}
	wantErr(t, "SetFields(IfAbsent, present)", e.store.SetFields(ctx, r.ID, 0, cond), sessionstore.ErrConflict)
	got = get(t, e, r.ID)
	wantMap(t, "Fields after conflict", got.Fields, map[string][]byte{"a": []byte("A"), "c": []byte("C")})
	if got.Version != 2 {
		t.Errorf("Version after conflict = %d, want 2", got.Version)
	}

	cond = sessionstore.FieldWrite{Set: []sessionstore.Field{{Name: "d", Value: []byte("D")}}, IfAbsent: true}
	if err := e.store.SetFields(ctx, r.ID, 0, cond); err != nil {
		t.Fatalf("SetFields(IfAbsent, absent) = %v, want nil", err)
	}
	wantMap(t, "Fields", get(t, e, r.ID).Fields, map[string][]byte{"a": []byte("A"), "c": []byte("C"), "d": []byte("D")})

	// The store keeps its own copy of what it is given.
	buf := []byte("mutable")
	if err := e.store.SetFields(ctx, r.ID, 0, sessionstore.FieldWrite{Set: []sessionstore.Field{{Name: "m", Value: buf}}}); err != nil {
		t.Fatal(err)
	}
	buf[0] = 'X'
	if got := get(t, e, r.ID).Fields["m"]; string(got) != "mutable" {
		t.Errorf("Fields[m] = %q after the caller changed its slice, want %q", got, "mutable")
	}
}

// mergeResult is what a MergeCookies did: the cookies it evicted, and the
// record's version after it.
type mergeResult struct {
	Version uint64
	Evicted int
}

func merge(t *testing.T, e env, id string, m sessionstore.CookieMerge) mergeResult {
	t.Helper()
	evicted, err := e.store.MergeCookies(context.Background(), id, 0, m)
	if err != nil {
		t.Fatalf("MergeCookies = %v, want nil", err)
	}
	return mergeResult{Version: get(t, e, id).Version, Evicted: evicted}
}

func set(kv ...string) []sessionstore.Field {
	var fs []sessionstore.Field
	for i := 0; i+1 < len(kv); i += 2 {
		fs = append(fs, sessionstore.Field{Name: kv[i], Value: []byte(kv[i+1])})
	}
	return fs
}

func storeMergeCookies(t *testing.T, e env) {
	r := create(t, e, map[string][]byte{"f": []byte("F")}, nil, time.Hour)
	res := merge(t, e, r.ID, sessionstore.CookieMerge{Set: set("a", "1", "b", "2", "c", "3")})
	if res.Version != 2 || res.Evicted != 0 {
		t.Errorf("MergeCookies = %+v, want {Version 2, Evicted 0}", res)
	}
	merge(t, e, r.ID, sessionstore.CookieMerge{Set: set("a", "1b"), Delete: []string{"b", "absent"}})
	got := get(t, e, r.ID)
	wantMap(t, "Cookies", got.Cookies, map[string][]byte{"a": []byte("1b"), "c": []byte("3")})
	wantMap(t, "Fields", got.Fields, map[string][]byte{"f": []byte("F")})

	// Prune removes only an unchanged value.
	merge(t, e, r.ID, sessionstore.CookieMerge{Prune: set("a", "1", "c", "3")})
	wantMap(t, "Cookies after prune", get(t, e, r.ID).Cookies, map[string][]byte{"a": []byte("1b")})

	// A name both set and deleted ends up deleted.
	merge(t, e, r.ID, sessionstore.CookieMerge{Set: set("d", "4"), Delete: []string{"d"}})
	got = get(t, e, r.ID)
	wantMap(t, "Cookies after set+delete", got.Cookies, map[string][]byte{"a": []byte("1b")})
	if got.Version != 5 {
		t.Errorf("Version = %d, want 5", got.Version)
	}
}

func storeCookieLimit(t *testing.T, e env) {
	r := create(t, e, nil, nil, time.Hour)
	evicted := 0
	for i := 1; i <= 5; i++ {
		evicted += merge(t, e, r.ID, sessionstore.CookieMerge{Set: set(fmt.Sprint("c", i), "v"), Limit: 3}).Evicted
	}
	if evicted != 2 {
		t.Errorf("evicted %d, want 2", evicted)
	}
	wantMap(t, "Cookies", get(t, e, r.ID).Cookies, map[string][]byte{"c3": []byte("v"), "c4": []byte("v"), "c5": []byte("v")})

	// Re-setting c3 makes it the most recent: c4 goes next.
	merge(t, e, r.ID, sessionstore.CookieMerge{Set: set("c3", "w"), Limit: 3})
	res := merge(t, e, r.ID, sessionstore.CookieMerge{Set: set("c6", "v"), Limit: 3})
	if res.Evicted != 1 {
		t.Errorf("Evicted = %d, want 1", res.Evicted)
	}
	wantMap(t, "Cookies", get(t, e, r.ID).Cookies, map[string][]byte{"c3": []byte("w"), "c5": []byte("v"), "c6": []byte("v")})

	// One merge larger than the limit keeps its last cookies.
	res = merge(t, e, r.ID, sessionstore.CookieMerge{Set: set("x1", "v", "x2", "v", "x3", "v", "x4", "v"), Limit: 3})
	if res.Evicted != 4 {
		t.Errorf("Evicted = %d, want 4", res.Evicted)
	}
	wantMap(t, "Cookies", get(t, e, r.ID).Cookies, map[string][]byte{"x2": []byte("v"), "x3": []byte("v"), "x4": []byte("v")})
}

func storeConcurrentWriters(t *testing.T, e env) {
	r := create(t, e, nil, nil, time.Hour)
	const n = 16
	var wg sync.WaitGroup
	errs := make(chan error, 2*n)
	for i := range n {
		wg.Go(func() {
			name := fmt.Sprint("w", i)
			if _, err := e.store.MergeCookies(context.Background(), r.ID, 0, sessionstore.CookieMerge{Set: set(name, name), Limit: 100}); err != nil {
				errs <- err
			}
			if err := e.store.SetFields(context.Background(), r.ID, 0, sessionstore.FieldWrite{Set: set(name, name)}); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent write = %v, want nil", err)
	}
	got := get(t, e, r.ID)
	if len(got.Cookies) != n || len(got.Fields) != n || got.Version != 1+2*n {
		t.Errorf("after %d writers: %d cookies, %d fields, version %d; want %d, %d, %d", n, len(got.Cookies), len(got.Fields), got.Version, n, n, 1+2*n)
	}
}

func storeLease(t *testing.T, e env) {
	ctx := context.Background()
	r := create(t, e, nil, nil, time.Hour)
	st := e.store

	l1, err := st.Acquire(ctx, r.ID, "A", 10*time.Second)
	if err != nil || l1.Token != 1 || l1.Holder != "A" || l1.ID != r.ID || !l1.Expires.Equal(e.clock.Now().Add(10*time.Second)) {
		t.Fatalf("Acquire(A) = %+v, %v; want token 1, holder A, expiring in 10s", l1, err)
	}
	if got := get(t, e, r.ID).Lease; !sameLease(got, l1) {
		t.Errorf("Get().Lease = %+v, want %+v", got, l1)
	}
	_, err = st.Acquire(ctx, r.ID, "B", 10*time.Second)
	if !errors.Is(err, session.ErrLeaseHeld) {
		t.Errorf("Acquire(B) while A holds = %v, want ErrLeaseHeld", err)
	}
	var held *sessionkit.LeaseHeldError
	if errors.As(err, &held) && !held.Expires.Equal(l1.Expires) {
		t.Errorf("Acquire(B) while A holds = %v, want the lease expiring %v", err, l1.Expires)
	}
	if got := get(t, e, r.ID).Lease; !sameLease(got, l1) {
		t.Errorf("Get().Lease after Acquire(B) = %+v, want A's %+v", got, l1)
	}
	// An unfenced write is accepted while a lease is live.
	if err := st.SetFields(ctx, r.ID, 0, sessionstore.FieldWrite{Set: set("u", "1")}); err != nil {
		t.Errorf("unfenced SetFields under lease = %v, want nil", err)
	}

	e.clock.Advance(5 * time.Second)
	renewed, err := st.Acquire(ctx, r.ID, "A", 10*time.Second)
	if err != nil || renewed.Token != 1 || !renewed.Expires.Equal(e.clock.Now().Add(10*time.Second)) {
		t.Errorf("Acquire(A) again = %+v, %v; want token 1 extended", renewed, err)
	}
	e.clock.Advance(10 * time.Second)
	if got := get(t, e, r.ID).Lease; got.Token != 0 {
		t.Errorf("Get().Lease after expiry = %+v, want none", got)
	}
	// Expired, no successor: the old holder may still write.
	if err := st.SetFields(ctx, r.ID, l1.Token, sessionstore.FieldWrite{Set: set("a", "1")}); err != nil {
		t.Errorf("SetFields(fence 1, lease expired, no successor) = %v, want nil", err)
	}

	l2, err := st.Acquire(ctx, r.ID, "B", 10*time.Second)
	if err != nil || l2.Token != 2 {
		t.Fatalf("Acquire(B) after expiry = %+v, %v; want token 2", l2, err)
	}
	before := get(t, e, r.ID)
	wantErr(t, "SetFields(fence 1)", st.SetFields(ctx, r.ID, l1.Token, sessionstore.FieldWrite{Set: set("a", "stale")}), session.ErrStaleLease)
	_, err = st.MergeCookies(ctx, r.ID, l1.Token, sessionstore.CookieMerge{Set: set("c", "stale")})
	wantErr(t, "MergeCookies(fence 1)", err, session.ErrStaleLease)
	wantErr(t, "SetExpiry(fence 1)", st.SetExpiry(ctx, r.ID, l1.Token, e.clock.Now().Add(time.Minute)), session.ErrStaleLease)
	wantErr(t, "Delete(fence 1)", st.Delete(ctx, r.ID, l1.Token), session.ErrStaleLease)
	wantErr(t, "SetFields(fence 3, never granted)", st.SetFields(ctx, r.ID, 3, sessionstore.FieldWrite{Set: set("a", "x")}), session.ErrStaleLease)
	after := get(t, e, r.ID)
	if after.Version != before.Version || string(after.Fields["a"]) != "1" || len(after.Cookies) != 0 || !after.Expires.Equal(before.Expires) {
		t.Errorf("rejected writes changed the record: version %d→%d, a=%q, %d cookies", before.Version, after.Version, after.Fields["a"], len(after.Cookies))
	}
	if err := st.SetFields(ctx, r.ID, l2.Token, sessionstore.FieldWrite{Set: set("a", "2")}); err != nil {
		t.Errorf("SetFields(fence 2) = %v, want nil", err)
	}

	wantErr(t, "Release(lease 1)", st.Release(ctx, l1), session.ErrStaleLease)
	if got := get(t, e, r.ID).Lease; !sameLease(got, l2) {
		t.Errorf("Lease after stale Release = %+v, want %+v", got, l2)
	}
	if err := st.Release(ctx, l2); err != nil {
		t.Errorf("Release(lease 2) = %v, want nil", err)
	}
	if err := st.Release(ctx, l2); err != nil {
		t.Errorf("Release(lease 2) twice = %v, want nil", err)
	}
	if got := get(t, e, r.ID).Lease; got.Token != 0 {
		t.Errorf("Lease after Release = %+v, want none", got)
	}
	l3, err := st.Acquire(ctx, r.ID, "C", time.Second)
	if err != nil || l3.Token != 3 {
		t.Errorf("Acquire(C) after Release = %+v, %v; want token 3", l3, err)
	}

	if _, err := st.Acquire(ctx, r.ID, "D", 0); err == nil {
		t.Errorf("Acquire(ttl 0) = nil, want an error")
	}
	_, err = st.Acquire(ctx, sessionkit.NewID(), "A", time.Second)
	wantErr(t, "Acquire(unknown)", err, session.ErrNotFound)
}

func storeCrashedHolder(t *testing.T, e env) {
	ctx := context.Background()
	r := create(t, e, nil, nil, time.Hour)
	crashed, err := e.store.Acquire(ctx, r.ID, "crashed", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(30 * time.Second)
	next, err := e.store.Acquire(ctx, r.ID, "next", 30*time.Second)
	if err != nil || next.Token <= crashed.Token {
		t.Fatalf("Acquire after the holder's lease expired = %+v, %v; want a greater token than %d", next, err, crashed.Token)
	}
	_, err = e.store.MergeCookies(ctx, r.ID, crashed.Token, sessionstore.CookieMerge{Set: set("late", "x")})
	wantErr(t, "late write of the crashed holder", err, session.ErrStaleLease)
}

func storeDelete(t *testing.T, e env) {
	ctx := context.Background()
	r := create(t, e, map[string][]byte{"a": []byte("1")}, map[string][]byte{"c": []byte("1")}, time.Hour)
	if _, err := e.store.Acquire(ctx, r.ID, "A", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := e.store.Delete(ctx, r.ID, 0); err != nil {
		t.Fatalf("Delete = %v, want nil", err)
	}
	_, err := e.store.Get(ctx, r.ID, sessionstore.PartFields|sessionstore.PartCookies)
	wantErr(t, "Get(deleted)", err, session.ErrNotFound)
	wantErr(t, "Delete(deleted)", e.store.Delete(ctx, r.ID, 0), session.ErrNotFound)
	now := e.clock.Now()
	if err := e.store.Create(ctx, sessionstore.Record{ID: r.ID, Created: now, Expires: now.Add(time.Hour)}); err != nil {
		t.Fatalf("Create(after Delete) = %v, want nil", err)
	}
	got := get(t, e, r.ID)
	if len(got.Fields)+len(got.Cookies) != 0 || got.Lease.Token != 0 {
		t.Errorf("re-created record kept %d fields, %d cookies, lease %+v", len(got.Fields), len(got.Cookies), got.Lease)
	}
}

func storeIsolation(t *testing.T, e env) {
	ctx := context.Background()
	a := create(t, e, map[string][]byte{"f": []byte("a")}, nil, time.Hour)
	b := create(t, e, map[string][]byte{"f": []byte("b")}, nil, time.Hour)
	if _, err := e.store.Acquire(ctx, a.ID, "A", time.Minute); err != nil {
		t.Fatal(err)
	}
	merge(t, e, a.ID, sessionstore.CookieMerge{Set: set("c", "a")})
	if err := e.store.SetFields(ctx, a.ID, 0, sessionstore.FieldWrite{Set: set("f", "a2")}); err != nil {
		t.Fatal(err)
	}
	got := get(t, e, b.ID)
	wantMap(t, "other session's Fields", got.Fields, map[string][]byte{"f": []byte("b")})
	if len(got.Cookies) != 0 || got.Version != 1 || got.Lease.Token != 0 {
		t.Errorf("other session: %d cookies, version %d, lease %+v; want 0, 1, none", len(got.Cookies), got.Version, got.Lease)
	}
	if l, err := e.store.Acquire(ctx, b.ID, "B", time.Minute); err != nil || l.Token != 1 {
		t.Errorf("Acquire(other session) = %+v, %v; want token 1", l, err)
	}
}

func storeCanceledContext(t *testing.T, e env) {
	r := create(t, e, map[string][]byte{"a": []byte("1")}, nil, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	wantErr(t, "SetFields(canceled)", e.store.SetFields(ctx, r.ID, 0, sessionstore.FieldWrite{Set: set("a", "2")}), context.Canceled)
	_, err := e.store.MergeCookies(ctx, r.ID, 0, sessionstore.CookieMerge{Set: set("c", "2")})
	wantErr(t, "MergeCookies(canceled)", err, context.Canceled)
	_, err = e.store.Acquire(ctx, r.ID, "A", time.Second)
	wantErr(t, "Acquire(canceled)", err, context.Canceled)
	got := get(t, e, r.ID)
	if got.Version != 1 || string(got.Fields["a"]) != "1" || len(got.Cookies) != 0 || got.Lease.Token != 0 {
		t.Errorf("canceled calls changed the record: version %d, a=%q, %d cookies, lease %+v", got.Version, got.Fields["a"], len(got.Cookies), got.Lease)
	}
}
