package classify

import "strings"

// skipScan finds every needle of a set in a body head, ignoring ASCII
// case, without reading most of its bytes: a multi-pattern Horspool search
// (Wu–Manber). A window as long as the shortest needle (m bytes) slides
// over the head; a hash of its last three bytes (case folded) says how far
// it can move before it could hold an anchor, at most m-1: each needle is
// represented by one m-byte substring, its anchor. Only where that shift
// is 0 are the needles whose anchors end in a 3-gram of that hash compared
// with the head. On ordinary HTML this reads one 3-gram every 8 or 9
// bytes, where the automaton reads every byte.
//
// It is built once per classifier and only read afterwards, so it is safe
// for concurrent use.
type skipScan struct {
	// c0, c1 and c2 map the window's last byte, the one before and the
	// one before that to their share of the 3-gram's hash: the byte's
	// class (ASCII case folded; all bytes in no anchor share one), hashed.
	// A 3-gram a, b, c hashes to (c2[a] ^ c1[b] ^ c0[c]) & hashMask.
	c0, c1, c2 [256]uint16
	// shift holds, for each hash, how far a window ending in a 3-gram of
	// that hash moves: the least shift of the 3-grams that share it.
	shift [hashMask + 1]uint8
	// bucket holds, for a hash of shift 0, 1 + the index into cands of
	// the needles whose anchors end in a 3-gram of that hash.
	bucket [hashMask + 1]uint8
	cands  [][]uint16 // indexes into needles
	// needles are the searched strings, lower-cased; anchor[i] is the
	// offset of needle i's anchor in it, and ids[i] the id scan reports
	// it as.
	needles []string
	anchor  []int
	ids     []int
	// m is the window: the length of the shortest needle.
	m int
}

// hashMask bounds the 3-gram hash: 4096 entries keep shift and bucket
// small enough to stay in L1. Collisions only shorten shifts.
const hashMask = 1<<12 - 1

// minSkipWindow is the shortest needle for which newSkipScan builds a
// search: below it the windows are too short to beat the automaton.
const minSkipWindow = 6

// newSkipScan compiles needles (lower-case; none shorter than
// minSkipWindow, or it returns nil), each reported as the id at the same
// index of ids. A needle set whose anchors end in more than 255 hashes
// also gets nil.
func newSkipScan(needles []string, ids []int) *skipScan {
	if len(needles) == 0 {
		return nil
	}
	m := 255
	for _, s := range needles {
		m = min(m, len(s))
	}
	if m < minSkipWindow {
		return nil
	}
	k := &skipScan{m: m, needles: needles, ids: ids}
	anchors := make([]string, len(needles))
	for i, s := range needles {
		o := bestAnchor(s, m)
		k.anchor = append(k.anchor, o)
		anchors[i] = s[o : o+m]
	}
	// Classes: one per distinct byte of the anchors.
	var classOf [256]int
	n := 1
	for _, s := range anchors {
		for i := range m {
			if classOf[s[i]] == 0 {
				classOf[s[i]] = n
				n++
			}
		}
	}
	// Hash codes of a class in each position: fixed pseudo-random 12-bit
	// values (xorshift), so that the hash is the same on every run.
	code := make([][3]uint16, n)
	x := uint32(2463534242)
	for c := range code {
		for i := range 3 {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			code[c][i] = uint16(x & hashMask)
		}
	}
	for b := range 256 {
		c := code[classOf[foldByte(byte(b))]]
		k.c0[b], k.c1[b], k.c2[b] = c[0], c[1], c[2]
	}
	hash := func(a, b, c int) int {
		return int(code[a][2] ^ code[b][1] ^ code[c][0])
	}
	for i := range k.shift {
		k.shift[i] = uint8(m)
	}
	lower := func(h, s int) {
		k.shift[h] = min(k.shift[h], uint8(s))
	}
	for _, s := range anchors {
		p := func(j int) int { return classOf[s[j]] }
		for a := range n {
			// An anchor starting at the window's last byte, or the one
			// before: any bytes before it.
			lower(hash(a, p(0), p(1)), m-2)
			for b := range n {
				lower(hash(a, b, p(0)), m-1)
			}
		}
		// An anchor whose bytes j-2 .. j are the window's last three.
		for j := 2; j < m; j++ {
			lower(hash(p(j-2), p(j-1), p(j)), m-1-j)
		}
	}
	for i, s := range anchors {
		h := hash(classOf[s[m-3]], classOf[s[m-2]], classOf[s[m-1]])
		if k.bucket[h] == 0 {
			if len(k.cands) == 255 {
				return nil
			}
			k.cands = append(k.cands, nil)
			k.bucket[h] = uint8(len(k.cands))
		}
		b := k.bucket[h] - 1
		k.cands[b] = append(k.cands[b], uint16(i))
	}
	return k
}

// bestAnchor returns the offset of the m-byte substring of s whose last
// 3-gram is likely the rarest in HTML, so that windows of shift 0, each a
// comparison, are rare: by commonness, the earliest on a tie.
func bestAnchor(s string, m int) int {
	best, cost := 0, 1<<30
	for o := 0; o+m <= len(s); o++ {
		c := 0
		for _, b := range []byte(s[o+m-3 : o+m]) {
			c += commonness(b)
		}
		if c < cost {
			best, cost = o, c
		}
	}
	return best
}

