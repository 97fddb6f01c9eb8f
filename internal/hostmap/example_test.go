package hostmap_test

import (
	"fmt"
	"time"

	"github.com/egresskit/egresskit/internal/hostmap"
)

// visit is a host's entry.
type visit struct {
	last   time.Time
	pinned bool
}

func Example() {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := hostmap.New[visit, struct{}](hostmap.Config[visit]{
		IdleTTL: time.Minute,
		Used:    func(v *visit) time.Time { return v.last },
		Keep:    func(v *visit, now time.Time) bool { return v.pinned },
	})
	for _, host := range []string{"a.example", "b.example", "c.example"} {
		sh := m.Shard(host)
		sh.Lock()
		if sh.Get(host) == nil {
			sh.Put(host, &visit{last: start, pinned: host == "b.example"})
		}
		sh.Unlock()
	}
	fmt.Println(m.Len(), "hosts")
	fmt.Println(m.Evict(start.Add(time.Minute)), "evicted")
	fmt.Println(m.Len(), "hosts")
	// Output:
	// 3 hosts
	// 2 evicted
	// 1 hosts
}
