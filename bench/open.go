package bench

import "context"

// Unpacker makes a bundle named on a command line (a directory or an archive) a directory:
// manifest.OpenDir, or a caller's wrapper of it that marks its errors. cleanup removes what it
// unpacked.
type Unpacker func(ctx context.Context, name string) (dir string, cleanup func(), err error)

// Opened are the bundles of a bench as named on a command line, unpacked and opened.
type Opened struct {
	// Bundles are in the order named; Dirs are where they lie as the Unpacker gave them (a
	// directory's own name, relative if it was). Control is the control bundle, nil without one.
	Bundles []*Bundle
	Dirs    []string
	Control *Bundle

	cleanups []func()
}

// OpenBundles unpacks (unpack) and opens (OpenBundle) each named bundle in order, then the
// control bundle when control is not "". Close removes what was unpacked; on an error nothing
// stays unpacked.
func OpenBundles(ctx context.Context, names []string, control string, unpack Unpacker) (*Opened, error) {
	o := &Opened{}
	open := func(name string) (*Bundle, string, error) {
		dir, cleanup, err := unpack(ctx, name)
		if err != nil {
			return nil, "", err
		}
		o.cleanups = append(o.cleanups, cleanup)
		b, err := OpenBundle(dir, name)
		return b, dir, err
	}
	for _, name := range names {
		b, dir, err := open(name)
		if err != nil {
			o.Close()
			return nil, err
		}
		o.Bundles, o.Dirs = append(o.Bundles, b), append(o.Dirs, dir)
	}
	if control != "" {
		var err error
		if o.Control, _, err = open(control); err != nil {
			o.Close()
			return nil, err
		}
	}
	return o, nil
}

// Close removes the bundles that were unpacked from archives.
func (o *Opened) Close() {
	for _, c := range o.cleanups {
		c()
	}
	o.cleanups = nil
}
