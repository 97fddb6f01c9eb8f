package session

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Plaintext payload format, version 1. Every sealed value is one payload:
//
//	byte 0   payload version (1)
//	byte 1   kind (kindCookie, kindToken, kindHeader, kindBinding)
//	then     fields: tag (uvarint), length (uvarint), value bytes
//
// Unknown tags are skipped, so a later version can add fields that this
// one ignores; a repeated tag is malformed except where a kind allows it
// (header values). A time is a varint of Unix seconds and a uvarint of
// nanoseconds; an absent time is the zero time.
const payloadVersion = 1

// Payload kinds.
const (
	kindCookie  = 1
	kindToken   = 2
	kindHeader  = 3
	kindBinding = 4
)

// Cookie tags.
const (
	tagCookieName = 1 + iota
	tagCookieValue
	tagCookieDomain
	tagCookiePath
	tagCookieFlags
	tagCookieSameSite
	tagCookieExpires
	tagCookieCreation
	tagCookieSeq
)

// Cookie flag bits.
const (
	flagSecure = 1 << iota
	flagHTTPOnly
	flagHostOnly
	flagPersistent
	flagQuoted
)

// Token tags.
const (
	tagTokenType = 1 + iota
	tagTokenValue
	tagTokenRefresh
	tagTokenExpires
	tagTokenRefreshAt
)

// Header and binding tags.
const (
	tagHeaderValue     = 1
	tagBindingEndpoint = 1
)

// errMalformed reports a payload that does not decode; callers wrap it in
// ErrTampered, since a payload that opened under the key but does not
// decode was not written by this package.
var errMalformed = errors.New("malformed payload")

// entry is one stored cookie, as net/http/cookiejar keeps it.
type entry struct {
	Name, Value, Domain, Path string
	SameSite                  http.SameSite
	Secure, HTTPOnly          bool
	HostOnly, Persistent      bool
	Quoted                    bool
	// Expires is meaningful only when Persistent.
	Expires time.Time
	// Creation and Seq order cookies of equal path length: older first,
	// then by position in the SetCookies call that stored them.
	Creation time.Time
	Seq      uint64
}

type encoder struct{ b []byte }

func newEncoder(kind byte, sizeHint int) *encoder {
	e := &encoder{b: make([]byte, 0, 2+sizeHint)}
	e.b = append(e.b, payloadVersion, kind)
	return e
}

func (e *encoder) bytes(tag uint64, v string) {
	e.b = binary.AppendUvarint(e.b, tag)
	e.b = binary.AppendUvarint(e.b, uint64(len(v)))
	e.b = append(e.b, v...)
}

func (e *encoder) uint(tag, v uint64) {
	var tmp [binary.MaxVarintLen64]byte
	e.bytes(tag, string(binary.AppendUvarint(tmp[:0], v)))
}

func (e *encoder) time(tag uint64, t time.Time) {
	var tmp [2 * binary.MaxVarintLen64]byte
	b := binary.AppendVarint(tmp[:0], t.Unix())
	b = binary.AppendUvarint(b, uint64(t.Nanosecond()))
	e.bytes(tag, string(b))
}

func encodeEntry(c *entry) []byte {
	e := newEncoder(kindCookie, len(c.Name)+len(c.Value)+len(c.Domain)+len(c.Path)+48)
	e.bytes(tagCookieName, c.Name)
	e.bytes(tagCookieValue, c.Value)
	e.bytes(tagCookieDomain, c.Domain)
	e.bytes(tagCookiePath, c.Path)
	var flags uint64
	for _, f := range [...]struct {
		set bool
		bit uint64
	}{{c.Secure, flagSecure}, {c.HTTPOnly, flagHTTPOnly}, {c.HostOnly, flagHostOnly}, {c.Persistent, flagPersistent}, {c.Quoted, flagQuoted}} {
		if f.set {
			flags |= f.bit
		}
	}
	e.uint(tagCookieFlags, flags)
	if c.SameSite != 0 {
		e.uint(tagCookieSameSite, uint64(c.SameSite))
	}
	if c.Persistent {
		e.time(tagCookieExpires, c.Expires)
	}
	if !c.Creation.IsZero() {
		e.time(tagCookieCreation, c.Creation)
	}
	if c.Seq != 0 {
		e.uint(tagCookieSeq, c.Seq)
	}
	return e.b
}

