package session

import (
	"bytes"
	"net/http"
	"reflect"
	"testing"
	"time"
)

func TestCodecRoundTrip(t *testing.T) {
	entries := []*entry{
		{Name: "a", Value: "1", Domain: "example.com", Path: "/", Creation: time.Unix(1, 2).UTC()},
		{Name: "", Value: "", Domain: "127.0.0.1", Path: "/x/y", HostOnly: true, Secure: true, HTTPOnly: true, Quoted: true,
			SameSite: http.SameSiteStrictMode, Persistent: true, Expires: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC), Seq: 1 << 40},
		{Name: "old", Value: "v", Domain: "d", Path: "/", Persistent: true, Expires: time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC)},
	}
	for _, e := range entries {
		got, err := decodeEntry(encodeEntry(e))
		if err != nil || !reflect.DeepEqual(got, e) {
			t.Errorf("decodeEntry(encodeEntry(%+v)) = %+v, %v", e, got, err)
		}
	}
	for _, tok := range []Token{
		{Value: "v"},
		{Type: "Bearer", Value: "v", Refresh: "r", Expires: time.Unix(1700000000, 5).UTC()},
	} {
		got, err := decodeToken(encodeToken(tok))
		if err != nil || got != tok {
			t.Errorf("decodeToken(encodeToken(%v)) = %v, %v", tok, got, err)
		}
	}
	for _, vs := range [][]string{{""}, {"a", "b", ""}} {
		got, err := decodeHeader(encodeHeader(vs))
		if err != nil || !reflect.DeepEqual(got, vs) {
			t.Errorf("decodeHeader(encodeHeader(%q)) = %q, %v", vs, got, err)
		}
	}
	if got, err := decodeBinding(encodeBinding("ep")); err != nil || got != "ep" {
		t.Errorf("decodeBinding(encodeBinding(ep)) = %q, %v", got, err)
	}
}

func TestCodecRejects(t *testing.T) {
	valid := encodeEntry(&entry{Name: "a", Value: "1", Domain: "d", Path: "/"})
	for name, b := range map[string][]byte{
		"empty":           nil,
		"version":         append([]byte{2}, valid[1:]...),
		"kind":            append([]byte{1, kindToken}, valid[2:]...),
		"truncated":       valid[:len(valid)-1],
		"zero tag":        {1, kindCookie, 0, 0},
		"long length":     {1, kindCookie, 1, 200, 'a'},
		"repeated tag":    append(bytes.Clone(valid), 1, 1, 'b'),
		"missing path":    {1, kindCookie, 1, 1, 'a', 2, 0, 3, 1, 'd', 5, 1, 0},
		"bad flags":       append(bytes.Clone(valid[:len(valid)-3]), 5, 2, 0x80, 0x80),
		"expiry mismatch": append(encodeEntry(&entry{Name: "a", Domain: "d", Path: "/"}), 7, 2, 0, 0),
		"bad nanos":       encodeEntryWithTime(8, []byte{0, 0x80, 0x94, 0xeb, 0xdc, 0x03}),
	} {
		if _, err := decodeEntry(b); err == nil {
			t.Errorf("decodeEntry(%s %x) = nil error, want one", name, b)
		}
	}
	if _, err := decodeToken([]byte{1, kindToken}); err == nil {
		t.Errorf("decodeToken(no value) = nil error, want one")
	}
	if _, err := decodeHeader([]byte{1, kindHeader}); err == nil {
		t.Errorf("decodeHeader(no values) = nil error, want one")
	}
	if _, err := decodeBinding([]byte{1, kindBinding, 1, 0}); err == nil {
		t.Errorf("decodeBinding(empty) = nil error, want one")
	}
}

// encodeEntryWithTime is a valid cookie followed by a raw time field.
func encodeEntryWithTime(tag byte, v []byte) []byte {
	b := encodeEntry(&entry{Name: "a", Domain: "d", Path: "/"})
	b = append(b, tag, byte(len(v)))
	return append(b, v...)
}

// FuzzDecode feeds arbitrary payloads to every decoder: none may panic,
// and whatever decodes must encode back to something that decodes the same.
func FuzzDecode(f *testing.F) {
	f.Add(encodeEntry(&entry{Name: "a", Value: "1", Domain: "example.com", Path: "/", Persistent: true, Expires: time.Unix(1e9, 0), Creation: time.Unix(1, 0), Seq: 3}))
	f.Add(encodeToken(Token{Type: "Bearer", Value: "v", Refresh: "r", Expires: time.Unix(1e9, 1)}))
	f.Add(encodeHeader([]string{"a", "b"}))
	f.Add(encodeBinding("ep-1"))
	f.Add([]byte{1, kindCookie, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		if e, err := decodeEntry(b); err == nil {
			again, err := decodeEntry(encodeEntry(e))
			if err != nil || !reflect.DeepEqual(again, e) {
				t.Errorf("cookie %+v does not round-trip: %+v, %v", e, again, err)
			}
		}
		if tok, err := decodeToken(b); err == nil {
			again, err := decodeToken(encodeToken(tok))
			if err != nil || again != tok {
				t.Errorf("token does not round-trip: %v", err)
			}
		}
		if vs, err := decodeHeader(b); err == nil {
			again, err := decodeHeader(encodeHeader(vs))
			if err != nil || !reflect.DeepEqual(again, vs) {
				t.Errorf("header %q does not round-trip: %q, %v", vs, again, err)
			}
		}
		if ep, err := decodeBinding(b); err == nil {
			again, err := decodeBinding(encodeBinding(ep))
			if err != nil || again != ep {
				t.Errorf("binding %q does not round-trip: %q, %v", ep, again, err)
			}
		}
	})
}
