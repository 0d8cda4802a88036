package testwriter

import (
	"strings"
	"sync"
	"testing"
)

// TestConcurrentWritesAllLand: writes from many goroutines, read while they run, all end up
// whole in the buffer (go test -race checks the locking).
func TestConcurrentWritesAllLand(t *testing.T) {
	var b Buffer
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				b.Write([]byte("line\n"))
				_ = b.String()
			}
		})
	}
	wg.Wait()
	if got, want := strings.Count(b.String(), "line\n"), 800; got != want {
		t.Errorf("Buffer holds %d lines, want %d", got, want)
	}
}