// commonness ranks how often a (lower-case) byte occurs in HTML, roughly:
// markup punctuation, white space and the most frequent English letters
// first, rare punctuation last.
func commonness(b byte) int {
	switch {
	case strings.IndexByte(" \n<>/=\"", b) >= 0, strings.IndexByte("etaoinsrhl", b) >= 0:
		return 3
	case 'a' <= b && b <= 'z', '0' <= b && b <= '9':
		return 2
	case strings.IndexByte("-_.:;'", b) >= 0:
		return 1
	}
	return 0
}

// hashAt returns the hash of the 3-gram that ends at hay[e].
func (k *skipScan) hashAt(hay []byte, e int) int {
	return int((k.c2[hay[e-2]] ^ k.c1[hay[e-1]] ^ k.c0[hay[e]]) & hashMask)
}

// scan records in ends, for every needle found in hay, the offset just
// past its first occurrence, as automaton.scan does (ends is indexed by
// the ids given to newSkipScan and only written at those). It reports
// whether it found any needle.
//
// The windows are cut into four lanes slid in step, so that the look-ups
// of four windows are in flight at once: a window's shift depends on the
// bytes it reads, so one window alone waits on its own loads at every
// step. Each lane stops at its first window past the lane's end.
func (k *skipScan) scan(hay []byte, ends []int32) bool {
	m := k.m
	q := (len(hay) - m + 1) / 4 // window starts per lane
	if q < 4*m {
		return k.run(hay, m-1, len(hay), ends)
	}
	// Lane i's windows end at e_i, from m-1+i*q up to b_i (exclusive);
	// lane 3's up to the end of hay.
	e0, e1, e2, e3 := m-1, m-1+q, m-1+2*q, m-1+3*q
	b0, b1, b2 := e1, e2, e3
	c0, c1, c2, shift := &k.c0, &k.c1, &k.c2, &k.shift
	found := false
	for e0 < b0 && e1 < b1 && e2 < b2 && e3 < len(hay) {
		s0 := shift[(c2[hay[e0-2]]^c1[hay[e0-1]]^c0[hay[e0]])&hashMask]
		s1 := shift[(c2[hay[e1-2]]^c1[hay[e1-1]]^c0[hay[e1]])&hashMask]
		s2 := shift[(c2[hay[e2-2]]^c1[hay[e2-1]]^c0[hay[e2]])&hashMask]
		s3 := shift[(c2[hay[e3-2]]^c1[hay[e3-1]]^c0[hay[e3]])&hashMask]
		if s0 == 0 || s1 == 0 || s2 == 0 || s3 == 0 {
			found = k.verify4(hay, [4]int{e0, e1, e2, e3}, [4]uint8{s0, s1, s2, s3}, ends) || found
			s0, s1, s2, s3 = max(s0, 1), max(s1, 1), max(s2, 1), max(s3, 1)
		}
		e0 += int(s0)
		e1 += int(s1)
		e2 += int(s2)
		e3 += int(s3)
	}
	// Each lane's rest, from where it stopped.
	found = k.run(hay, e0, b0, ends) || found
	found = k.run(hay, e1, b1, ends) || found
	found = k.run(hay, e2, b2, ends) || found
	return k.run(hay, e3, len(hay), ends) || found
}

// verify4 verifies the windows of scan's lanes whose shift is 0.
//
//go:noinline
func (k *skipScan) verify4(hay []byte, e [4]int, s [4]uint8, ends []int32) bool {
	found := false
	for i := range e {
		if s[i] == 0 {
			found = k.verify(hay, e[i], ends) || found
		}
	}
	return found
}

// run slides one window over hay, its end from e up to end (exclusive).
func (k *skipScan) run(hay []byte, e, end int, ends []int32) bool {
	found := false
	for e < end {
		s := k.shift[k.hashAt(hay, e)]
		if s == 0 {
			found = k.verify(hay, e, ends) || found
			s = 1
		}
		e += int(s)
	}
	return found
}

// verify compares with hay the needles that could occur in the window
// ending at e, whose shift is 0, and records those that do.
func (k *skipScan) verify(hay []byte, e int, ends []int32) bool {
	found := false
	for _, i := range k.cands[k.bucket[k.hashAt(hay, e)]-1] {
		s := k.needles[i]
		p := e - (k.m - 1) - k.anchor[i] // where the needle would start
		if p < 0 || len(hay)-p < len(s) || !equalFold(hay[p:p+len(s)], s) {
			continue
		}
		found = true
		id := k.ids[i]
		if end := int32(p + len(s)); ends[id] == 0 || end < ends[id] {
			ends[id] = end
		}
	}
	return found
}

// equalFold reports whether b equals s (lower-case) ignoring ASCII case.
func equalFold(b []byte, s string) bool {
	for i := range len(s) {
		if foldByte(b[i]) != s[i] {
			return false
		}
	}
	return true
}
