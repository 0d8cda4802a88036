package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// defaultSettings are llbuild bench's flag defaults.
func defaultSettings() Settings {
	return Settings{Mode: ModeScreen, Canaries: -1, CanaryTokens: 16, Rows: -1, Prompt: PromptFilledLong, PromptTokens: 588, Generate: 512,
		Dir: "bench-runs", ReadyTimeout: 10 * time.Minute}
}

// The mode gives what is not set (canaries and rows below 0), the prompt's token count counts
// only for the filled-long prompt, a prompt file's text is the prompt, and the devices are read
// in their order.
func TestSettingsFillInTheModesDefaults(t *testing.T) {
	promptFile := filepath.Join(t.TempDir(), "p.txt")
	if err := os.WriteFile(promptFile, []byte("the prompt"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		set  func(*Settings)
		want func(o Options) string
	}{
		{"screen defaults", func(*Settings) {}, func(o Options) string {
			if o.Protocol.Canaries != 128 || o.Protocol.Rows != 1 || o.Protocol.PromptTokens != 588 || o.GPUs != nil || o.Dir != "bench-runs" {
				return "want the screen's 128 canaries and 1 row, 588 prompt tokens, no devices"
			}
			return ""
		}},
		{"full with rows given", func(s *Settings) { s.Mode, s.Rows = ModeFull, 3 }, func(o Options) string {
			if o.Protocol.Canaries != 384 || o.Protocol.Rows != 3 || o.Protocol.Mode != ModeFull {
				return "want full mode's 384 canaries and the 3 rows given"
			}
			return ""
		}},
		{"canaries 0 given", func(s *Settings) { s.Canaries = 0 }, func(o Options) string {
			if o.Protocol.Canaries != 0 {
				return "want no canaries"
			}
			return ""
		}},
		{"short prompt has no token count", func(s *Settings) { s.Prompt = PromptShort }, func(o Options) string {
			if o.Protocol.PromptTokens != 0 {
				return "want prompt tokens 0"
			}
			return ""
		}},
		{"prompt file", func(s *Settings) { s.PromptFile = promptFile }, func(o Options) string {
			p := o.Protocol
			if p.Prompt != PromptFile || p.PromptFile != promptFile || p.PromptText != "the prompt" || p.PromptTokens != 0 {
				return "want the file's text as the prompt, no token count"
			}
			return ""
		}},
		{"devices", func(s *Settings) { s.GPUs = " 2, 0 ,1" }, func(o Options) string {
			if strings.Join(o.GPUs, "|") != "2|0|1" {
				return "want devices 2, 0, 1"
			}
			return ""
		}},
		{"name and note", func(s *Settings) { s.Name, s.Note, s.Rounds = "p_split=0.25", "why", 4 }, func(o Options) string {
			if o.Name != "p_split=0.25" || o.Note != "why" || o.Rounds != 4 {
				return "want the name, the note and 4 rounds"
			}
			return ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := defaultSettings()
			tc.set(&s)
			o, err := s.Options()
			if err != nil {
				t.Fatalf("Options() error %v", err)
			}
			if problem := tc.want(o); problem != "" {
				t.Errorf("Options() = %+v: %s", o, problem)
			}
		})
	}
}

// Every problem of the protocol and the scheduling is reported at once, each naming its flag;
// a mode, a prompt file or a name that cannot be used is reported alone.
func TestSettingsReportTheirProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(*Settings)
		want string
	}{
		{"mode", func(s *Settings) { s.Mode, s.Rounds = "fast", -1 }, `--mode "fast": use screen or full`},
		{"prompt file", func(s *Settings) { s.PromptFile = "/nonexistent/p.txt" }, "--prompt-file: open /nonexistent/p.txt"},
		{"all together", func(s *Settings) { s.Rounds, s.GPUs, s.Rows, s.Generate = -1, "0,,1", 0, 1 },
			`bench: --rounds -1: must be 1 or more; --gpus "0,,1": give distinct device numbers separated by commas (0,1,2,3), or CUDA UUIDs as nvidia-smi -L prints them (GPU-...); rows 0: must be 1 to 1000 (row 0 is the headline); generate 1: must be at least 2 tokens to time decoding`},
		{"too many", func(s *Settings) {
			s.Rounds, s.Rows, s.Canaries, s.ReadyTimeout = 99999999999, 99999999999, 99999999999, -5*time.Second
		},
			`bench: --rounds 99999999999: at most 1000; --ready-timeout -5s: must be more than 0 (or 0 for the default, 10 minutes); canaries 99999999999: must be 0 to 100000; rows 99999999999: must be 1 to 1000`},
		{"a device twice", func(s *Settings) { s.GPUs = "0,1,0" }, `bench: --gpus "0,1,0"`},
		{"a device with a selector", func(s *Settings) { s.GPUs = "level_zero:0" }, `bench: --gpus "level_zero:0"`},
		{"a word", func(s *Settings) { s.GPUs = "abc" }, `bench: --gpus "abc"`},
		{"a negative number", func(s *Settings) { s.GPUs = "0,-1" }, `bench: --gpus "0,-1"`},
		{"a UUID with a space", func(s *Settings) { s.GPUs = "GPU-12 34" }, `bench: --gpus "GPU-12 34"`},
		{"label", func(s *Settings) { s.Name = "p split/0.25" }, `--label "p split/0.25": use letters, digits`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := defaultSettings()
			tc.set(&s)
			_, err := s.Options()
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("Options() error %v, want %q", err, tc.want)
			}
		})
	}
}

