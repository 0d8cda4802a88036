package fatbin

import (
	"bytes"
	"errors"
	"fmt"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// zstdMagic starts a zstd frame.
var zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}

// maxPayload bounds what one payload may decompress to: the header's stated size comes
// from the file, and a cubin of ggml's largest translation unit is a few MiB.
const maxPayload = 256 << 20

var errNotZstd = errors.New("not a zstd frame")

// decoder is one zstd decoder for every payload (DecodeAll may run concurrently).
var decoder = sync.OnceValues(func() (*zstd.Decoder, error) {
	return zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxPayload))
})

// unzstd decompresses one zstd-compressed payload that the entry header says is size bytes
// uncompressed; anything else (another format, a frame that does not decompress to exactly
// size bytes) is an error.
func unzstd(p []byte, size int) ([]byte, error) {
	if !bytes.HasPrefix(p, zstdMagic) {
		return nil, errNotZstd
	}
	if size <= 0 || size > maxPayload {
		return nil, fmt.Errorf("stated uncompressed size %d", size)
	}
	d, err := decoder()
	if err != nil {
		return nil, err
	}
	out, err := d.DecodeAll(p, make([]byte, 0, size))
	if err != nil {
		return nil, err
	}
	if len(out) != size {
		return nil, fmt.Errorf("decompressed to %d bytes, the header says %d", len(out), size)
	}
	return out, nil
}
