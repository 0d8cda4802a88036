package preflight

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"github.com/llbuild/llbuild/internal/ggmlload"
	"github.com/llbuild/llbuild/preflight/x86"
	"github.com/llbuild/llbuild/targets"
)

// extFeature maps the decoder's extensions to the features a host description lists.
var extFeature = map[x86.Ext]targets.Feature{
	x86.SSE3: targets.SSE3, x86.SSSE3: targets.SSSE3, x86.SSE41: targets.SSE41, x86.SSE42: targets.SSE42,
	x86.POPCNT: targets.POPCNT, x86.LZCNT: targets.LZCNT, x86.CX16: targets.CX16,
	x86.AVX: targets.AVX, x86.AVX2: targets.AVX2, x86.FMA: targets.FMA, x86.F16C: targets.F16C,
	x86.BMI1: targets.BMI1, x86.BMI2: targets.BMI2, x86.AVXVNNI: targets.AVXVNNI,
	x86.AVX512F: targets.AVX512F, x86.AVX512CD: targets.AVX512CD, x86.AVX512VL: targets.AVX512VL,
	x86.AVX512DQ: targets.AVX512DQ, x86.AVX512BW: targets.AVX512BW, x86.AVX512VBMI: targets.AVX512VBMI,
	x86.AVX512VNNI: targets.AVX512VNNI, x86.AVX512BF16: targets.AVX512BF16,
	x86.AMXTile: targets.AMXTile, x86.AMXInt8: targets.AMXInt8, x86.AMXBF16: targets.AMXBF16,
	x86.MOVBE: targets.MOVBE, x86.ADX: targets.ADX, x86.AES: targets.AES, x86.PCLMUL: targets.PCLMULQDQ,
	x86.SHA: targets.SHA, x86.GFNI: targets.GFNI, x86.VAES: targets.VAES, x86.VPCLMUL: targets.VPCLMULQDQ,
	x86.FMA4: targets.FMA4, x86.XOP: targets.XOP, x86.SSE4A: targets.SSE4A, x86.ThreeDNow: targets.ThreeDNow,
	x86.RDRAND: targets.RDRAND, x86.RDSEED: targets.RDSEED, x86.RTM: targets.RTM, x86.XSAVE: targets.XSAVE,
	x86.XSAVEOPT: targets.XSAVEOPT, x86.XSAVEC: targets.XSAVEC, x86.XSAVES: targets.XSAVES, x86.PKU: targets.PKU,
	x86.RDTSCP: targets.RDTSCP, x86.RDPID: targets.RDPID, x86.CLWB: targets.CLWB, x86.CLFLUSHOPT: targets.CLFLUSHOPT,
	x86.CMPCCXADD: targets.CMPCCXADD, x86.AVXVNNIINT8: targets.AVXVNNIINT8, x86.AVXVNNIINT16: targets.AVXVNNIINT16,
	x86.AVXIFMA: targets.AVXIFMA, x86.AVXNECONVERT: targets.AVXNECONVERT, x86.AVX512VBMI2: targets.AVX512VBMI2,
	x86.AVX512FP16: targets.AVX512FP16, x86.AVX512IFMA: targets.AVX512IFMA, x86.AVX512VPOPCNTDQ: targets.AVX512VPOPCNTDQ,
	x86.AVX512BITALG: targets.AVX512BITALG, x86.AVX512VP2INTERSECT: targets.AVX512VP2INTERSECT,
	x86.AVX5124VNNIW: targets.AVX5124VNNIW, x86.AMXFP16: targets.AMXFP16,
}

// impliedFeatures are what a host description's features imply: every CPU with the first
// has the others (x86-64-v2 for SSE4.2; LZCNT came with BMI1 on Intel and AMD; AVX state
// needs XSAVE enabled by the OS).
var impliedFeatures = map[targets.Feature][]targets.Feature{
	targets.SSE42: {targets.SSE3, targets.SSSE3, targets.SSE41, targets.POPCNT, targets.CX16},
	targets.SSE41: {targets.SSE3, targets.SSSE3},
	targets.SSSE3: {targets.SSE3},
	targets.BMI1:  {targets.LZCNT},
	targets.AVX:   {targets.XSAVE},
}

