package manifest

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/llbuild/llbuild/internal/atomicfile"
	"github.com/llbuild/llbuild/internal/inputerr"
)

// ArchiveCompression returns the compression an archive name asks for: "zst" or "gz".
func ArchiveCompression(name string) (string, error) {
	switch {
	case strings.HasSuffix(name, ".tar.zst"), strings.HasSuffix(name, ".tzst"):
		return "zst", nil
	case strings.HasSuffix(name, ".tar.gz"), strings.HasSuffix(name, ".tgz"):
		return "gz", nil
	}
	return "", fmt.Errorf("archive %s: name it .tar.zst or .tar.gz", name)
}

// compressor wraps w in the archive's compression. Neither format records a name or a
// time, and the zstd encoder runs with a fixed concurrency, so output depends on input only.
func compressor(w io.Writer, kind string) (io.WriteCloser, error) {
	if kind == "gz" {
		return gzip.NewWriterLevel(w, gzip.DefaultCompression)
	}
	return zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithEncoderConcurrency(1))
}

// decompressor undoes compressor.
func decompressor(r io.Reader, kind string) (io.ReadCloser, error) {
	if kind == "gz" {
		return gzip.NewReader(r)
	}
	d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	return d.IOReadCloser(), nil
}

// archiveEntry is one entry of a bundle archive.
type archiveEntry struct {
	name string
	mode int64
	file File
	dir  bool
}

// archiveEntries lists a bundle's entries in name order: its directories, json
// and every file of the  Modes are fixed: 0755 for directories, executables and
// the loader, 0777 for links, 0644 for everything else.
func archiveEntries(m *Manifest) []archiveEntry {
	dirs := map[string]bool{}
	entries := []archiveEntry{{name: FileName, mode: 0o644}}
	for _, f := range m.Files {
		for d := path.Dir(f.Path); d != "."; d = path.Dir(d) {
			dirs[d] = true
		}
		mode := int64(fileMode(f, f.Path == m.Server.Loader))
		if f.Link != "" {
			mode = 0o777
		}
		entries = append(entries, archiveEntry{name: f.Path, mode: mode, file: f})
	}
	for d := range dirs {
		entries = append(entries, archiveEntry{name: d + "/", mode: 0o755, dir: true})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })
	return entries
}

