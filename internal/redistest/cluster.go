//go:build unix

package redistest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a Redis Cluster of masters without replicas, each a
// redis-server on 127.0.0.1, made with redis-cli --cluster create. A
// master that is down leaves only its own slots unserved: the nodes run
// with cluster-require-full-coverage no, as a deployment that wants the
// other slots to keep working must.
type Cluster struct {
	// Masters are the nodes; Kill and Restart one to take its slots down
	// and bring them back, empty.
	Masters []*Server
}

// Addrs returns the masters' addresses, for redis.ClusterOptions.Addrs.
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.Masters))
	for i, m := range c.Masters {
		addrs[i] = m.Addr
	}
	return addrs
}

// Close stops every master.
func (c *Cluster) Close() {
	for _, m := range c.Masters {
		m.Close()
	}
}

// Master returns the master that serves key, as the cluster reports it
// to a client.
func (c *Cluster) Master(ctx context.Context, key string) (*Server, error) {
	cl := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true})
	defer cl.Close()
	n, err := cl.MasterForKey(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("redistest: master of %q: %w", key, err)
	}
	for _, m := range c.Masters {
		if m.Addr == n.Options().Addr {
			return m, nil
		}
	}
	return nil, fmt.Errorf("redistest: master of %q is %s, not one of the cluster's", key, n.Options().Addr)
}

// NewCluster starts masters redis-servers in cluster mode, keeping their
// cluster configuration under dir, joins them with redis-cli --cluster
// create (no replicas), and returns when every node reports the cluster
// ready. It returns an error wrapping ErrNoServer when redis-server or
// redis-cli is missing. The caller must Close it.
func NewCluster(dir string, masters int) (*Cluster, error) {
	if masters < 3 {
		return nil, errors.New("redistest: a cluster needs at least 3 masters")
	}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("%w: redis-cli: %v", ErrNoServer, err)
	}
	c := &Cluster{}
	for i := range masters {
		d := filepath.Join(dir, "node"+strconv.Itoa(i))
		if err := os.MkdirAll(d, 0o700); err != nil {
			c.Close()
			return nil, err
		}
		s, err := newServer("--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(d, "nodes.conf"), "--dir", d,
			"--cluster-node-timeout", "1000", "--cluster-require-full-coverage", "no")
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Masters = append(c.Masters, s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		c.Close()
		return nil, fmt.Errorf("redistest: redis-cli --cluster create: %v: %s", err, lastLines(string(out), 4))
	}
	if err := c.WaitReady(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// WaitReady waits until every running master reports cluster_state:ok and
// sees every other master.
func (c *Cluster) WaitReady(ctx context.Context) error {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		ready := true
		var last error
		for _, m := range c.Masters {
			m.mu.Lock()
			running := m.proc != nil
			m.mu.Unlock()
			if !running {
				continue
			}
			cl := redis.NewClient(&redis.Options{Addr: m.Addr, ContextTimeoutEnabled: true, DialerRetries: 1, MaxRetries: -1})
			info, err := cl.ClusterInfo(ctx).Result()
			cl.Close()
			if err != nil || !strings.Contains(info, "cluster_state:ok") ||
				!strings.Contains(info, "cluster_known_nodes:"+strconv.Itoa(len(c.Masters))+"\r") ||
				!strings.Contains(info, "cluster_slots_ok:16384\r") {
				ready, last = false, fmt.Errorf("%v: %s", err, lastLines(info, 3))
				break
			}
		}
		if ready {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("redistest: cluster not ready: %v", last)
		case <-tick.C:
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], " | ")
}

// StartClusterOf starts a cluster of masters for t alone (see
// NewCluster), stopped when t ends. It skips (or fails, see EnvRequire) t
// when redis-server or redis-cli is missing.
func StartClusterOf(t testing.TB, masters int) *Cluster {
	t.Helper()
	c, err := NewCluster(t.TempDir(), masters)
	if errors.Is(err, ErrNoServer) {
		missing(t, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}
