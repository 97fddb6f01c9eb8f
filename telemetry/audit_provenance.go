package telemetry

import (
	"errors"
	"fmt"
	"log/slog"
)

// Provenance records say what a crawler was allowed to collect, what it
// kept and what it erased. They are lines of the audit log like any other,
// hash-chained with the crawl's own, so that the account of consent,
// minimisation and deletion cannot be edited after the fact without
// a Verifier noticing. There are three kinds:
//
//	"consent"       Consent: the consent or licence state of a host or dataset
//	"minimisation"  Minimisation: fields dropped (or otherwise reduced) before storage
//	"deletion"      Deletion: a deletion request received, and later carried out
//
// Every string is redacted like any audit field; none should hold
// personal data: name a request by its ticket ID, not by its requester.

// errProvenance is wrapped by every error about a malformed provenance
// record.
var errProvenance = errors.New("telemetry: invalid provenance record")

// Consent is the consent or licence state of a host or dataset, which a
// crawler author records with Audit.Consent.
type Consent struct {
	// Subject is the host key or dataset name; required.
	Subject string
	// Kind says what Subject is: "host" (a host key, as the chain's
	// events name hosts) or "dataset" (a dataset, by the name the crawler
	// gives it); required.
	Kind string
	// State is the consent state; required: "granted" (collection is
	// permitted, by licence, contract or the site's terms), "denied"
	// (collection is not permitted) or "withdrawn" (a permission given
	// earlier was withdrawn).
	State string
	// Licence names the licence or terms, e.g. "CC-BY-4.0"; optional.
	Licence string
	// Evidence says where the state comes from (a terms page, a contract
	// reference); optional.
	Evidence string
	// By identifies who recorded it, of the operator's choosing; optional.
	By string
}

// Minimisation records fields removed from collected data before it was
// stored, which a crawler author records with Audit.Minimisation.
type Minimisation struct {
	// Subject is the host key or dataset name; required.
	Subject string
	// Kind is "host" or "dataset", as in Consent; required.
	Kind string
	// Fields names the fields dropped; at least one.
	Fields []string
	// Action says what was done to them; "" means "dropped". Other
	// values a crawler may use: "hashed", "truncated", "generalised".
	Action string
	// Reason says why, e.g. "not needed for the purpose"; optional.
	Reason string
	// Records is how many records were affected; 0 when not counted.
	Records int64
}

// Deletion records one stage of a deletion request, which a crawler
// author records with Audit.Deletion.
type Deletion struct {
	// Request identifies the request (a ticket ID, never the requester's
	// name or address); required, and the same at every stage.
	Request string
	// Stage is "received" (the request arrived) or "completed" (the data
	// it covers was erased); required.
	Stage string
	// Subject is the host key or dataset name the request covers;
	// required.
	Subject string
	// Kind is "host" or "dataset", as in Consent; required.
	Kind string
	// Scope describes what the request covers, e.g. "pages under /u/123";
	// optional.
	Scope string
	// Records is how many records were erased (stage "completed"); 0
	// when not counted.
	Records int64
}

func checkSubject(subject, kind string) error {
	if subject == "" {
		return fmt.Errorf("%w: empty subject", errProvenance)
	}
	if kind != "host" && kind != "dataset" {
		return fmt.Errorf("%w: subject kind %q (want host or dataset)", errProvenance, kind)
	}
	return nil
}

// Consent appends a "consent" line: subject, subject_kind, state, and
// licence, evidence and by when set. It returns an error for a missing
// subject, an unknown kind or state (nothing is written then), and the
// errors of Record.
func (a *Audit) Consent(c Consent) error {
	if err := checkSubject(c.Subject, c.Kind); err != nil {
		return err
	}
	switch c.State {
	case "granted", "denied", "withdrawn":
	default:
		return fmt.Errorf("%w: consent state %q (want granted, denied or withdrawn)", errProvenance, c.State)
	}
	attrs := []slog.Attr{slog.String("subject", c.Subject), slog.String("subject_kind", c.Kind), slog.String("state", c.State)}
	attrs = appendSet(attrs, "licence", c.Licence)
	attrs = appendSet(attrs, "evidence", c.Evidence)
	attrs = appendSet(attrs, "by", c.By)
	return a.Record("consent", attrs...)
}

// Minimisation appends a "minimisation" line: subject, subject_kind,
// fields, action, and reason and records when set. It returns an error
// for a missing subject, an unknown kind or no field (nothing is written
// then), and the errors of Record.
func (a *Audit) Minimisation(m Minimisation) error {
	if err := checkSubject(m.Subject, m.Kind); err != nil {
		return err
	}
	if len(m.Fields) == 0 {
		return fmt.Errorf("%w: no field named", errProvenance)
	}
	if m.Action == "" {
		m.Action = "dropped"
	}
	attrs := []slog.Attr{slog.String("subject", m.Subject), slog.String("subject_kind", m.Kind),
		slog.Any("fields", m.Fields), slog.String("action", m.Action)}
	attrs = appendSet(attrs, "reason", m.Reason)
	if m.Records > 0 {
		attrs = append(attrs, slog.Int64("records", m.Records))
	}
	return a.Record("minimisation", attrs...)
}

// Deletion appends a "deletion" line: request, stage, subject,
// subject_kind, and scope and records when set. It returns an error for a
// missing request or subject, an unknown kind or stage (nothing is
// written then), and the errors of Record.
func (a *Audit) Deletion(d Deletion) error {
	if d.Request == "" {
		return fmt.Errorf("%w: empty request ID", errProvenance)
	}
	if err := checkSubject(d.Subject, d.Kind); err != nil {
		return err
	}
	if d.Stage != "received" && d.Stage != "completed" {
		return fmt.Errorf("%w: deletion stage %q (want received or completed)", errProvenance, d.Stage)
	}
	attrs := []slog.Attr{slog.String("request", d.Request), slog.String("stage", d.Stage),
		slog.String("subject", d.Subject), slog.String("subject_kind", d.Kind)}
	attrs = appendSet(attrs, "scope", d.Scope)
	if d.Records > 0 {
		attrs = append(attrs, slog.Int64("records", d.Records))
	}
	return a.Record("deletion", attrs...)
}

func appendSet(attrs []slog.Attr, k, v string) []slog.Attr {
	if v == "" {
		return attrs
	}
	return append(attrs, slog.String(k, v))
}