// writeArchive packs the bundle at root, described by m, into a deterministic tar: sorted
// entries, fixed modes, uid/gid 0 with no owner names, every mtime epoch. It writes a
// temporary file beside name and renames it into place.
func writeArchive(ctx context.Context, root string, m *Manifest, name string, epoch time.Time) (err error) {
	kind, err := ArchiveCompression(name)
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(name), ".llbuild-archive-")
	if err != nil {
		return fmt.Errorf("archive %s: %w", name, err)
	}
	defer func() {
		tmp.Close()
		if err != nil {
			os.Remove(tmp.Name())
		}
	}()
	bw := bufio.NewWriterSize(tmp, 1<<20)
	cw, err := compressor(bw, kind)
	if err != nil {
		return err
	}
	tw := tar.NewWriter(cw)
	for _, e := range archiveEntries(m) {
		if err := ctx.Err(); err != nil {
			return err
		}
		// Uid, Gid, Uname and Gname stay zero and empty. The format is ustar unless a long
		// name or a size over 8 GiB needs PAX records, which then carry no times because
		// epoch has whole seconds.
		h := &tar.Header{Name: e.name, Mode: e.mode, ModTime: epoch}
		switch {
		case e.dir:
			h.Typeflag = tar.TypeDir
		case e.file.Link != "":
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.file.Link
		default:
			h.Typeflag = tar.TypeReg
		}
		var src *os.File
		if h.Typeflag == tar.TypeReg {
			if src, err = os.Open(filepath.Join(root, filepath.FromSlash(e.name))); err != nil {
				return err
			}
			fi, err := src.Stat()
			if err != nil {
				src.Close()
				return err
			}
			h.Size = fi.Size()
		}
		if err := tw.WriteHeader(h); err != nil {
			if src != nil {
				src.Close()
			}
			return fmt.Errorf("archive %s: %s: %w", name, e.name, err)
		}
		if src != nil {
			_, err := io.CopyBuffer(tw, onlyReader{src}, make([]byte, 1<<20))
			src.Close()
			if err != nil {
				return fmt.Errorf("archive %s: %s: %w", name, e.name, err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("archive %s: %w", name, err)
	}
	if err := cw.Close(); err != nil {
		return fmt.Errorf("archive %s: %w", name, err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("archive %s: %w", name, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("archive %s: %w", name, err)
	}
	if err := os.Rename(tmp.Name(), name); err != nil {
		return fmt.Errorf("archive %s: %w", name, err)
	}
	return nil
}

// onlyReader hides *os.File's WriterTo so that CopyBuffer uses its large buffer.
type onlyReader struct{ io.Reader }

// openArchive opens a bundle archive and its decompression; closing the reader closes both.
// A name that is not an archive's is an inputerr.Error; a stream that does not start as its
// compression does is a *badStream, which each caller reports in its own way.
func openArchive(name string) (io.ReadCloser, error) {
	kind, err := ArchiveCompression(name)
	if err != nil {
		return nil, &inputerr.Error{Err: err}
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	r, err := decompressor(bufio.NewReaderSize(f, 1<<20), kind)
	if err != nil {
		f.Close()
		return nil, &badStream{err}
	}
	return archiveReader{r, f}, nil
}

// archiveReader reads the decompressed stream; Close closes it, then the file.
type archiveReader struct {
	io.ReadCloser
	f *os.File
}

func (a archiveReader) Close() error {
	a.ReadCloser.Close()
	return a.f.Close()
}

// badStream is an archive whose bytes do not start as its name's compression does.
type badStream struct{ err error }

func (b *badStream) Error() string { return b.err.Error() }

// VerifyArchive checks a bundle archive by streaming it once; it extracts nothing.
func VerifyArchive(name string) ([]Problem, error) {
	r, err := openArchive(name)
	var bad *badStream
	if errors.As(err, &bad) {
		return []Problem{{Message: fmt.Sprintf("archive %s: %v", name, err)}}, nil
	}
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return VerifyTar(r), nil
}

// ExtractArchive unpacks a bundle archive into dest. The archive is verified first by
// streaming it (every entry name, link, digest and the manifest), and nothing is written
// unless it is sound. It is then unpacked into a temporary directory beside dest with the
// names checked again (the file may have changed in between): no entry may pass through a
// link, links must stay inside, files are created exclusively. The result is verified
// once more before it is renamed into place.
func ExtractArchive(ctx context.Context, archive, dest string, force bool) error {
	problems, err := VerifyArchive(archive)
	if err != nil {
		return err
	}
	if len(problems) > 0 {
		return problemsError(archive, problems)
	}
	abs, err := filepath.Abs(dest)
	if err != nil {
		return err
	}
	if err := checkExtractDest(archive, dest, abs, force); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(abs), ".llbuild-extract-")
	if err != nil {
		return fmt.Errorf("extracting %s: %w", archive, err)
	}
	defer os.RemoveAll(tmp)
	if err := os.Chmod(tmp, 0o755); err != nil {
		return fmt.Errorf("extracting %s: %w", archive, err)
	}
	if err := UnpackArchive(ctx, archive, tmp); err != nil {
		return err
	}
	if problems := Verify(tmp); len(problems) > 0 {
		return problemsError(archive+" (extracted)", problems)
	}
	if err := atomicfile.SyncTree(tmp); err != nil {
		return fmt.Errorf("extracting %s: %w", archive, err)
	}
	if err := atomicfile.ReplaceDir(tmp, abs); err != nil {
		return fmt.Errorf("extracting %s into %s: %w", archive, dest, err)
	}
	return nil
}

// checkExtractDest refuses a destination that exists unless force, and with force one that
// --force cannot replace without losing what is not the bundle's: anything but a directory,
// a directory that holds the archive itself, or one that holds the current directory (".",
// a parent of it). A refusal is the user's to mend (exit 2) and nothing has been written.
func checkExtractDest(archive, dest, abs string, force bool) error {
	if fi, err := os.Stat(filepath.Dir(abs)); err != nil || !fi.IsDir() {
		return inputerr.Errorf("--extract %s: the directory %s does not exist; make it first", dest, filepath.Dir(dest))
	}
	fi, err := os.Lstat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return &inputerr.Error{Err: fmt.Errorf("--extract %s: %w", dest, err)}
	}
	if st, err := os.Stat(abs); !fi.IsDir() && (fi.Mode()&fs.ModeSymlink == 0 || err != nil || !st.IsDir()) {
		// a link to a directory is replaced itself, its target left as it is
		return inputerr.Errorf("--extract %s exists and is not a directory; --force replaces only a directory (remove it or extract elsewhere)", dest)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return &inputerr.Error{Err: fmt.Errorf("--extract %s: %w", dest, err)}
	}
	if Within(archive, real) {
		return inputerr.Errorf("--extract %s holds the archive %s; --force would delete it: extract into another directory", dest, archive)
	}
	if Within(".", real) {
		return inputerr.Errorf("--extract %s holds the current directory; --force would delete it: extract into another directory", dest)
	}
	if !force {
		return inputerr.Errorf("%s exists; use --force to replace it", dest)
	}
	return nil
}

// UnpackArchive writes the entries of a bundle archive under tmp. It reads the archive with
// WalkTar, as verifying does, so the entries verify refuses (a bad name, a second
// entry of a name, an entry under a link, a link leading out, a special file) are refused
// here too; files are still created exclusively and never through a link. Every error names
// the archive.
func UnpackArchive(ctx context.Context, archive, tmp string) error {
	r, err := openArchive(archive)
	var bad *badStream
	if errors.As(err, &bad) {
		return fmt.Errorf("archive %s: %w", archive, bad.err)
	}
	if err != nil {
		return err
	}
	defer r.Close()
	problems, err := WalkTar(r, func(e TarEntry) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		p := filepath.Join(tmp, filepath.FromSlash(e.Name))
		switch e.Type {
		case tar.TypeDir:
			return os.MkdirAll(p, 0o755)
		case tar.TypeSymlink:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			return os.Symlink(e.Linkname, p)
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if e.Mode&0o111 != 0 {
			mode = 0o755
		}
		out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
		if err != nil {
			return err
		}
		_, err = io.CopyBuffer(out, onlyReader{e.Contents}, make([]byte, 1<<20))
		if err == nil {
			err = out.Sync()
		}
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("%s: %w", e.Name, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("extracting %s: %w", archive, err)
	}
	if len(problems) > 0 {
		return problemsError(archive, problems)
	}
	return nil
}

// problemsError is one error listing every problem, one per line.
func problemsError(what string, ps []Problem) error {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = "  " + p.String()
	}
	return fmt.Errorf("%s is not a sound bundle (%d problems):\n%s", what, len(ps), strings.Join(lines, "\n"))
}

// ReadArchiveManifest reads the manifest of a bundle archive, streaming it only as far as
// manifest.json (entries are in name order, so bin/ and lib/ before it, never the model
// after it). It checks nothing else: verify does. What is not such an archive is an
// inputerr.Error.
func ReadArchiveManifest(name string) (*Manifest, error) {
	r, err := openArchive(name)
	var bad *badStream
	if errors.As(err, &bad) {
		return nil, inputerr.Errorf("archive %s: %v", name, err)
	}
	if err != nil {
		return nil, err
	}
	defer r.Close()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, inputerr.Errorf("archive %s has no %s: it is not a bundle archive (llbuild bundle --archive)", name, FileName)
		}
		if err != nil {
			return nil, inputerr.Errorf("archive %s: %v", name, err)
		}
		if strings.TrimPrefix(h.Name, "./") != FileName {
			continue
		}
		if h.Typeflag != tar.TypeReg {
			return nil, inputerr.Errorf("archive %s: %s is not a regular file", name, FileName)
		}
		m, err := Decode(tr)
		if err != nil {
			return nil, inputerr.Errorf("archive %s: %s: %v", name, FileName, err)
		}
		return m, nil
	}
}
