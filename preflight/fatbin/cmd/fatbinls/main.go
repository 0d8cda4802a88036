// Command fatbinls prints the CUDA kernels in ELF files' .nv_fatbin sections the way
// `cuobjdump --list-elf --list-ptx` names them, so the two listings can be diffed on a
// machine with the CUDA toolkit.
package main

import (
	"debug/elf"
	"fmt"
	"os"
	"path/filepath"

	"github.com/llbuild/llbuild/preflight/fatbin"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: fatbinls ELF-FILE...")
		os.Exit(2)
	}
	code := 0
	for _, path := range os.Args[1:] {
		if err := list(path); err != nil {
			fmt.Fprintf(os.Stderr, "fatbinls: %s: %v\n", path, err)
			code = 1
		}
	}
	os.Exit(code)
}

func list(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sec := f.Section(".nv_fatbin")
	if sec == nil {
		return fmt.Errorf("no .nv_fatbin section")
	}
	data, err := sec.Data()
	if err != nil {
		return err
	}
	entries, err := fatbin.Parse(data)
	base := filepath.Base(path)
	nELF, nPTX := 0, 0
	for _, e := range entries {
		switch e.Kind {
		case fatbin.Cubin:
			nELF++
			fmt.Printf("ELF file %4d: %s\n", nELF, e.CuobjdumpName(base, nELF))
		case fatbin.PTX:
			nPTX++
			fmt.Printf("PTX file %4d: %s\n", nPTX, e.CuobjdumpName(base, nPTX))
		}
	}
	return err
}
