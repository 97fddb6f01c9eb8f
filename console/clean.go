package console

import (
	"github.com/egresskit/egresskit/hoststate"
	"github.com/egresskit/egresskit/internal/haltrec"
)

// A Store may hold records that something else wrote (any worker of a
// fleet, anyone who reaches its Redis): the console cleans and bounds
// every field it reads before it shows it (see haltrec), so that a record
// is data, never markup or a control, and a page stays small.

// maxHost bounds a host key as shown.
const maxHost = 255

// cleanHalt is h with every field bounded and cleaned, for a host's page.
func cleanHalt(h hoststate.Halt) hoststate.Halt {
	h.Host = haltrec.Line(h.Host, maxHost)
	h.Worker = haltrec.Line(h.Worker, haltrec.MaxBy)
	h.Reason = haltrec.Clip(h.Reason, haltrec.MaxText)
	h.Evidence = haltrec.Clip(h.Evidence, haltrec.MaxText)
	h.URL = haltrec.Line(h.URL, haltrec.MaxURL)
	h.BodyHead = haltrec.Clip(h.BodyHead, haltrec.MaxBodyHead)
	h.Markers = markers(h.Markers, haltrec.MaxMarkers)
	return h
}

// queueHalt is h cut shorter, for the queue, which shows up to 100 hosts:
// the host's page shows the whole record.
func queueHalt(h hoststate.Halt) hoststate.Halt {
	h.Host = haltrec.Line(h.Host, maxHost)
	h.Worker = haltrec.Line(h.Worker, 64)
	h.Reason = haltrec.Line(h.Reason, 160)
	h.Evidence = haltrec.Line(h.Evidence, 160)
	h.URL = haltrec.Line(h.URL, 200)
	h.BodyHead = haltrec.Clip(h.BodyHead, 200)
	h.Markers = markers(h.Markers, 4)
	return h
}

func markers(ms []string, n int) []string {
	out := make([]string, 0, min(len(ms), n))
	for _, m := range ms[:min(len(ms), n)] {
		out = append(out, haltrec.Line(m, haltrec.MaxMarker))
	}
	return out
}

// cleanNote is n with every field bounded and cleaned.
func cleanNote(n hoststate.Note) hoststate.Note {
	n.Host = haltrec.Line(n.Host, maxHost)
	n.By = haltrec.Line(n.By, haltrec.MaxBy)
	n.Text = haltrec.Line(n.Text, haltrec.MaxText)
	return n
}
