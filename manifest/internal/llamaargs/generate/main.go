// Command generate writes manifest/llamaargs_gen.go, the table of llama-server's options
// and their environment variables, from a llama.cpp source tree at the recipe's commit and
// llbuild's patch series:
//
//	go run ./manifest/internal/llamaargs/generate -src $LLBUILD_TEST_LLAMA_SOURCE -o manifest/llamaargs_gen.go
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/llbuild/llbuild/internal/atomicfile"
	"github.com/llbuild/llbuild/manifest/internal/llamaargs"
	"github.com/llbuild/llbuild/patches"
)

func main() {
	src := flag.String("src", os.Getenv("LLBUILD_TEST_LLAMA_SOURCE"), "llama.cpp source tree at the recipe's commit")
	out := flag.String("o", "llamaargs_gen.go", "file to write")
	flag.Parse()
	if err := run(*src, *out); err != nil {
		fmt.Fprintln(os.Stderr, "generate:", err)
		os.Exit(1)
	}
}

func run(src, out string) error {
	if src == "" {
		return fmt.Errorf("no source tree: give -src or set LLBUILD_TEST_LLAMA_SOURCE")
	}
	series, err := patches.Series()
	if err != nil {
		return err
	}
	data, err := llamaargs.Table("manifest", src, series)
	if err != nil {
		return err
	}
	return atomicfile.WriteFile(out, data, 0o644)
}
