package classify

import (
	"bytes"
	"net/http"
	"strings"
)

// bodyKind is what a response body is, for marker matching.
type bodyKind uint8

const (
	kindOther   bodyKind = iota // any other type: never inspected
	kindText                    // text/plain: only the agent-token rule reads it
	kindHTML                    // text/html, application/xhtml+xml
	kindJSON                    // application/json, */*+json
	kindUnknown                 // no Content-Type: decided from the head
)

// kindOf returns the kind a response's Content-Type declares.
func kindOf(h http.Header) bodyKind {
	vs := h["Content-Type"]
	if len(vs) == 0 {
		return kindUnknown
	}
	mt, _ := cutByte(vs[0], ';')
	mt = trimOWS(mt)
	switch {
	case mt == "":
		return kindUnknown
	case strings.EqualFold(mt, "text/html"), strings.EqualFold(mt, "application/xhtml+xml"):
		return kindHTML
	case strings.EqualFold(mt, "application/json"), strings.EqualFold(mt, "text/json"),
		len(mt) > 5 && strings.EqualFold(mt[len(mt)-5:], "+json"):
		return kindJSON
	case strings.EqualFold(mt, "text/plain"):
		return kindText
	}
	return kindOther
}

// sniffKind decides the kind of an untyped body from its lower-cased head:
// HTML when it starts (after white space and a byte-order mark) with a tag
// or comment that net/http's sniffer takes for HTML, JSON when it starts
// with an object or array, plain text otherwise.
func sniffKind(folded []byte) bodyKind {
	head := bytes.TrimPrefix(folded, []byte("\xef\xbb\xbf"))
	if len(head) == 0 {
		return kindText
	}
	if strings.HasPrefix(http.DetectContentType(head), "text/html") {
		return kindHTML
	}
	head = bytes.TrimLeft(head, " \t\r\n")
	if len(head) > 0 && (head[0] == '{' || head[0] == '[') {
		return kindJSON
	}
	return kindText
}
