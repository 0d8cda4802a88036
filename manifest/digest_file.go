package manifest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// mapMin is the smallest file CopyAndHashFile maps instead of reading.
const mapMin = 64 << 20

// mapStep is how much the hasher and the writer take from the mapping at a time, and
// mapWindow how far one may run ahead of the other: far enough to ride out the writer's
// pauses while the kernel flushes dirty pages, near enough that the pages one has read are
// still cached when the other reads them.
const (
	mapStep   = 4 << 20
	mapWindow = 512 << 20
	// writeBehindStep is how much is written to a file before its writeback is started.
	writeBehindStep = 32 << 20
)

// CopyAndHashFile is CopyAndHash for a regular file, with cancellation and progress (bytes
// hashed so far, if progress is not nil). A large file is mapped into memory: the hasher and
// the writer each read the mapped page cache directly, at their own pace within a window,
// so every byte comes from the disk once and no copy is made in user space; the copy costs
// no more than the slower of hashing and writing. The file must not change meanwhile: a
// file whose size or modification time changed is an error.
func CopyAndHashFile(ctx context.Context, dst io.Writer, src *os.File, progress *atomic.Int64) (int64, string, error) {
	fi, err := src.Stat()
	if err != nil {
		return 0, "", err
	}
	if fi.Mode().IsRegular() && fi.Size() >= mapMin {
		data, err := mapFile(src, fi.Size())
		if err == nil {
			defer unmapFile(data)
			n, sum, err := hashMapped(ctx, dst, data, progress)
			if err != nil {
				return n, "", err
			}
			if after, err := src.Stat(); err != nil {
				return n, "", err
			} else if after.Size() != fi.Size() || !after.ModTime().Equal(fi.ModTime()) {
				return n, "", fmt.Errorf("%s changed while it was read", src.Name())
			}
			return n, sum, nil
		}
		// Fall back to reading (a filesystem that cannot map).
	}
	return CopyAndHash(dst, &progressReader{ctx: ctx, r: src, progress: progress})
}

// progressReader stops a read when ctx is done and counts bytes.
type progressReader struct {
	ctx      context.Context
	r        io.Reader
	progress *atomic.Int64
}

func (r *progressReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := r.r.Read(p)
	if r.progress != nil {
		r.progress.Add(int64(n))
	}
	return n, err
}

// lockstep keeps two consumers of the same bytes within mapWindow of each other.
type lockstep struct {
	mu   sync.Mutex
	cond *sync.Cond
	pos  [2]int64
	done [2]bool
}

func (l *lockstep) advance(i int, pos int64) {
	l.mu.Lock()
	l.pos[i] = pos
	l.cond.Broadcast()
	l.mu.Unlock()
}

func (l *lockstep) finish(i int) {
	l.mu.Lock()
	l.done[i] = true
	l.cond.Broadcast()
	l.mu.Unlock()
}

// wait blocks consumer i before it reads up to end while the other is too far behind.
func (l *lockstep) wait(i int, end int64) {
	l.mu.Lock()
	for !l.done[1-i] && end-l.pos[1-i] > mapWindow {
		l.cond.Wait()
	}
	l.mu.Unlock()
}

func hashMapped(ctx context.Context, dst io.Writer, data []byte, progress *atomic.Int64) (int64, string, error) {
	ls := &lockstep{}
	ls.cond = sync.NewCond(&ls.mu)
	h := sha256.New()
	var errs [2]error
	var wg sync.WaitGroup
	consume := func(i int, use func([]byte) error) {
		defer wg.Done()
		defer ls.finish(i)
		// A file truncated under the mapping faults (SIGBUS) on access: make that an
		// error instead of a crash.
		defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
		defer func() {
			if p := recover(); p != nil {
				errs[i] = fmt.Errorf("reading the mapped file: %v (was it truncated?)", p)
			}
		}()
		for off := 0; off < len(data); off += mapStep {
			end := min(off+mapStep, len(data))
			ls.wait(i, int64(end))
			if err := ctx.Err(); err != nil {
				errs[i] = err
				return
			}
			if err := use(data[off:end]); err != nil {
				errs[i] = err
				return
			}
			ls.advance(i, int64(end))
		}
	}
	wg.Add(1)
	go consume(0, func(b []byte) error {
		h.Write(b)
		if progress != nil {
			progress.Add(int64(len(b)))
		}
		return nil
	})
	if dst != nil {
		file, _ := dst.(*os.File)
		var written, flushed int64
		if file != nil {
			if off, err := file.Seek(0, io.SeekCurrent); err == nil {
				written, flushed = off, off
			} else {
				file = nil // not seekable: no write-behind
			}
		}
		wg.Add(1)
		go consume(1, func(b []byte) error {
			n, err := dst.Write(b)
			written += int64(n)
			if file != nil && written-flushed >= writeBehindStep {
				writeBehind(file, flushed, written-flushed)
				flushed = written
			}
			return err
		})
	} else {
		ls.finish(1)
	}
	wg.Wait()
	if err := errors.Join(errs[0], errs[1]); err != nil {
		return 0, "", err
	}
	return int64(len(data)), hex.EncodeToString(h.Sum(nil)), nil
}
