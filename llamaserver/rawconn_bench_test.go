package llamaserver

import (
	"context"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/llbuild/llbuild/gguf"
	"github.com/llbuild/llbuild/internal/enginetest"
	"github.com/llbuild/llbuild/internal/llamatest"
)

// BenchmarkWholeAnswerCall times the shim's scoring call (prompt logprobs of 128 and 512
// prompt tokens, in the flat base64 form) to the patched llama-server with a tiny model
// (one thread, one slot), made by a pooled client two ways, interleaved call by call in one
// run: over Go's transport and over rawPool's connections read on the caller's goroutine.
// It reports each way's median, their ratio raw/transport and the median of the paired
// differences (transport - raw).
//
//	go test ./llamaserver -run '^$' -bench WholeAnswerCall -benchtime 400x
func BenchmarkWholeAnswerCall(b *testing.B) {
	bin, err := llamatest.External(context.Background(), enginetest.PatchedServer(b))
	if err != nil {
		b.Fatal(err)
	}
	model := filepath.Join(b.TempDir(), "tiny.gguf")
	if err := gguf.WriteTinyLlamaFile(model, gguf.DefaultTiny()); err != nil {
		b.Fatal(err)
	}
	srv := llamatest.StartWith(b, bin, model, "-np", "1", "-t", "1", "--cache-ram", "0", "--prompt-logprobs", "--prompt-logprobs-alone")
	raw := NewClient(srv.URL, "", WithPool(1))
	transport := NewClient(srv.URL, "", WithPool(1))
	transport.raw = nil
	ctx := context.Background()
	for _, n := range []int{128, 512} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			ids := make([]int, n)
			for i := range ids {
				ids[i] = 3 + i%50
			}
			req := &PromptLogprobsRequest{Prompt: ids, NPredict: 1, PromptLogprobs: 1, TopK: 1, Samplers: []string{"top_k"},
				CachePrompt: true, ResponseFields: []string{"prompt_logprobs_flat"}, Flat: true, Base64: true}
			call := func(c *Client) time.Duration {
				t0 := time.Now()
				if _, err := c.PromptLogprobs(ctx, req); err != nil {
					b.Fatal(err)
				}
				return time.Since(t0)
			}
			call(raw)
			call(transport)
			var tr, rw, diff []float64
			i := 0
			for b.Loop() {
				var dt, dr time.Duration
				if i%2 == 0 {
					dt, dr = call(transport), call(raw)
				} else {
					dr, dt = call(raw), call(transport)
				}
				i++
				tr, rw = append(tr, float64(dt.Microseconds())), append(rw, float64(dr.Microseconds()))
				diff = append(diff, float64((dt - dr).Microseconds()))
			}
			mt, mr := medianOf(tr), medianOf(rw)
			b.ReportMetric(mt, "transport_us")
			b.ReportMetric(mr, "raw_us")
			b.ReportMetric(mr/mt, "raw/transport")
			b.ReportMetric(medianOf(diff), "paired_saved_us")
		})
	}
}

// BenchmarkLoopbackTCPvsUnixSocket prices the transport under the shim's hop: one request
// (1.5 KB) and its answer (3, 12 or 30 KB, the size of a scoring answer) on a kept
// connection, over loopback TCP and over a Unix socket (llama-server listens on one when
// --host ends in ".sock"), interleaved call by call, the order turning every call. It reports
// both medians and their difference: what moving the shim's calls to a socket would save.
//
//	go test ./llamaserver -run '^$' -bench LoopbackTCPvsUnixSocket -benchtime 5000x
func BenchmarkLoopbackTCPvsUnixSocket(b *testing.B) {
	echoServer := func(l net.Listener, answer []byte) {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				req := make([]byte, 1500)
				for {
					if _, err := io.ReadFull(c, req); err != nil {
						return
					}
					if _, err := c.Write(answer); err != nil {
						return
					}
				}
			}()
		}
	}
	for _, size := range []int{3 << 10, 12 << 10, 30 << 10} {
		b.Run(strconv.Itoa(size>>10)+"KB", func(b *testing.B) {
			answer := make([]byte, size)
			var conns [2]net.Conn
			for i, network := range []string{"tcp", "unix"} {
				addr := "127.0.0.1:0"
				if network == "unix" {
					addr = filepath.Join(b.TempDir(), "s.sock")
				}
				l, err := net.Listen(network, addr)
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { l.Close() })
				go echoServer(l, answer)
				if conns[i], err = net.Dial(network, l.Addr().String()); err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { conns[i].Close() })
			}
			req, buf := make([]byte, 1500), make([]byte, size)
			var us [2][]float64 // each call's time, tcp and unix
			for n := 0; b.Loop(); n++ {
				for k := range conns {
					i := k ^ n%2 // the order turns every call, as in BenchmarkWholeAnswerCall
					t0 := time.Now()
					if _, err := conns[i].Write(req); err != nil {
						b.Fatal(err)
					}
					if _, err := io.ReadFull(conns[i], buf); err != nil {
						b.Fatal(err)
					}
					us[i] = append(us[i], float64(time.Since(t0).Nanoseconds())/1000)
				}
			}
			tcp, unix := medianOf(us[0]), medianOf(us[1])
			b.ReportMetric(tcp, "tcp_us")
			b.ReportMetric(unix, "unix_us")
			b.ReportMetric(tcp-unix, "saved_us")
		})
	}
}

// medianOf is the median of x (sorted in place).
func medianOf(x []float64) float64 { slices.Sort(x); return x[len(x)/2] }