// cpuHost is a host CPU as the decoder's extension bits: what it has. A host description
// can name every extension the decoder knows, so every bit is known; one it does not list
// is absent.
type cpuHost struct{ has, known x86.Ext }

func newCPUHost(fs targets.FeatureSet) cpuHost {
	full := targets.FeatureSet{}
	for f := range fs {
		full[f] = true
		for _, g := range impliedFeatures[f] {
			full[g] = true
		}
	}
	var h cpuHost
	for e, f := range extFeature {
		h.known |= e
		if full[f] {
			h.has |= e
		}
	}
	return h
}

// foreignCPU are the ELF machines of CPUs other than x86 (machineName's names), whose code an
// x86-64 host cannot run. Others (a GPU's code object, 32-bit x86) stay unknown.
var foreignCPU = map[string]bool{
	"aarch64": true, "ARM": true, "PPC64": true, "PPC": true, "S390": true, "RISCV": true,
	"MIPS": true, "SPARCV9": true, "LOONGARCH": true, "IA_64": true,
}

// cpuVerdict checks one binary's instructions against the host.
func cpuVerdict(b *Binary, h cpuHost) Verdict {
	v := Verdict{Check: CheckCPU, Subject: b.Path}
	if b.Code == nil {
		if foreignCPU[b.Machine] {
			// every host preflight checks is x86-64 (its CPU is a set of x86 features): the
			// code of another CPU cannot run there at all
			v.Status, v.Reason = Fail, fmt.Sprintf("%s code: an x86-64 CPU cannot run it (exec format error)", b.Machine)
			v.Fix = "build for this host's architecture: llbuild build --target with an x86-64 target"
			return v
		}
		v.Status, v.Reason = Unknown, fmt.Sprintf("%s code is not decoded (only x86-64 is)", b.Machine)
		return v
	}
	c := b.Code
	need := c.Uses &^ x86.Unclassified
	disp := c.Dispatched &^ x86.Unclassified
	missing := need & h.known &^ h.has
	missingDispatched := disp & h.known &^ h.has &^ missing
	unknown := (need | disp) &^ h.known
	if missing != 0 && b.System {
		v.Status = Unknown
		v.Reason = fmt.Sprintf("uses %s, which the CPU lacks, in code no ifunc resolver chooses; %s is a system library, which may test CPUID itself before running such code (glibc does before its RTM lock elision and the PKU instructions of pkey_get/pkey_set), and preflight cannot follow such tests: whether that code runs is not known", featureList(missing), path.Base(b.Path))
		v.Evidence = evidence(b, c.Examples, missing, 6)
		v.Fix = "system libraries come from the host or image they run on; check llama.cpp's own files, which ship with the build"
		return v
	}
	if missing == x86.LZCNT {
		// lzcnt is F3 0F BD: a CPU without it ignores the prefix and runs bsr, which answers
		// another question (the highest set bit's index, not the count of leading zeros; 0
		// leaves the destination undefined). Nothing traps: the results are wrong.
		v.Status = Fail
		v.Reason = "uses LZCNT, which the CPU lacks: no SIGILL, the CPU runs those instructions as BSR, which returns a different result: the code would compute wrong results"
		if c.IFuncResolvers > 0 || len(c.CPUIDChosen) > 0 {
			v.Reason += " (outside the functions picked at run time by " + choosers(c) + ")"
		}
		v.Evidence = evidence(b, c.Examples, missing, 6)
		v.Fix = "rebuild " + path.Base(b.Path) + " with -mno-lzcnt in its compile flags (CMAKE_C_FLAGS and CMAKE_CXX_FLAGS: a library ggml's GGML_<ISA> options do not reach, such as libmtmd, takes only those), or run it on a CPU with LZCNT (every x86-64-v3 CPU has it)"
		return v
	}
	if missing != 0 {
		v.Status = Fail
		v.Reason = fmt.Sprintf("uses %s, which the CPU lacks: SIGILL (illegal instruction) when that code runs", featureList(missing))
		if missing&x86.LZCNT != 0 {
			v.Reason += "; its LZCNT instructions would not trap but run as BSR and compute wrong results"
		}
		if c.IFuncResolvers > 0 || len(c.CPUIDChosen) > 0 {
			v.Reason += " (outside the functions picked at run time by " + choosers(c) + ")"
		}
		v.Evidence = evidence(b, c.Examples, missing, 6)
		v.Fix = "rebuild with those ISA options off (GGML_NATIVE=OFF and explicit GGML_<ISA> flags), or ship ggml's per-CPU variants (GGML_BACKEND_DL + GGML_CPU_ALL_VARIANTS)"
		return v
	}
	var unsure []string
	if unknown != 0 {
		unsure = append(unsure, fmt.Sprintf("uses %s, which the host description does not cover", unknown))
		v.Evidence = evidence(b, c.Examples, unknown, 6)
		v.Evidence = append(v.Evidence, evidence(b, c.DispatchedExamples, unknown&^need, 6)...)
	}
	if (c.Uses|c.Dispatched)&x86.Unclassified != 0 {
		unsure = append(unsure, fmt.Sprintf("has %d instructions whose opcode the decoder's tables do not name, so what they need is not known", c.Extensions[x86.Unclassified.String()]+c.DispatchedExtensions[x86.Unclassified.String()]))
		v.Evidence = append(v.Evidence, evidence(b, c.Examples, x86.Unclassified, 4)...)
		v.Evidence = append(v.Evidence, evidence(b, c.DispatchedExamples, x86.Unclassified, 4)...)
	}
	if n := c.DecodeErrors; n > 0 {
		unsure = append(unsure, fmt.Sprintf("has %d bytes of executable code that do not decode as an instruction the decoder knows (data in code, or an encoding it lacks)", n))
		v.Evidence = append(v.Evidence, fmt.Sprintf("%s %s  does not decode", path.Base(b.Path), c.FirstDecodeErrorAt))
	}
	if len(unsure) > 0 {
		v.Status = Unknown
		v.Reason = strings.Join(unsure, "; ")
		v.Fix = "check the listed bytes with objdump -d; report an instruction the decoder should know"
		return v
	}
	rest, outside := "baseline x86-64 only", "needs nothing beyond baseline x86-64"
	if need != 0 {
		rest = "uses " + featureList(need) + "; the CPU has them"
		outside = "uses " + featureList(need) + ", which the CPU has"
	}
	if missingDispatched != 0 {
		v.Status = Dispatched
		v.Reason = fmt.Sprintf("uses %s, which the CPU lacks, only in functions picked at run time by a CPUID test (%s): they run only if that test picks them on this CPU; the code outside them %s",
			featureList(missingDispatched), choosers(c), outside)
		v.Evidence = evidence(b, c.DispatchedExamples, missingDispatched, 6)
		return v
	}
	v.Status = OK
	v.Reason = rest
	if more := disp &^ need; more != 0 {
		v.Reason += fmt.Sprintf("; its functions picked at run time by a CPUID test (%s) use %s, which the CPU also has", choosers(c), featureList(more))
	}
	if len(b.SystemLibs) > 0 {
		v.Reason += "; the system libraries it loads (" + strings.Join(b.SystemLibs, " ") + ") are not decoded, as in bundles: they choose their code by CPUID at run time"
	}
	return v
}

