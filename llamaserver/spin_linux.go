package llamaserver

import (
	"net"
	"syscall"
	"time"
)

// spinReadable polls c without parking the goroutine until a byte of an answer can be read, c
// reports an error or end, or d has passed; the read that follows then finds the byte at once,
// with no wake-up of a parked thread between the answer's arrival and its reading.
func spinReadable(c net.Conn, d time.Duration) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return
	}
	end := time.Now().Add(d)
	var b [1]byte
	raw.Read(func(fd uintptr) bool {
		for {
			n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			if n > 0 || err != syscall.EAGAIN || !time.Now().Before(end) {
				return true // readable, closed, failed, or the spin is over: the read decides
			}
		}
	})
}
