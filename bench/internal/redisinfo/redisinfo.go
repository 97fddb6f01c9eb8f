// Package redisinfo reads the figures the bench commands compare from a
// Redis server's INFO.
package redisinfo

import (
	"context"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Read reads INFO commandstats and INFO cpu into numbers: "CMD.calls",
// "CMD.usec" and the cpu fields.
func Read(ctx context.Context, c *redis.Client) (map[string]float64, error) {
	m := map[string]float64{}
	for _, section := range []string{"commandstats", "cpu"} {
		s, err := c.Info(ctx, section).Result()
		if err != nil {
			return nil, err
		}
		for line := range strings.SplitSeq(s, "\r\n") {
			k, v, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			if cmd, ok := strings.CutPrefix(k, "cmdstat_"); ok {
				for f := range strings.SplitSeq(v, ",") {
					fk, fv, _ := strings.Cut(f, "=")
					if fk == "calls" || fk == "usec" {
						x, _ := strconv.ParseFloat(fv, 64)
						m[cmd+"."+fk] = x
					}
				}
				continue
			}
			if x, err := strconv.ParseFloat(v, 64); err == nil {
				m[k] = x
			}
		}
	}
	return m, nil
}
