package classify

import (
	"bytes"
	"testing"
)

// refFold is the obvious ASCII lower-casing foldInto must agree with.
func refFold(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		out[i] = foldByte(c)
	}
	return out
}

func FuzzFoldAndNeedle(f *testing.F) {
	f.Add([]byte("<TITLE>Just A Moment...</TITLE>"), "just a moment...")
	f.Add([]byte("\xff\xc0ZZ@[`{AZaz"), "az")
	f.Add(bytes.Repeat([]byte("_x"), 200), "_y")
	f.Fuzz(func(t *testing.T, hay []byte, s string) {
		got := make([]byte, len(hay))
		foldInto(got, hay)
		want := refFold(hay)
		if !bytes.Equal(got, want) {
			t.Fatalf("foldInto(%q) = %q, want %q", hay, got, want)
		}
		n := newNeedle(s)
		if n == nil {
			return
		}
		if got, want := n.in(want), bytes.Contains(want, n.b); got != want {
			t.Errorf("needle(%q).in(%q) = %v, want %v", s, hay, got, want)
		}
	})
}

func TestNeedleHostileBody(t *testing.T) {
	n := newNeedle("_cf_chl_opt")
	hay := bytes.Repeat([]byte("_cf_chl_op "), 400)
	if n.in(hay) {
		t.Error("found a needle that is absent")
	}
	hay = append(hay, "_cf_chl_opt"...)
	if !n.in(hay) {
		t.Error("missed a needle after many anchor misses")
	}
}
