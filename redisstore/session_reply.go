package redisstore

import (
	"fmt"
	"strconv"
	"time"

	"github.com/egresskit/egresskit/session/sessionstore"
)

// Statuses, the first element of a session script's reply.
const (
	sessOK       = 0 // done; then the operation's values
	sessNotFound = 1 // no live record
	sessExists   = 2 // Create over a live record
	sessStale    = 3 // fence rejected; then the newest lease token
	sessConflict = 4 // IfAbsent write found a field; then its index from 1
	sessHeld     = 5 // another holder's lease is live; then its expiry
	sessPast     = 6 // Create with an expiry not after now
)

// status returns the status of reply, or -1.
func status(reply []any) int64 {
	if v, ok := intAt(reply, 0); ok {
		return v
	}
	return -1
}

// intAt reads element i of reply as an integer, sent by the script as a
// number or a decimal string.
func intAt(reply []any, i int) (int64, bool) {
	if i >= len(reply) {
		return 0, false
	}
	switch v := reply[i].(type) {
	case int64:
		return v, true
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil
	}
	return 0, false
}

func uintAt(reply []any, i int) (uint64, bool) {
	v, ok := intAt(reply, i)
	return uint64(v), ok && v >= 0
}

// unexpected reports a reply the scripts cannot send.
func unexpected(op, id string, reply any) error {
	return &scriptError{Op: "session " + op, Msg: fmt.Sprintf("unexpected reply for %q: %T of length %d", id, reply, replyLen(reply))}
}

func replyLen(reply any) int {
	if a, ok := reply.([]any); ok {
		return len(a)
	}
	return -1
}

// decodeRecord reads the reply of the get script:
// {0, version, created, expires, lease token, holder, lease expiry,
// fields, cookies}.
func decodeRecord(id string, k sessionKeys, parts sessionstore.Parts, reply []any) (sessionstore.Record, error) {
	if len(reply) != 9 {
		return sessionstore.Record{}, unexpected("get", id, reply)
	}
	r := sessionstore.Record{ID: id}
	var ok bool
	if r.Version, ok = uintAt(reply, 1); !ok {
		return sessionstore.Record{}, unexpected("get", id, reply)
	}
	created, _ := reply[2].(string)
	if created != "" {
		us, err := strconv.ParseInt(created, 10, 64)
		if err != nil {
			return sessionstore.Record{}, &corruptError{Key: k.Meta, Reason: "c"}
		}
		r.Created = time.UnixMicro(us)
	}
	exp, ok := intAt(reply, 3)
	if !ok {
		return sessionstore.Record{}, unexpected("get", id, reply)
	}
	r.Expires = time.UnixMicro(exp)
	if tok, _ := reply[4].(string); tok != "" {
		t, ok1 := uintAt(reply, 4)
		le, ok2 := intAt(reply, 6)
		holder, ok3 := reply[5].(string)
		if !ok1 || !ok2 || !ok3 {
			return sessionstore.Record{}, unexpected("get", id, reply)
		}
		r.Lease = sessionstore.Lease{ID: id, Holder: holder, Token: t, Expires: time.UnixMicro(le)}
	}
	var err error
	if parts&sessionstore.PartFields != 0 {
		if r.Fields, err = pairs(reply[7]); err != nil {
			return sessionstore.Record{}, unexpected("get", id, reply)
		}
	}
	if parts&sessionstore.PartCookies != 0 {
		if r.Cookies, err = pairs(reply[8]); err != nil {
			return sessionstore.Record{}, unexpected("get", id, reply)
		}
	}
	return r, nil
}

// pairs reads a flat HGETALL reply into a map.
func pairs(v any) (map[string][]byte, error) {
	a, ok := v.([]any)
	if !ok || len(a)%2 != 0 {
		return nil, fmt.Errorf("not a list of pairs")
	}
	m := make(map[string][]byte, len(a)/2)
	for i := 0; i < len(a); i += 2 {
		name, ok1 := a[i].(string)
		val, ok2 := a[i+1].(string)
		if !ok1 || !ok2 {
			return nil, fmt.Errorf("not a list of strings")
		}
		m[name] = []byte(val)
	}
	return m, nil
}
