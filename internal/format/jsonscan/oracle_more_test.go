package jsonscan

import (
	"math/rand/v2"
	"runtime"
	"syscall"
	"testing"

	"github.com/spillway/spillway/internal/bench/benchdata"
)

// benchValues are the values userbench and BenchmarkDrain send: a JSON
// object of 1 KiB, most of it one long string, with a dozen short ones.
var benchValues = func() [][]byte {
	r := rand.New(rand.NewPCG(7, 11))
	vs := make([][]byte, 64)
	for i := range vs {
		vs[i] = benchdata.Value(r, i, 1024)
	}
	return vs
}()

func BenchmarkScanBenchValue(b *testing.B)       { benchScan(b, Scan) }
func BenchmarkScanOracleBenchValue(b *testing.B) { benchScan(b, oracleScan) }

// benchScan also reports the CPU time of the benchmark's thread per
// value (cpu-ns/op): on a shared machine the wall time per op moves by
// half between runs, the thread's CPU time much less.
func benchScan(b *testing.B, scan func([]byte) (bool, bool)) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.SetBytes(1024)
	start := threadCPU(b)
	i := 0
	for b.Loop() {
		if ok, _ := scan(benchValues[i%len(benchValues)]); !ok {
			b.Fatal("not JSON")
		}
		i++
	}
	b.ReportMetric(float64(threadCPU(b)-start)/float64(b.N), "cpu-ns/op")
}

func threadCPU(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(1 /* RUSAGE_THREAD */, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// FuzzScanMatchesOracle: Scan answers exactly as the scanner before it
// did, on every input: the same values are embedded as JSON, quoted or
// compacted, so a file's bytes for the same records don't change.
func FuzzScanMatchesOracle(f *testing.F) {
	seeds := []string{`{}`, `"x"`, `"\u00e9"`, "\"a\x01b\"", "\"a\x7fb\"", "\"\xff\"", "\"\xed\xa0\x80\"",
		`"12345678\"12345678"`, "\"1234567\xc3\xa9123456789\"", `"abcdefgh\`, `"abcdefghijklmnop\"`,
		"\"abcdefg\x1f\"", "\"abcdefghijklmno\x00p\"", "\"abcdefghijklmnop\xe2\x80\xa8\"", `"abc\u12g4abcdefgh"`,
		string(benchDoc), string(benchValues[0])}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ok, multiline := Scan(b)
		wok, wmultiline := oracleScan(b)
		if ok != wok || multiline != wmultiline {
			t.Fatalf("Scan(%q) = %v, %v; the oracle says %v, %v", b, ok, multiline, wok, wmultiline)
		}
	})
}

// TestScanMatchesOracleEverywhere cuts and breaks strings at every
// position of the word-at-a-time loop, as a fuzzer would take long to:
// each byte class (quote, backslash, control, non-ASCII, DEL, cut UTF-8)
// at each offset of strings of every length up to ten words (past 32
// bytes str changes its method).
func TestScanMatchesOracleEverywhere(t *testing.T) {
	t.Parallel()
	inserts := []string{`"`, `\`, `\"`, `\\`, `\u00e9`, `\u12g4`, `\x`, "\x00", "\x1f", "\x20", "\x7f", "\x80", "\xc3\xa9",
		"\xc3", "\xe2\x80\xa8", "\xf0\x9f\x98\x80", "\xed\xa0\x80", "\xff", "\n", "\r", "\t"}
	for n := 0; n <= 80; n++ {
		for at := 0; at <= n; at++ {
			for _, ins := range inserts {
				body := make([]byte, 0, n+len(ins))
				for k := 0; k < at; k++ {
					body = append(body, 'a'+byte(k%26))
				}
				body = append(body, ins...)
				for k := at; k < n; k++ {
					body = append(body, 'a'+byte(k%26))
				}
				for _, doc := range []string{`"` + string(body) + `"`, `"` + string(body), `{"` + string(body) + `":1}`, `["x","` + string(body) + `"]`} {
					ok, multiline := Scan([]byte(doc))
					wok, wmultiline := oracleScan([]byte(doc))
					if ok != wok || multiline != wmultiline {
						t.Fatalf("Scan(%q) = %v, %v; the oracle says %v, %v", doc, ok, multiline, wok, wmultiline)
					}
				}
			}
		}
	}
	for i, v := range benchValues {
		if ok, multiline := Scan(v); !ok || multiline {
			t.Fatalf("bench value %d: Scan = %v, %v", i, ok, multiline)
		}
	}
}
