package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"sync"
	"sync/atomic"
)

// The ring of chunks between the reader, the hasher and the writer.
const (
	chunkSize = 256 << 10
	chunks    = 4
)

// CopyAndHash reads src once, writing it to dst (nil: nowhere) while hashing it, and returns
// the byte count and the hex sha256. Reading, hashing and writing run concurrently on a ring
// of buffers, so that on a multi-GB file hashing, the slowest of the three, sets the pace
// instead of the sum of all three.
func CopyAndHash(dst io.Writer, src io.Reader) (int64, string, error) {
	pool := make(chan []byte, chunks)
	for i := 0; i < chunks; i++ {
		pool <- make([]byte, chunkSize)
	}
	// A chunk goes back to the pool when its last consumer is done with it.
	type chunk struct {
		b    []byte
		refs *atomic.Int32
	}
	release := func(c chunk) {
		if c.refs.Add(-1) == 0 {
			pool <- c.b[:cap(c.b)]
		}
	}
	consumers := 1
	if dst != nil {
		consumers = 2
	}
	hashCh := make(chan chunk, chunks)
	writeCh := make(chan chunk, chunks)
	h := sha256.New()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for c := range hashCh {
			h.Write(c.b)
			release(c)
		}
	}()
	var writeErr error
	stopWriting := make(chan struct{})
	if dst != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range writeCh {
				if writeErr == nil {
					if _, err := dst.Write(c.b); err != nil {
						writeErr = err
						close(stopWriting)
					}
				}
				release(c)
			}
		}()
	}
	var n int64
	var readErr error
	for {
		buf := <-pool
		k, err := io.ReadFull(src, buf)
		if k > 0 {
			n += int64(k)
			refs := new(atomic.Int32)
			refs.Store(int32(consumers))
			c := chunk{b: buf[:k], refs: refs}
			hashCh <- c
			if dst != nil {
				writeCh <- c
			}
		} else {
			pool <- buf
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			readErr = err
			break
		}
		select {
		case <-stopWriting:
		default:
			continue
		}
		break
	}
	close(hashCh)
	close(writeCh)
	wg.Wait()
	if err := errors.Join(readErr, writeErr); err != nil {
		return n, "", err
	}
	return n, hex.EncodeToString(h.Sum(nil)), nil
}
