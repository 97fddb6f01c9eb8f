package telemetry

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// An audit line is one JSON object on one line:
//
//	{"seq":N,"time":"...","kind":"...",<fields>,"prev":"<hex>","hash":"<hex>"}
//
// hash is the SHA-256 of the line up to, not including, `,"hash":"`; prev
// is the hash of the line before (genesis for the first line of a log).
// The fixed tail lets a Verifier find both without decoding the JSON.

// genesis is the prev of the first line of an audit log: 64 zeros.
const genesis = "0000000000000000000000000000000000000000000000000000000000000000"

const (
	prevKey    = `,"prev":"`
	hashKey    = `,"hash":"`
	hashLen    = 64
	hashTail   = len(hashKey) + hashLen + len(`"}`)
	prevTail   = len(prevKey) + hashLen + len(`"`)
	minLineLen = len(`{"seq":1`) + prevTail + hashTail
)

// reservedKeys may not be used as field names in Record.
var reservedKeys = map[string]bool{"seq": true, "time": true, "kind": true, "prev": true, "hash": true}

// lineBuilder encodes one audit line. The fields (from "time" on) are
// built first, in b; finish puts the seq before them and prev and hash
// after, in out, once the writer holds the file's lock and knows the
// chain's end.
type lineBuilder struct{ b, out []byte }

func (l *lineBuilder) start(t time.Time, kind string) {
	l.b = append(l.b[:0], `,"time":"`...)
	l.b = t.UTC().AppendFormat(l.b, time.RFC3339Nano)
	l.b = append(l.b, `","kind":`...)
	l.b = appendJSONString(l.b, kind)
}

func (l *lineBuilder) key(k string) {
	l.b = append(l.b, ',')
	l.b = appendJSONString(l.b, k)
	l.b = append(l.b, ':')
}

func (l *lineBuilder) str(k, v string) {
	l.key(k)
	l.b = appendJSONString(l.b, Redactor{}.RedactString(v))
}

func (l *lineBuilder) int(k string, v int64) {
	l.key(k)
	l.b = strconv.AppendInt(l.b, v, 10)
}

func (l *lineBuilder) bool(k string, v bool) {
	l.key(k)
	l.b = strconv.AppendBool(l.b, v)
}

func (l *lineBuilder) strs(k string, vs []string) {
	l.key(k)
	l.strsValue(vs)
}

func (l *lineBuilder) strsValue(vs []string) {
	l.b = append(l.b, '[')
	for i, v := range vs {
		if i > 0 {
			l.b = append(l.b, ',')
		}
		l.b = appendJSONString(l.b, Redactor{}.RedactString(v))
	}
	l.b = append(l.b, ']')
}

// attr encodes a slog.Attr as a field: strings (and the text of anything
// else) are redacted; durations are written as Go duration strings, times
// in RFC 3339, groups as objects.
func (l *lineBuilder) attr(a slog.Attr) {
	l.key(a.Key)
	l.value(a.Value)
}

func (l *lineBuilder) value(v slog.Value) {
	v = v.Resolve()
	switch v.Kind() {
	case slog.KindString:
		l.b = appendJSONString(l.b, Redactor{}.RedactString(v.String()))
	case slog.KindInt64:
		l.b = strconv.AppendInt(l.b, v.Int64(), 10)
	case slog.KindUint64:
		l.b = strconv.AppendUint(l.b, v.Uint64(), 10)
	case slog.KindFloat64:
		f := v.Float64()
		if math.IsNaN(f) || math.IsInf(f, 0) {
			l.b = appendJSONString(l.b, strconv.FormatFloat(f, 'g', -1, 64))
		} else {
			l.b = strconv.AppendFloat(l.b, f, 'g', -1, 64)
		}
	case slog.KindBool:
		l.b = strconv.AppendBool(l.b, v.Bool())
	case slog.KindDuration:
		l.b = appendJSONString(l.b, v.Duration().String())
	case slog.KindTime:
		l.b = append(l.b, '"')
		l.b = v.Time().UTC().AppendFormat(l.b, time.RFC3339Nano)
		l.b = append(l.b, '"')
	case slog.KindGroup:
		l.b = append(l.b, '{')
		for i, a := range v.Group() {
			if i > 0 {
				l.b = append(l.b, ',')
			}
			l.b = appendJSONString(l.b, a.Key)
			l.b = append(l.b, ':')
			l.value(a.Value)
		}
		l.b = append(l.b, '}')
	default: // KindAny
		switch x := v.Any().(type) {
		case []string:
			l.strsValue(x)
		case *url.URL:
			l.b = appendJSONString(l.b, Redactor{}.RedactURL(x))
		case url.URL:
			l.b = appendJSONString(l.b, Redactor{}.RedactURL(&x))
		case http.Header:
			l.object(Redactor{}.RedactHeader(x))
		case url.Values:
			red := make(map[string][]string, len(x))
			for k, vs := range x {
				if (Redactor{}).isSecretParam(k) {
					vs = slices.Repeat([]string{Redacted}, len(vs))
				}
				red[k] = vs
			}
			l.object(red)
		case error:
			l.b = appendJSONString(l.b, Redactor{}.RedactError(x))
		default:
			l.b = appendJSONString(l.b, Redactor{}.RedactString(fmt.Sprint(x)))
		}
	}
}

// object encodes a map of string lists as a JSON object with sorted keys,
// redacting every value.
func (l *lineBuilder) object(m map[string][]string) {
	l.b = append(l.b, '{')
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if i > 0 {
			l.b = append(l.b, ',')
		}
		l.b = appendJSONString(l.b, k)
		l.b = append(l.b, ':')
		l.strsValue(m[k])
	}
	l.b = append(l.b, '}')
}

// finish writes the whole line, with seq, prev, hash and the newline, to
// l.out, and returns its hash in hex.
func (l *lineBuilder) finish(seq uint64, prev *[hashLen]byte) (hash [hashLen]byte) {
	l.out = append(l.out[:0], `{"seq":`...)
	l.out = strconv.AppendUint(l.out, seq, 10)
	l.out = append(l.out, l.b...)
	l.out = append(l.out, prevKey...)
	l.out = append(l.out, prev[:]...)
	l.out = append(l.out, '"')
	sum := sha256.Sum256(l.out)
	hex.Encode(hash[:], sum[:])
	l.out = append(l.out, hashKey...)
	l.out = append(l.out, hash[:]...)
	l.out = append(l.out, "\"}\n"...)
	return hash
}

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string; invalid UTF-8 becomes
// U+FFFD, and U+2028/U+2029 are escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, `\u202`...)
			b = append(b, hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