// loadVerdict judges the code of a variant ggml does not pick that still runs: its loader
// dlopens every variant to call its ggml_backend_score, which runs the variant's
// constructors and ifunc resolvers as well (the plain libggml-cpu.so is only dlopened when
// it loads). judged is false when that code needs nothing the host lacks.
func loadVerdict(b *Binary, h cpuHost, s GGMLVariant) (v Verdict, judged bool) {
	if s.Variant == "(fallback)" || b.Code == nil {
		return v, false
	}
	c := b.Code
	v = Verdict{Check: CheckCPU, Subject: b.Path}
	need := c.LoadUses &^ x86.Unclassified
	missing := need & h.known &^ h.has
	var exts []string
	for _, in := range c.LoadExamples {
		exts = append(exts, fmt.Sprintf("%s %s+%#x in %s: %s  %s  needs %s", path.Base(b.Path), in.Section, in.Addr, in.Function, in.Bytes, in.Encoding, in.Needs))
	}
	const loads = "ggml's loader picks another variant, but it dlopens every variant to call its ggml_backend_score, which runs the variant's constructors and ifunc resolvers too"
	switch {
	case missing != 0:
		v.Status = Fail
		v.Reason = fmt.Sprintf("%s, and that code uses %s, which the CPU lacks: SIGILL while ggml loads its backends", loads, featureList(missing))
		v.Evidence = exts
		v.Fix = "build the variants' constructors (static initializers) and cpu-feats.cpp without the variant's ISA flags, as ggml's CMake does for cpu-feats.cpp"
	case c.LoadError != "":
		v.Status, v.Reason = Unknown, fmt.Sprintf("%s; that code could not be followed (%s)", loads, c.LoadError)
	case c.LoadIndirect > 0:
		v.Status, v.Reason = Unknown, fmt.Sprintf("%s; that code makes %d calls through function pointers, which preflight does not follow, so what they run is not known", loads, c.LoadIndirect)
	case c.LoadUses&x86.Unclassified != 0 || need&^h.known != 0:
		v.Status, v.Reason = Unknown, fmt.Sprintf("%s; that code has instructions whose needs are not known", loads)
		v.Evidence = exts
	default:
		return v, false
	}
	return v, true
}

