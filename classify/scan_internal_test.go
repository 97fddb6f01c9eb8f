package classify

import (
	"os"
	"path/filepath"
	"testing"
)

// benchHeads are the first KiB of ordinary HTML pages of the corpus: what
// a 2xx answer's scan reads (DefaultOKPeekSize).
var benchHeads = []string{
	"goquery/gowiki.html",
	"goquery/metalreview.html",
	"goquery/gotesting.html",
	"go/doc__go_spec.html",
	"captured/scrapling_cf.solved_page.html",
	"debian/bzip2/manual.html",
}

// BenchmarkScan measures the scan of decide alone on real 1 KiB heads,
// for a 200 (the ordinary answer) and a 403 (every needle, the token
// included).
func BenchmarkScan(b *testing.B) {
	c := New(Config{AgentToken: "CorpusBot"})
	for _, status := range []int{200, 403} {
		for _, name := range benchHeads {
			body, err := os.ReadFile(filepath.Join("testdata/corpus/benign", name))
			if err != nil {
				b.Fatal(err)
			}
			head := body[:min(len(body), DefaultOKPeekSize)]
			b.Run(filepath.Base(name)+"/"+statusReason(status)[len("status "):], func(b *testing.B) {
				found := make([]int32, c.needles)
				b.SetBytes(int64(len(head)))
				b.ReportAllocs()
				cpu := cpuTime()
				for b.Loop() {
					clear(found)
					c.scan(status, head, found)
				}
				b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}