func encodeToken(t Token) []byte {
	e := newEncoder(kindToken, len(t.Type)+len(t.Value)+len(t.Refresh)+40)
	if t.Type != "" {
		e.bytes(tagTokenType, t.Type)
	}
	e.bytes(tagTokenValue, string(t.Value))
	if t.Refresh != "" {
		e.bytes(tagTokenRefresh, string(t.Refresh))
	}
	if !t.Expires.IsZero() {
		e.time(tagTokenExpires, t.Expires)
	}
	if !t.refreshAt.IsZero() {
		e.time(tagTokenRefreshAt, t.refreshAt)
	}
	return e.b
}

func encodeHeader(values []string) []byte {
	n := 0
	for _, v := range values {
		n += len(v) + 4
	}
	e := newEncoder(kindHeader, n)
	for _, v := range values {
		e.bytes(tagHeaderValue, v)
	}
	return e.b
}

func encodeBinding(endpoint string) []byte {
	e := newEncoder(kindBinding, len(endpoint)+4)
	e.bytes(tagBindingEndpoint, endpoint)
	return e.b
}

// decoder walks the fields of one payload.
type decoder struct {
	b    []byte
	seen uint64 // bit per tag < 64 already read
}

func newDecoder(b []byte, kind byte) (*decoder, error) {
	if len(b) < 2 {
		return nil, fmt.Errorf("%w: %d bytes", errMalformed, len(b))
	}
	if b[0] != payloadVersion {
		return nil, fmt.Errorf("%w: version %d", errMalformed, b[0])
	}
	if b[1] != kind {
		return nil, fmt.Errorf("%w: kind %d, want %d", errMalformed, b[1], kind)
	}
	return &decoder{b: b[2:]}, nil
}

// next returns the next field; ok is false at the end. repeatable tags may
// occur more than once.
func (d *decoder) next(repeatable uint64) (tag uint64, val []byte, ok bool, err error) {
	if len(d.b) == 0 {
		return 0, nil, false, nil
	}
	tag, n := binary.Uvarint(d.b)
	if n <= 0 || tag == 0 {
		return 0, nil, false, fmt.Errorf("%w: bad tag", errMalformed)
	}
	d.b = d.b[n:]
	l, n := binary.Uvarint(d.b)
	if n <= 0 || l > uint64(len(d.b)-n) {
		return 0, nil, false, fmt.Errorf("%w: bad length for tag %d", errMalformed, tag)
	}
	val = d.b[n : n+int(l)]
	d.b = d.b[n+int(l):]
	if tag < 64 && tag != repeatable {
		if d.seen&(1<<tag) != 0 {
			return 0, nil, false, fmt.Errorf("%w: tag %d repeated", errMalformed, tag)
		}
		d.seen |= 1 << tag
	}
	return tag, val, true, nil
}

func (d *decoder) has(tag uint64) bool { return d.seen&(1<<tag) != 0 }

func decodeUint(tag uint64, v []byte) (uint64, error) {
	u, n := binary.Uvarint(v)
	if n <= 0 || n != len(v) {
		return 0, fmt.Errorf("%w: bad integer for tag %d", errMalformed, tag)
	}
	return u, nil
}

func decodeTime(tag uint64, v []byte) (time.Time, error) {
	sec, n := binary.Varint(v)
	if n <= 0 {
		return time.Time{}, fmt.Errorf("%w: bad time for tag %d", errMalformed, tag)
	}
	nsec, m := binary.Uvarint(v[n:])
	if m <= 0 || n+m != len(v) || nsec >= 1e9 {
		return time.Time{}, fmt.Errorf("%w: bad time for tag %d", errMalformed, tag)
	}
	return time.Unix(sec, int64(nsec)).UTC(), nil
}