// choosers says what picks a file's dispatched functions: its ifunc resolvers, the runtimes
// of CPUIDChosen, or both.
func choosers(c *CodeFacts) string {
	var who []string
	if c.IFuncResolvers > 0 {
		who = append(who, fmt.Sprintf("the file's ifunc resolvers, %d", c.IFuncResolvers))
	}
	for _, w := range c.CPUIDChosen {
		who = append(who, w+", linked into the file")
	}
	return strings.Join(who, " or ")
}

// featureList names extensions as host features (deduplicated) where they map to one.
func featureList(e x86.Ext) string {
	seen := map[string]bool{}
	var out []string
	e.Each(func(b x86.Ext) {
		name := b.String()
		if f, ok := extFeature[b]; ok {
			name = string(f)
		}
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	})
	return strings.Join(out, " ")
}

// evidence lists up to max distinct instructions (by address) that need one of exts,
// taking the first example of every extension before the second of any.
func evidence(b *Binary, examples map[x86.Ext][]Instruction, exts x86.Ext, max int) []string {
	var out []string
	seen := map[uint64]bool{}
	base := path.Base(b.Path)
	if n := exts.Count(); n > max {
		max = n // at least one example of every extension
	}
	for round := 0; round < x86.SamplesPerExt; round++ {
		exts.Each(func(e x86.Ext) {
			ex := examples[e]
			if len(out) >= max || round >= len(ex) || seen[ex[round].Addr] {
				return
			}
			in := ex[round]
			seen[in.Addr] = true
			desc := in.Encoding
			if in.Mnemonic != "" {
				desc = in.Mnemonic + " (" + in.Encoding + ")"
			}
			fn := ""
			if in.Function != "" {
				fn = " in " + in.Function
			}
			out = append(out, fmt.Sprintf("%s %s+%#x%s: %s  %s  needs %s", base, in.Section, in.Addr, fn, in.Bytes, desc, in.Needs))
		})
	}
	return out
}

// ggmlVariantFlags are the ISA options each x86 libggml-cpu-<variant>.so is compiled
// with (ggml/src/CMakeLists.txt, GGML_CPU_ALL_VARIANTS).
var ggmlVariantFlags = map[string][]string{
	"x64":            {},
	"sse42":          {"SSE42"},
	"sandybridge":    {"SSE42", "AVX"},
	"ivybridge":      {"SSE42", "AVX", "F16C"},
	"piledriver":     {"SSE42", "AVX", "F16C", "FMA"},
	"haswell":        {"SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2"},
	"skylakex":       {"SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512"},
	"cannonlake":     {"SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512", "AVX512_VBMI"},
	"cascadelake":    {"SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512", "AVX512_VNNI"},
	"icelake":        {"SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512", "AVX512_VBMI", "AVX512_VNNI"},
	"cooperlake":     {"SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512", "AVX512_VNNI", "AVX512_BF16"},
	"zen4":           {"SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16"},
	"alderlake":      {"SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX_VNNI"},
	"sapphirerapids": {"SSE42", "AVX", "F16C", "FMA", "AVX2", "BMI2", "AVX512", "AVX512_VBMI", "AVX512_VNNI", "AVX512_BF16", "AMX_TILE", "AMX_INT8"},
}

