package shim

import (
	"encoding/json"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

// TestLogprobNumbersReadBackExactly: a logprob is written so that a client
// reads back exactly the scorer's value. One that is a float32 (every logprob
// llama-server computes) is written in the shortest form that reads back as
// that float32, no longer than its float64 digits; any other value in its
// float64 shortest form, read back exactly. Either way, what is written is
// what encoding/json writes for the float64 a client decodes (with ".0" on an
// integral value), so the form stays the one clients know.
func TestLogprobNumbersReadBackExactly(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	values := []float64{0, math.Copysign(0, -1), -9999, -0.5, -21, -123456.5, -1e-7, -3.0000001, math.Log(0.3),
		float64(float32(-1e-7)), float64(float32(math.Log(0.1))), float64(-math.MaxFloat32),
		-float64(math.SmallestNonzeroFloat32), float64(float32(-2.5e-6)), float64(float32(-9.99999e-7)),
		-1e21, float64(float32(-1e21)), math.Nextafter(-1, 0), float64(float32(-1e-6)),
		float64(math.Nextafter32(-1e-6, 0)), float64(math.Nextafter32(-1e-6, -1)), -1e-6, math.Nextafter(-1e-6, 0)}
	for range 20000 {
		values = append(values, float64(float32(-rng.ExpFloat64()*3)), -rng.ExpFloat64()*3)
	}
	short := 0
	for _, v := range values {
		is32 := float64(float32(v)) == v
		for _, w := range []struct {
			name  string
			write func([]byte, float64) []byte
		}{{"appendJSONFloat", appendJSONFloat}, {"appendFloatG", appendFloatG}} {
			out := string(w.write([]byte("x"), v))[1:]
			if !strings.ContainsAny(out, ".eE") {
				t.Fatalf("%s(%v) = %s: not written as a float", w.name, v, out)
			}
			got, err := strconv.ParseFloat(out, 64)
			if err != nil {
				t.Fatalf("%s(%v) = %s: %v", w.name, v, out, err)
			}
			if math.Signbit(got) != math.Signbit(v) {
				t.Fatalf("%s(%v) = %s: the sign is lost", w.name, v, out)
			}
			if is32 {
				if float32(got) != float32(v) {
					t.Fatalf("%s(%v) = %s reads back as float32 %v, want %v", w.name, v, out, float32(got), float32(v))
				}
				if want := strconv.FormatFloat(v, 'g', -1, 32); !sameDigits(out, want) {
					t.Fatalf("%s(%v) = %s, want float32's shortest digits (%s)", w.name, v, out, want)
				}
				if long := strconv.FormatFloat(v, 'g', -1, 64); len(out) < len(long) {
					short++
				}
			} else if got != v {
				t.Fatalf("%s(%v) = %s reads back as %v", w.name, v, out, got)
			}
			if w.name == "appendJSONFloat" {
				want, _ := json.Marshal(got)
				if s := string(want); s != out && s+".0" != out {
					t.Fatalf("appendJSONFloat(%v) = %s, encoding/json writes the value read back as %s", v, out, want)
				}
			}
		}
	}
	// most float32 logprobs have 8 or 9 digits where their float64 has 16 or 17
	if short < 30000 {
		t.Errorf("only %d of 40,000 float32 logprobs were written shorter than their float64 digits", short)
	}
}

// sameDigits says whether two shortest forms of a number have the same
// significant digits and exponent (strconv's 'g' and 'f'/'e' forms, and the
// writer's ".0" and e-9 for e-09 aside).
func sameDigits(a, b string) bool {
	x, errX := strconv.ParseFloat(a, 64)
	y, errY := strconv.ParseFloat(b, 64)
	return errX == nil && errY == nil && x == y
}

// appendJSONFloat64 is how appendJSONFloat wrote a logprob before it wrote a
// float32 at its own precision: always float64's shortest digits.
// BenchmarkAnswerNumbers measures against it.
func appendJSONFloat64(b []byte, f float64) []byte { return appendJSONFloatBits(b, f, 64) }

// BenchmarkAnswerNumbers writes the numbers of an echo answer (each row's
// logprob and its top object's values, llama-server's float32s) as
// appendJSONFloat writes them and as they were written before (float64's
// digits, appendJSONFloat64), in turn on the same answer, and reports both,
// the ratio new/old, the numbers' bytes new/old and the whole answer's.
func BenchmarkAnswerNumbers(b *testing.B) {
	gcAsServed(b)
	for _, n := range []int{128, 512} {
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			f := newEchoAnswerFixture(n)
			resp := f.response(b, f.packed)
			l := resp.Choices[0].Logprobs
			write := func(buf []byte, num func([]byte, float64) []byte) []byte {
				buf = buf[:0]
				for i, v := range l.TokenLogprobs {
					if v != nil {
						buf = num(buf, *v)
					}
					if t := l.TopLogprobs[i]; t != nil {
						for _, x := range t.vals {
							buf = num(buf, x)
						}
					}
				}
				return buf
			}
			newBytes, oldBytes := len(write(nil, appendJSONFloat)), len(write(nil, appendJSONFloat64))
			buf := make([]byte, 0, 2*oldBytes)
			inTurn(b, func() { buf = write(buf, appendJSONFloat) }, func() { buf = write(buf, appendJSONFloat64) })
			b.ReportMetric(float64(newBytes)/float64(oldBytes), "bytes_new/old")
			// the whole answer: its numbers are all that changed
			answer := len(resp.appendJSON(nil))
			b.ReportMetric(float64(answer)/float64(answer-newBytes+oldBytes), "answer_bytes_new/old")
		})
	}
}
