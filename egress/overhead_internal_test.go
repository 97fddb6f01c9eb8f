package egress

import (
	"bytes"
	"io"
	"net/http"
	"testing"
)

// memRT answers every request with an empty 200, in memory.
type memRT struct{}

func (memRT) RoundTrip(req *http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(bytes.NewReader(nil)), Request: req}, nil
}

// BenchmarkPoolOverhead is what the pool adds to a request that its
// endpoint's transport answers in memory (a scheme registered on the
// transport): selection, the slot, the health record and the body
// wrapper, without the network's noise. impl=transport is the endpoint's
// transport alone.
func BenchmarkPoolOverhead(b *testing.B) {
	pool, err := New(Config{Endpoints: []Endpoint{{ID: "direct"}}})
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	e := pool.byID["direct"]
	e.rt.RegisterProtocol("mem", memRT{})
	req, err := http.NewRequest(http.MethodGet, "mem://127.0.0.1:8080/", nil)
	if err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct {
		name string
		rt   http.RoundTripper
	}{{"transport", e.rt}, {"pool", pool}} {
		b.Run("impl="+c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				resp, err := c.rt.RoundTrip(req)
				if err != nil {
					b.Fatal(err)
				}
				resp.Body.Close()
			}
		})
	}
}
