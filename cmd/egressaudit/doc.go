// Command egressaudit checks and reads the tamper-evident audit log that
// package telemetry writes (telemetry.NewAudit): attempts, halts,
// escalations, resumes, robots.txt decisions, and the provenance records
// of consent, data minimisation and deletion.
//
// Usage:
//
//	egressaudit verify [-anchor SEQ:HASH] FILE
//	egressaudit show [-host H] [-kind K,...] [-provenance] [-since T] [-until T] [-json] FILE
//	egressaudit head FILE
//
// FILE is the log's current file; its rotated files (FILE.NNNN…, see
// telemetry.AuditFiles) are read first, oldest first, as one chain. Flags
// may come before or after FILE.
//
// verify checks every line's hash and its link to the line before. On
// success it prints the number of lines and the head; otherwise it prints
// the file and 1-based line of the first bad line and why (edited,
// deleted, inserted, reordered, cut short). A hash chain cannot see lines
// removed from its end: keep the output of head somewhere the log's
// writer cannot change, and pass it to -anchor; verify then fails when the
// anchored line is missing or differs.
//
// head verifies the log and prints its last line's anchor, SEQ:HASH.
//
// show prints the lines, one per line: time, seq, kind, then the fields
// in the order they were written. -host keeps lines whose host or subject
// is H; -kind keeps the kinds listed; -provenance keeps consent,
// minimisation and deletion records; -since and -until bound the time
// (RFC 3339, or a date 2006-01-02, in UTC; -until is exclusive); -json
// prints the lines as they are. show also verifies the log and reports a
// bad chain on standard error.
//
// Exit status, as for every egresskit command:
//
//	0   the log verifies (show: and was shown)
//	1   failure: the file is missing, a directory, or cannot be read
//	2   usage: a bad flag or anchor, no FILE
//	3   TAMPERED: the log does not verify (edited, cut short, or missing
//	    its anchor)
//
// One command with three subcommands, rather than more flags on
// preflight: preflight's exit codes are an orchestrator's API and stay as
// they are, and an auditor can run egressaudit on a copy of the log, on
// another machine, without the probe.
package main
