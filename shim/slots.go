package shim

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"time"
)

// slotPool hands out llama-server's slots. The shim names the slot of every
// request (id_slot), which turns off llama-server's own choice of a slot by
// prompt similarity, so the pool makes that choice: a request goes to the free
// slot whose last prompt shares the longest prefix with its own, where the KV
// cache already holds that prefix (a conversation's next turn, lm-eval's
// continuations of one context); with none sharing at least minSharedPrefix
// bytes, to the slot used least recently, as llama-server does, which keeps
// the others' caches for their own next requests. Handing slots out in turn
// re-read a conversation's whole history from the second turn on whenever
// there were several slots.
type slotPool struct {
	free chan struct{} // one token per free slot
	mu   sync.Mutex
	idle []slotState // the free slots
	tick uint64      // counts releases, for least recently used
}

type slotState struct {
	id   int
	key  []byte // the prompt of its last request, as slotKey wrote it
	used uint64 // tick of its last release
}

// minSharedPrefix is the shortest shared prompt prefix, in key bytes, that
// sends a request to a slot: below it the slot is taken to share nothing.
const minSharedPrefix = 16

func newSlotPool(n int) *slotPool {
	p := &slotPool{free: make(chan struct{}, n)}
	for i := range n {
		p.idle = append(p.idle, slotState{id: i})
		p.free <- struct{}{}
	}
	return p
}

// slotKey is what the pool compares of a prompt: its token ids (4 bytes each)
// when known, else its text. Chat requests give their messages' JSON.
func slotKey(ids []int, text string) []byte {
	if ids == nil {
		return []byte(text)
	}
	k := make([]byte, 0, 4*len(ids))
	for _, id := range ids {
		k = binary.LittleEndian.AppendUint32(k, uint32(id))
	}
	return k
}

// acquire takes a free slot for a prompt of key, waiting at most wait; a
// client that waits longer gets 503 rather than a hang.
func (p *slotPool) acquire(ctx context.Context, wait time.Duration, key []byte) (int, error) {
	select {
	case <-p.free:
		return p.take(key), nil
	default:
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-p.free:
		return p.take(key), nil
	case <-t.C:
		return 0, unavailable("all %d llama-server slots stayed busy for %v; retry later", cap(p.free), wait)
	case <-ctx.Done():
		return 0, fmt.Errorf("%w: %v", errCanceled, ctx.Err())
	}
}

// take removes the best free slot for key from idle; a token of free was
// taken, so there is one.
func (p *slotPool) take(key []byte) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	best, bestShared := -1, 0
	lru := 0
	for i, s := range p.idle {
		if s.used < p.idle[lru].used {
			lru = i
		}
		if n := sharedPrefix(s.key, key); n >= minSharedPrefix && n > bestShared {
			best, bestShared = i, n
		}
	}
	if best < 0 {
		best = lru
	}
	id := p.idle[best].id
	p.idle = append(p.idle[:best], p.idle[best+1:]...)
	return id
}

// release gives slot back; key is the prompt it last held (nil: unknown).
func (p *slotPool) release(slot int, key []byte) {
	p.mu.Lock()
	p.tick++
	p.idle = append(p.idle, slotState{id: slot, key: key, used: p.tick})
	p.mu.Unlock()
	p.free <- struct{}{}
}

func sharedPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	for i := range n {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}
