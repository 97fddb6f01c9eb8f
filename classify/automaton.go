package classify

// automaton finds every needle of a fixed set in one pass over a body head,
// ignoring ASCII case: an Aho–Corasick automaton compiled to a DFA over
// byte classes. Each byte costs one class lookup and one transition; the
// bytes are read where they lie, neither copied nor lower-cased. It is built
// once per classifier and only read afterwards, so it is safe for
// concurrent use.
type automaton struct {
	// class maps a byte to its class: upper- and lower-case forms of an
	// ASCII letter share one, every byte that occurs in no needle is class
	// 0.
	class [256]uint8
	// stride is the number of classes; a state's transitions are
	// next[s : s+stride], so state ids are premultiplied by stride.
	stride uint32
	// next is the transition table of the DFA: failure links resolved.
	next []uint32
	// matchFrom is the first (premultiplied) id of the states at which a
	// needle ends: states are numbered so that those come last, and the
	// scan tests one comparison per byte.
	matchFrom uint32
	// out lists, for each match state (index (s-matchFrom)/stride), the
	// needles that end there, failure chain included.
	out [][]uint16
	// maxLen is the length of the longest needle.
	maxLen int
}

// newAutomaton compiles needles (lower-case ASCII case folding is applied
// here; an empty needle is never found). Needle i is reported as i.
func newAutomaton(needles []string) *automaton {
	a := &automaton{maxLen: 1}
	// Byte classes: one per distinct folded byte used by a needle.
	var classOf [256]uint8
	n := 1
	for _, s := range needles {
		for i := 0; i < len(s); i++ {
			c := foldByte(s[i])
			if classOf[c] == 0 {
				if n == 256 {
					panic("classify: too many byte classes") // impossible: 256 bytes fold to fewer
				}
				classOf[c] = uint8(n)
				n++
			}
		}
	}
	for b := range 256 {
		a.class[b] = classOf[foldByte(byte(b))]
	}
	stride := n

	// The trie, with states in creation order (0 is the root).
	type node struct {
		child []int32 // by class; -1 when absent
		fail  int
		out   []uint16
	}
	newNode := func() node {
		ch := make([]int32, stride)
		for i := range ch {
			ch[i] = -1
		}
		return node{child: ch}
	}
	nodes := []node{newNode()}
	for id, s := range needles {
		a.maxLen = max(a.maxLen, len(s))
		if s == "" {
			continue
		}
		cur := 0
		for i := 0; i < len(s); i++ {
			c := a.class[s[i]]
			if nodes[cur].child[c] < 0 {
				nodes[cur].child[c] = int32(len(nodes))
				nodes = append(nodes, newNode())
			}
			cur = int(nodes[cur].child[c])
		}
		nodes[cur].out = append(nodes[cur].out, uint16(id))
	}
	// Breadth-first: failure links, inherited outputs and the complete
	// transition function (missing children point where the failure state
	// goes).
	queue := make([]int, 0, len(nodes))
	for c := range stride {
		if ch := nodes[0].child[c]; ch < 0 {
			nodes[0].child[c] = 0
		} else {
			nodes[ch].fail = 0
			queue = append(queue, int(ch))
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		f := nodes[s].fail
		nodes[s].out = append(nodes[s].out, nodes[f].out...)
		for c := range stride {
			ch := nodes[s].child[c]
			if ch < 0 {
				nodes[s].child[c] = nodes[f].child[c]
				continue
			}
			nodes[ch].fail = int(nodes[f].child[c])
			queue = append(queue, int(ch))
		}
	}
	// Renumber: states without output first (the root stays 0), match
	// states last.
	order := make([]int, len(nodes)) // old id -> new index
	next := 0
	for i := range nodes {
		if len(nodes[i].out) == 0 {
			order[i] = next
			next++
		}
	}
	firstMatch := next
	a.out = make([][]uint16, 0, len(nodes)-firstMatch)
	for i := range nodes {
		if len(nodes[i].out) > 0 {
			order[i] = next
			next++
			a.out = append(a.out, nodes[i].out)
		}
	}
	a.stride = uint32(stride)
	a.matchFrom = uint32(firstMatch * stride)
	a.next = make([]uint32, len(nodes)*stride)
	for i := range nodes {
		row := order[i] * stride
		for c := range stride {
			a.next[row+c] = uint32(order[nodes[i].child[c]] * stride)
		}
	}
	return a
}

// scan runs the automaton over hay and records in ends, for every needle
// found, the offset just past its first occurrence; ends[i] stays 0 for a
// needle not found. ends must have one element per needle and be zero.
//
// A long hay is cut into four lanes scanned in step, each from the start
// state and overlapping the previous lane by the longest needle less one
// byte, so that every occurrence lies whole in some lane: the four
// transitions of a step do not wait on each other, which a single chain of
// table look-ups would.
func (a *automaton) scan(hay []byte, ends []int32) {
	const lanes = 4
	overlap := a.maxLen - 1
	q := len(hay) / lanes
	if q < 2*overlap+64 {
		a.run(hay, 0, 0, ends)
		return
	}
	l0 := hay[:q]
	l1 := hay[q-overlap : 2*q]
	l2 := hay[2*q-overlap : 3*q]
	l3 := hay[3*q-overlap:]
	n := len(l0) // the shortest lane
	l1, l2, l3 = l1[:n], l2[:n], l3[:n]
	o1, o2, o3 := q-overlap, 2*q-overlap, 3*q-overlap // lane offsets in hay
	var s0, s1, s2, s3 uint32
	next, class, from := a.next, &a.class, a.matchFrom
	for i := range l0 {
		s0 = next[s0+uint32(class[l0[i]])]
		s1 = next[s1+uint32(class[l1[i]])]
		s2 = next[s2+uint32(class[l2[i]])]
		s3 = next[s3+uint32(class[l3[i]])]
		if s0 >= from || s1 >= from || s2 >= from || s3 >= from {
			a.record(s0, i+1, ends)
			a.record(s1, o1+i+1, ends)
			a.record(s2, o2+i+1, ends)
			a.record(s3, o3+i+1, ends)
		}
	}
	// The longer lanes' tails, each from where its lane stopped.
	a.run(hay[o1+n:2*q], s1, o1+n, ends)
	a.run(hay[o2+n:3*q], s2, o2+n, ends)
	a.run(hay[o3+n:], s3, o3+n, ends)
}

// run continues the automaton from state s over seg, which starts at offset
// off of the hay.
func (a *automaton) run(seg []byte, s uint32, off int, ends []int32) {
	next, class, from := a.next, &a.class, a.matchFrom
	for i, b := range seg {
		s = next[s+uint32(class[b])]
		if s >= from {
			a.record(s, off+i+1, ends)
		}
	}
}

// record notes that the needles ending at state s (if any) end at offset
// end, keeping the earliest end of each.
func (a *automaton) record(s uint32, end int, ends []int32) {
	if s < a.matchFrom {
		return
	}
	for _, id := range a.out[(s-a.matchFrom)/a.stride] {
		if e := ends[id]; e == 0 || int32(end) < e {
			ends[id] = int32(end)
		}
	}
}
