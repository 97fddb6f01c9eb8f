package redisstore

import (
	"context"
	"log/slog"
	"strconv"
	"strings"
)

// String returns the warning on one line: "redisstore: KIND (OP): ERR",
// followed by the halts, hosts and servers when there are any.
func (w Warning) String() string {
	var b strings.Builder
	b.WriteString("redisstore: ")
	b.WriteString(w.Kind.String())
	if w.Op != "" {
		b.WriteString(" (" + w.Op + ")")
	}
	if w.Err != nil {
		b.WriteString(": " + w.Err.Error())
	}
	if w.Halts > 0 {
		b.WriteString("; halts written: " + strconv.Itoa(w.Halts))
	}
	if len(w.Hosts) > 0 {
		b.WriteString("; hosts: " + strings.Join(w.Hosts, ","))
	}
	if len(w.Servers) > 0 {
		b.WriteString("; servers: " + strings.Join(w.Servers, ","))
	}
	return b.String()
}

// LogValue returns the warning as a group of attributes (kind, op, err,
// halts, hosts, servers, time), so that slog writes its fields rather
// than a struct.
func (w Warning) LogValue() slog.Value {
	attrs := make([]slog.Attr, 0, 7)
	attrs = append(attrs, slog.String("kind", w.Kind.String()))
	if w.Op != "" {
		attrs = append(attrs, slog.String("op", w.Op))
	}
	if w.Err != nil {
		attrs = append(attrs, slog.String("err", w.Err.Error()))
	}
	if w.Halts > 0 {
		attrs = append(attrs, slog.Int("halts", w.Halts))
	}
	if len(w.Hosts) > 0 {
		attrs = append(attrs, slog.Any("hosts", w.Hosts))
	}
	if len(w.Servers) > 0 {
		attrs = append(attrs, slog.Any("servers", w.Servers))
	}
	if !w.Time.IsZero() {
		attrs = append(attrs, slog.Time("time", w.Time))
	}
	return slog.GroupValue(attrs...)
}

// warn delivers w to Config.OnWarning, or, when there is none, to
// slog.Default: at level Warn, except Recovered at Info. No lock is held.
func (s *Store) warn(w Warning) {
	if f := s.set.cfg.OnWarning; f != nil {
		f(w)
		return
	}
	level := slog.LevelWarn
	if w.Kind == Recovered {
		level = slog.LevelInfo
	}
	slog.Default().LogAttrs(context.Background(), level, "redisstore: "+w.Kind.String(), slog.Any("warning", w))
}