// ggmlScoreTerms is ggml_backend_cpu_x86_score (ggml-cpu/arch/x86/cpu-feats.cpp): one term
// per compiled-in option, its weight, and the CPU features it requires. AMX_TILE is
// compiled into sapphirerapids but not scored.
var ggmlScoreTerms = []struct {
	flag   string
	weight int
	needs  []targets.Feature
}{
	{"FMA", 1, []targets.Feature{targets.FMA}},
	{"F16C", 1 << 1, []targets.Feature{targets.F16C}},
	{"SSE42", 1 << 2, []targets.Feature{targets.SSE42}},
	{"BMI2", 1 << 3, []targets.Feature{targets.BMI2}},
	{"AVX", 1 << 4, []targets.Feature{targets.AVX}},
	{"AVX2", 1 << 5, []targets.Feature{targets.AVX2}},
	{"AVX_VNNI", 1 << 6, []targets.Feature{targets.AVXVNNI}},
	{"AVX512", 1 << 7, targets.AVX512Foundation},
	{"AVX512_VBMI", 1 << 8, []targets.Feature{targets.AVX512VBMI}},
	{"AVX512_BF16", 1 << 9, []targets.Feature{targets.AVX512BF16}},
	{"AVX512_VNNI", 1 << 10, []targets.Feature{targets.AVX512VNNI}},
	{"AMX_INT8", 1 << 11, []targets.Feature{targets.AMXInt8}},
}

// GGMLScore returns the score ggml's loader gives a CPU variant compiled with flags on a
// CPU with features fs, and the flags that made it 0. Like ggml it reads CPUID bits only;
// the host description's features already include OS support for AVX and AVX-512 state.
func GGMLScore(flags []string, fs targets.FeatureSet) (score int, missing []string) {
	on := map[string]bool{}
	for _, f := range flags {
		on[f] = true
	}
	score = 1
	for _, t := range ggmlScoreTerms {
		if !on[t.flag] {
			continue
		}
		if !fs.Has(t.needs...) {
			missing = append(missing, t.flag)
			continue
		}
		score += t.weight
	}
	if len(missing) > 0 {
		return 0, missing
	}
	return score, nil
}

// flagsFromCode estimates the ISA options of a variant whose name ggml's list does not
// know, from the instructions its code uses.
func flagsFromCode(b *Binary) []string {
	if b.Code == nil {
		return nil
	}
	u := b.Code.Uses
	var flags []string
	add := func(cond bool, f string) {
		if cond {
			flags = append(flags, f)
		}
	}
	add(u&(x86.SSE42|x86.SSE41|x86.SSSE3|x86.SSE3|x86.POPCNT) != 0, "SSE42")
	add(u&x86.AVX != 0, "AVX")
	add(u&x86.F16C != 0, "F16C")
	add(u&x86.FMA != 0, "FMA")
	add(u&x86.AVX2 != 0, "AVX2")
	add(u&x86.BMI2 != 0, "BMI2")
	add(u&x86.AVXVNNI != 0, "AVX_VNNI")
	add(u&x86.AVX512F != 0, "AVX512")
	add(u&x86.AVX512VBMI != 0, "AVX512_VBMI")
	add(u&x86.AVX512VNNI != 0, "AVX512_VNNI")
	add(u&x86.AVX512BF16 != 0, "AVX512_BF16")
	add(u&x86.AMXInt8 != 0, "AMX_INT8")
	return flags
}

// GGMLChoice is what ggml's loader would do with the CPU variants in one directory.
type GGMLChoice struct {
	Dir string `json:"dir"`
	// Loaded is the file that would load, "" when every variant scores 0.
	Loaded string        `json:"loaded"`
	Scores []GGMLVariant `json:"scores"`
}

// GGMLVariant is one variant's score.
type GGMLVariant struct {
	File    string   `json:"file"`
	Variant string   `json:"variant"`
	Score   int      `json:"score"`
	Missing []string `json:"missing,omitempty"`
	// Estimated is set when the variant's options were read off its code, not ggml's list.
	Estimated bool `json:"estimated,omitempty"`
}

