package egress

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"
)

// A dial that reaches the DNS cache after the pool closed starts no lookup:
// Close has already waited for the lookups in flight, and one started now
// would outlive it.
func TestDNSLookupAfterClose(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0") // a server that never answers
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	d, err := newDNSCache(DNSConfig{Servers: []string{pc.LocalAddr().String()}, HostsFile: "/nonexistent"}, time.Now, net.DefaultResolver)
	if err != nil {
		t.Fatal(err)
	}
	d.close()
	_, err = d.lookup(context.Background(), "www.example.test")
	var de *net.DNSError
	if !errors.As(err, &de) || de.IsNotFound || !strings.Contains(de.Err, "closed") {
		t.Errorf("lookup after close = %v, want a DNS error saying the pool is closed", err)
	}
	if st := d.stats(); st.Queries != 0 || st.Misses != 0 {
		t.Errorf("after close: %d queries, %d misses; want none", st.Queries, st.Misses)
	}
}
