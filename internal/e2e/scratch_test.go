package e2e

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

func TestScratchRead(t *testing.T) {
	dir := os.Getenv("SCR_DIR")
	if _, err := os.Stat(dir); err != nil {
		os.MkdirAll(dir, 0o755)
		rnd := rand.NewChaCha8([32]byte{})
		for p := 0; p < 100; p++ {
			f, _ := os.Create(filepath.Join(dir, fmt.Sprintf("big-%d-0.jsonl.zst", p)))
			zw, _ := zstd.NewWriter(f)
			for o := 0; o < 40; o++ {
				n := 100 + (o*7919)%60000
				if o%20 == 0 {
					n = 800000
				}
				v := make([]byte, n)
				rnd.Read(v[:n/2])
				ph := backlogPhrase(o*oomPartitions + p)
				for off := n / 2; off < n; {
					off += copy(v[off:], ph)
				}
				fmt.Fprintf(zw, `{"key":"big-%d","value":"%s","offset":%d,"timestamp":1,"headers":[]}`+"\n", o*1000+p, base64.StdEncoding.EncodeToString(v), o)
			}
			zw.Close()
			f.Close()
		}
	}
	start := time.Now()
	s := countStored(t, dir)
	t.Logf("%d recs %d bytes %d bad in %s", len(s.recs), s.valueBytes, len(s.badValues), time.Since(start))
}