// --gpus takes device numbers, Level Zero sub-devices and CUDA's UUIDs.
func TestGPUsTakeNumbersAndUUIDs(t *testing.T) {
	for list, want := range map[string]string{
		"0":        "[0]",
		" 0, 1 ,2": "[0 1 2]",
		"1.0,1.1":  "[1.0 1.1]",
		"GPU-5d4e2f1a-0b3c-4d5e-8f90-123456789abc,3": "[GPU-5d4e2f1a-0b3c-4d5e-8f90-123456789abc 3]",
		"MIG-GPU-5d4e2f1a/1/0":                       "[MIG-GPU-5d4e2f1a/1/0]",
		"":                                           "[]",
	} {
		got, err := parseGPUs(list)
		if err != nil || fmt.Sprint(got) != want {
			t.Errorf("parseGPUs(%q) = %v, %v; want %s", list, got, err, want)
		}
	}
}

// A sweep's full run measures with full mode's canaries and rows but the sweep's own prompt,
// generation and chat; the canaries the user gave are kept.
func TestFullModeKeepsTheSweepsPromptAndGeneration(t *testing.T) {
	p, _ := DefaultProtocol(ModeScreen)
	p.Prompt, p.PromptTokens, p.Generate, p.CanaryTokens, p.Chat, p.Canaries = PromptFile, 0, 64, 8, true, 5
	p.PromptFile, p.PromptText = "f.txt", "text"
	for _, keep := range []bool{false, true} {
		fp := p.FullMode(keep)
		wantCanaries := 384
		if keep {
			wantCanaries = 5
		}
		if fp.Mode != ModeFull || fp.Rows != 8 || fp.Canaries != wantCanaries || fp.Prompt != PromptFile || fp.PromptText != "text" ||
			fp.PromptFile != "f.txt" || fp.Generate != 64 || fp.CanaryTokens != 8 || !fp.Chat {
			t.Errorf("FullMode(%v) = %+v, want full mode, %d canaries, 8 rows, the sweep's prompt, generation and chat", keep, fp, wantCanaries)
		}
	}
}

// A result counts when every run is valid; an interrupted one says where its runs are, and
// one with runs that do not count names each with its decision.
func TestResultErrSaysWhichRunsDoNotCount(t *testing.T) {
	run := func(label string, valid bool, decision string) *Record {
		r := &Record{Valid: valid, Decision: decision}
		r.Identity.Label = label
		return r
	}
	res := &Result{RecordsFile: "d/records.json", Runs: []*Record{run("a", true, "kept"), run("b", false, "canaries failed")}}
	if err := res.Err(); err == nil || err.Error() != "1 of 2 runs do not count:\n  b: canaries failed" {
		t.Errorf("Err() = %v, want b named with its decision", err)
	}
	res.Interrupted = true
	var ie *InterruptedError
	if err := res.Err(); !errors.As(err, &ie) || ie.RecordsFile != "d/records.json" {
		t.Errorf("Err() = %v, want an InterruptedError for d/records.json", err)
	}
	if err := (&Result{Runs: []*Record{run("a", true, "kept")}}).Err(); err != nil {
		t.Errorf("Err() = %v, want nil for valid runs", err)
	}
}

// A sweep stopped in its screen or its full run is interrupted whatever else went wrong; one
// that ran is fine only when it had a leader to judge.
func TestSweepErr(t *testing.T) {
	failed := errors.New("server failed")
	var ie *InterruptedError
	s := &SweepResult{Screen: &Result{RecordsFile: "r.json"}, Full: &Result{Interrupted: true, RecordsFile: "r.json"}}
	if err := s.Err(failed); !errors.As(err, &ie) || !errors.Is(err, failed) {
		t.Errorf("Err() = %v, want the interruption joined with the sweep's error", err)
	}
	s = &SweepResult{Screen: &Result{}, Conclusion: "no variant's screen was valid"}
	if err := s.Err(nil); err == nil || err.Error() != s.Conclusion {
		t.Errorf("Err() = %v, want the conclusion", err)
	}
	if err := s.Err(failed); err != failed {
		t.Errorf("Err() = %v, want %v", err, failed)
	}
	s.Leader = "x"
	if err := s.Err(nil); err != nil {
		t.Errorf("Err() = %v, want nil with a leader", err)
	}
}

// Opening stops at the first bundle that cannot be opened and removes what it had unpacked;
// Close removes every unpacked bundle.
func TestOpenBundlesLeavesNothingUnpackedOnAnError(t *testing.T) {
	removed := map[string]bool{}
	unpack := func(_ context.Context, name string) (string, func(), error) {
		if name == "missing" {
			return "", nil, errors.New("bundle missing: no such file")
		}
		return t.TempDir(), func() { removed[name] = true }, nil
	}
	// an empty directory does not verify: no manifest.json
	if _, err := OpenBundles(context.Background(), []string{"empty"}, "", unpack); err == nil || !removed["empty"] {
		t.Errorf("OpenBundles(empty) error %v, removed %v: want an error and the directory removed", err, removed)
	}
	if _, err := OpenBundles(context.Background(), nil, "missing", unpack); err == nil || err.Error() != "bundle missing: no such file" {
		t.Errorf("OpenBundles(control missing) error %v, want the unpacker's", err)
	}
	if _, err := SweepBundle(context.Background(), "missing", unpack, []string{"--poll"}, SweepOptions{}); err == nil || !strings.Contains(err.Error(), "--sweep") {
		t.Errorf("SweepBundle(bad setting) error %v, want the setting's before the bundle is opened", err)
	}
}
