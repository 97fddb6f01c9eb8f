package egress

import "strings"

// genCache maps host names to values with a bound: it keeps two
// generations of at most limit entries each; lookups promote entries from
// the old generation to the new one, and when the new one is full it
// becomes the old one. It is O(1) and close to LRU. A zero limit keeps
// nothing. Its owner's lock guards it.
type genCache[V any] struct {
	limit     int
	hot, cold map[string]V
}

// init sets the bound to size entries in all (at least one per
// generation); size 0 keeps nothing.
func (c *genCache[V]) init(size int) {
	if size > 0 {
		c.limit = max(1, size/2)
	}
	c.reset()
}

// reset forgets every entry.
func (c *genCache[V]) reset() {
	if c.limit == 0 {
		return
	}
	c.hot, c.cold = make(map[string]V), nil
}

func (c *genCache[V]) get(name string) (V, bool) {
	if v, ok := c.hot[name]; ok {
		return v, true
	}
	if v, ok := c.cold[name]; ok {
		c.put(name, v)
		return v, true
	}
	var zero V
	return zero, false
}

func (c *genCache[V]) put(name string, v V) {
	if c.limit == 0 {
		return
	}
	if len(c.hot) >= c.limit {
		c.cold, c.hot = c.hot, make(map[string]V, c.limit)
	}
	c.hot[strings.Clone(name)] = v
}

// len returns the number of entries kept.
func (c *genCache[V]) len() int { return len(c.hot) + len(c.cold) }
