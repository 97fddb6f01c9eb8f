package telemetry_test

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/egresskit/egresskit/telemetry"
)

// childEnv names the audit file a child process of the test binary
// appends to (see auditChild).
const childEnv = "EGRESSKIT_TEST_AUDIT_CHILD"

// auditChild is a writer in a process of its own: it opens the log named
// by childEnv, records AUDIT_CHILD_N lines and closes it.
func auditChild(path string) int {
	n, _ := strconv.Atoi(os.Getenv("AUDIT_CHILD_N"))
	maxBytes, _ := strconv.ParseInt(os.Getenv("AUDIT_CHILD_MAX"), 10, 64)
	a, err := telemetry.NewAudit(telemetry.AuditConfig{Path: path, MaxBytes: maxBytes, SyncEvery: -1})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for i := range n {
		if err := a.Record("note", slog.Int("pid", os.Getpid()), slog.Int("i", i)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	if err := a.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestAuditManyProcesses runs four processes appending to one log at
// once, with and without rotation: their lines form one chain.
func TestAuditManyProcesses(t *testing.T) {
	for _, maxBytes := range []int64{0, 4096} {
		t.Run(fmt.Sprintf("MaxBytes=%d", maxBytes), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			const procs, each = 4, 50
			var wg sync.WaitGroup
			for range procs {
				cmd := exec.Command(os.Args[0], "-test.run=^$")
				cmd.Env = append(os.Environ(), childEnv+"="+path, "AUDIT_CHILD_N="+strconv.Itoa(each),
					"AUDIT_CHILD_MAX="+strconv.FormatInt(maxBytes, 10))
				wg.Go(func() {
					if out, err := cmd.CombinedOutput(); err != nil {
						t.Errorf("writer: %v: %s", err, out)
					}
				})
			}
			wg.Wait()
			files, err := telemetry.AuditFiles(path)
			if err != nil {
				t.Fatal(err)
			}
			head, err := telemetry.Verifier{}.VerifyFiles(files...)
			if err != nil {
				t.Fatalf("VerifyFiles(%d files) = %v", len(files), err)
			}
			if want := uint64(procs * (each + 2)); head.Seq != want {
				t.Errorf("head seq = %d, want %d (every line of every writer)", head.Seq, want)
			}
			if maxBytes > 0 && len(files) < 2 {
				t.Errorf("%d files, want rotation", len(files))
			}
		})
	}
}

// TestAuditTwoWritersOneProcess interleaves two Audits of one file: each
// chains from the other's lines.
func TestAuditTwoWritersOneProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a := newAudit(t, telemetry.AuditConfig{Path: path})
	b := newAudit(t, telemetry.AuditConfig{Path: path})
	for i := range 10 {
		if err := a.Record("note", slog.Int("i", i)); err != nil {
			t.Fatal(err)
		}
		if err := b.Record("note", slog.Int("i", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	head, err := telemetry.Verifier{}.VerifyFiles(path)
	if err != nil {
		t.Fatalf("VerifyFiles = %v", err)
	}
	if head.Seq != 24 {
		t.Errorf("head seq = %d, want 24", head.Seq)
	}
	if got := b.Head(); got != head {
		t.Errorf("last writer's Head = %v, want %v", got, head)
	}
}

// TestAuditLockHeld: a writer that cannot take the lock fails, says so,
// and writes nothing.
func TestAuditLockHeld(t *testing.T) {
	telemetry.SetLockWait(t.Cleanup, 20*time.Millisecond)
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	a := newAudit(t, telemetry.AuditConfig{Path: path})
	holder, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	if ok, err := telemetry.TryLock(holder); !ok || err != nil {
		t.Fatalf("TryLock = %v, %v", ok, err)
	}
	before, _ := os.ReadFile(path)
	err = a.Record("note", slog.String("x", "y"))
	if !errors.Is(err, telemetry.ErrAuditLocked) {
		t.Errorf("Record with the lock held elsewhere = %v, want ErrAuditLocked", err)
	}
	if _, err := telemetry.NewAudit(telemetry.AuditConfig{Path: path}); !errors.Is(err, telemetry.ErrAuditLocked) {
		t.Errorf("NewAudit with the lock held elsewhere = %v, want ErrAuditLocked", err)
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("the file changed while its lock was held elsewhere")
	}
	telemetry.Unlock(holder)
	a.Close()
	if err := verifyFiles(path); err != nil {
		t.Errorf("VerifyFiles = %v", err)
	}
}
