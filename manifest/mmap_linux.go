package manifest

import (
	"os"
	"syscall"
)

func mapFile(f *os.File, size int64) ([]byte, error) {
	if int64(int(size)) != size {
		return nil, syscall.EFBIG
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	// The file is read once, in order: read ahead aggressively.
	_ = syscall.Madvise(data, syscall.MADV_SEQUENTIAL)
	return data, nil
}

func unmapFile(data []byte) { _ = syscall.Munmap(data) }

// syncFileRangeWrite is SYNC_FILE_RANGE_WRITE: start writeback, do not wait for it.
const syncFileRangeWrite = 0x2

// writeBehind starts writing [off, off+n) of f to disk without waiting, so that the final
// fsync does not find the whole file still dirty: on a machine with much memory the kernel
// would otherwise flush nothing until then, and the flush would follow the copy instead of
// overlapping it. Errors are left to the final fsync.
func writeBehind(f *os.File, off, n int64) {
	_ = syscall.SyncFileRange(int(f.Fd()), off, n, syncFileRangeWrite)
}