func decodeEntry(b []byte) (*entry, error) {
	d, err := newDecoder(b, kindCookie)
	if err != nil {
		return nil, err
	}
	c := new(entry)
	for {
		tag, v, ok, err := d.next(0)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		switch tag {
		case tagCookieName:
			c.Name = string(v)
		case tagCookieValue:
			c.Value = string(v)
		case tagCookieDomain:
			c.Domain = string(v)
		case tagCookiePath:
			c.Path = string(v)
		case tagCookieFlags:
			f, err := decodeUint(tag, v)
			if err != nil {
				return nil, err
			}
			c.Secure = f&flagSecure != 0
			c.HTTPOnly = f&flagHTTPOnly != 0
			c.HostOnly = f&flagHostOnly != 0
			c.Persistent = f&flagPersistent != 0
			c.Quoted = f&flagQuoted != 0
		case tagCookieSameSite:
			s, err := decodeUint(tag, v)
			if err != nil {
				return nil, err
			}
			if s > uint64(http.SameSiteNoneMode) {
				return nil, fmt.Errorf("%w: SameSite %d", errMalformed, s)
			}
			c.SameSite = http.SameSite(s)
		case tagCookieExpires:
			if c.Expires, err = decodeTime(tag, v); err != nil {
				return nil, err
			}
		case tagCookieCreation:
			if c.Creation, err = decodeTime(tag, v); err != nil {
				return nil, err
			}
		case tagCookieSeq:
			if c.Seq, err = decodeUint(tag, v); err != nil {
				return nil, err
			}
		}
	}
	for _, t := range [...]uint64{tagCookieName, tagCookieValue, tagCookieDomain, tagCookiePath, tagCookieFlags} {
		if !d.has(t) {
			return nil, fmt.Errorf("%w: cookie without tag %d", errMalformed, t)
		}
	}
	if c.Persistent != d.has(tagCookieExpires) {
		return nil, fmt.Errorf("%w: cookie expiry inconsistent with persistence", errMalformed)
	}
	return c, nil
}

func decodeToken(b []byte) (Token, error) {
	d, err := newDecoder(b, kindToken)
	if err != nil {
		return Token{}, err
	}
	var t Token
	for {
		tag, v, ok, err := d.next(0)
		if err != nil {
			return Token{}, err
		}
		if !ok {
			break
		}
		switch tag {
		case tagTokenType:
			t.Type = string(v)
		case tagTokenValue:
			t.Value = Secret(v)
		case tagTokenRefresh:
			t.Refresh = Secret(v)
		case tagTokenExpires:
			if t.Expires, err = decodeTime(tag, v); err != nil {
				return Token{}, err
			}
		case tagTokenRefreshAt:
			if t.refreshAt, err = decodeTime(tag, v); err != nil {
				return Token{}, err
			}
		}
	}
	if !d.has(tagTokenValue) {
		return Token{}, fmt.Errorf("%w: token without value", errMalformed)
	}
	return t, nil
}

func decodeHeader(b []byte) ([]string, error) {
	d, err := newDecoder(b, kindHeader)
	if err != nil {
		return nil, err
	}
	var values []string
	for {
		tag, v, ok, err := d.next(tagHeaderValue)
		if err != nil {
			return nil, err
		}
		if !ok {
			break
		}
		if tag == tagHeaderValue {
			values = append(values, string(v))
		}
	}
	if len(values) == 0 {
		return nil, fmt.Errorf("%w: header without values", errMalformed)
	}
	return values, nil
}

func decodeBinding(b []byte) (string, error) {
	d, err := newDecoder(b, kindBinding)
	if err != nil {
		return "", err
	}
	var ep string
	for {
		tag, v, ok, err := d.next(0)
		if err != nil {
			return "", err
		}
		if !ok {
			break
		}
		if tag == tagBindingEndpoint {
			ep = string(v)
		}
	}
	if ep == "" {
		return "", fmt.Errorf("%w: binding without endpoint", errMalformed)
	}
	return ep, nil
}