// ggmlChoices groups the binaries that are ggml CPU variants by search (or, for backends no
// search found, by directory) and scores them. Only files named exactly .so count: ggml's
// loader skips libggml-cpu-haswell.so.0.
func ggmlChoices(bins []*Binary, fs targets.FeatureSet) []GGMLChoice {
	byDir := map[string][]*Binary{}
	fallback := map[string]*Binary{}
	for _, b := range bins {
		if _, ok := ggmlBackendFile(path.Base(b.Path)); !ok {
			continue
		}
		d := b.GGMLSearch
		if d == "" {
			d = path.Dir(b.Path)
		}
		switch {
		case b.GGMLVariant() != "":
			byDir[d] = append(byDir[d], b)
		case path.Base(b.Path) == "libggml-cpu.so" && fallback[d] == nil:
			fallback[d] = b
		}
	}
	var dirs []string
	for d := range byDir {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	var out []GGMLChoice
	for _, d := range dirs {
		c := GGMLChoice{Dir: d}
		best := 0
		for _, b := range byDir[d] {
			name := b.GGMLVariant()
			flags, ok := ggmlVariantFlags[name]
			if !ok {
				flags = flagsFromCode(b)
			}
			s, miss := GGMLScore(flags, fs)
			c.Scores = append(c.Scores, GGMLVariant{File: b.Path, Variant: name, Score: s, Missing: miss, Estimated: !ok})
			// ggml keeps the first variant with the highest score; it meets them in directory order.
			if s > best {
				best, c.Loaded = s, b.Path
			}
		}
		// With every variant at 0 ggml loads the plain libggml-cpu.so of the search (the
		// first of its directories that has one).
		if fb := fallback[d]; fb != nil {
			v := GGMLVariant{File: fb.Path, Variant: "(fallback)", Score: 0}
			if c.Loaded == "" {
				c.Loaded = fb.Path
			}
			c.Scores = append(c.Scores, v)
		}
		out = append(out, c)
	}
	return out
}

// CPUBackendChoice is ggml's choice among CPU backends that one search finds (ggml scores
// them together) on a CPU with features fs: the variant that scores highest, else the plain
// libggml-cpu.so. Its Loaded is "" when neither is there.
func CPUBackendChoice(bins []*Binary, fs targets.FeatureSet) GGMLChoice {
	var group []*Binary
	for _, b := range bins {
		c := *b
		c.GGMLSearch = "one search"
		group = append(group, &c)
	}
	for _, c := range ggmlChoices(group, fs) {
		return c
	}
	for _, b := range bins {
		if path.Base(b.Path) == "libggml-cpu.so" {
			return GGMLChoice{Dir: path.Dir(b.Path), Loaded: b.Path, Scores: []GGMLVariant{{File: b.Path, Variant: "(fallback)"}}}
		}
	}
	return GGMLChoice{}
}

// KnownGGMLVariant reports whether name is a CPU variant of ggml's list
// (libggml-cpu-haswell.so), whose options preflight knows without decoding its code.
func KnownGGMLVariant(name string) bool {
	_, ok := ggmlVariantFlags[ggmlload.Variant(name)]
	return ok && strings.HasPrefix(name, "libggml-cpu-")
}

func ggmlVerdict(c GGMLChoice) Verdict {
	v := Verdict{Check: CheckGGMLVariant, Subject: c.Dir}
	var parts []string
	for _, s := range c.Scores {
		est := ""
		if s.Estimated {
			est = "~"
		}
		parts = append(parts, fmt.Sprintf("%s=%s%d", s.Variant, est, s.Score))
	}
	v.Evidence = []string{"scores: " + strings.Join(parts, " ")}
	if c.Loaded == "" {
		v.Status = Fail
		v.Reason = fmt.Sprintf("all %d libggml-cpu variants here score 0 on this CPU: ggml would load no CPU backend", len(c.Scores))
		v.Fix = "ship a variant the CPU can run (GGML_CPU_ALL_VARIANTS includes x64 and sse42)"
		return v
	}
	for _, s := range c.Scores {
		switch {
		case s.File != c.Loaded:
		case s.Variant == "(fallback)":
			v.Status = OK
			v.Reason = fmt.Sprintf("every variant scores 0 on this CPU, so ggml would load the plain %s", c.Loaded)
		default:
			v.Status = OK
			v.Reason = fmt.Sprintf("ggml would load %s (score %d)", path.Base(c.Loaded), s.Score)
		}
	}
	return v
}
