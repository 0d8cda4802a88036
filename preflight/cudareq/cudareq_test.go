package cudareq

import (
	"errors"
	"os"
	"strings"
	"testing"
)

func readReq(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

var (
	olaresDriver = Driver{CUDA: "13.1", Version: "590.44.01"} // R590
	driver610    = Driver{CUDA: "13.3", Version: "610.12"}    // an R610 driver
	h200Driver   = Driver{CUDA: "13.0", Version: "580.159.04"}
	driver575    = Driver{CUDA: "12.9", Version: "575.57.08"}
	rtx5090      = Device{Arch: "12.0", Brand: "GeForce"}
	datacenter   = Device{Arch: "9.0", Brand: "Tesla"}
)

func TestImageRequirementsAgainstDrivers(t *testing.T) {
	for _, c := range []struct {
		name    string
		file    string
		drv     Driver
		devs    []Device
		wantMsg string // "" = starts
	}{
		{"13.3 image, R590 driver, GeForce: only cuda>=13.3 could pass", "cuda-13.3.require", olaresDriver, []Device{rtx5090},
			"nvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.3, please update your driver to a newer version, or use an earlier cuda container"},
		{"13.3 image, R590 driver, datacenter GPU: the 590 band passes", "cuda-13.3.require", olaresDriver, []Device{datacenter}, ""},
		{"13.3 image, R610 driver, GeForce", "cuda-13.3.require", driver610, []Device{rtx5090}, ""},
		{"13.1.1 image, R590 driver, GeForce", "cuda-13.1.1.require", olaresDriver, []Device{rtx5090}, ""},
		{"13.1.1 image, R610 driver, datacenter GPU", "cuda-13.1.1.require", driver610, []Device{datacenter}, ""},
		{"13.2.0 image, R590 driver, GeForce", "cuda-13.2.0.require", olaresDriver, []Device{rtx5090},
			"nvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.2, please update your driver to a newer version, or use an earlier cuda container"},
		{"13.2.0 image, R580 driver, H200: the 580 band passes", "cuda-13.2.0.require", h200Driver, []Device{datacenter}, ""},
		{"13.2.0 image, R575 driver, datacenter GPU: no band for 575", "cuda-13.2.0.require", driver575, []Device{datacenter},
			"nvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.2, please update your driver to a newer version, or use an earlier cuda container"},
		{"13.3 image, R590 driver, a datacenter GPU and a GeForce: every GPU must pass", "cuda-13.3.require", olaresDriver, []Device{datacenter, rtx5090},
			"nvidia-container-cli: requirement error: unsatisfied condition: cuda>=13.3, please update your driver to a newer version, or use an earlier cuda container"},
		{"13.3 image, R590 driver, no GPU visible: brand terms hold", "cuda-13.3.require", olaresDriver, nil, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Check([]string{readReq(t, c.file)}, c.drv, c.devs)
			got := ""
			if err != nil {
				got = CLIMessage(err)
			}
			if got != c.wantMsg {
				t.Errorf("Check = %q, want %q", got, c.wantMsg)
			}
		})
	}
}

func TestRequirementsFromEnv(t *testing.T) {
	for _, c := range []struct {
		name string
		env  map[string]string
		want string
	}{
		{"NVIDIA_REQUIRE_CUDA wins over CUDA_VERSION", map[string]string{"NVIDIA_REQUIRE_CUDA": "cuda>=13.1", "CUDA_VERSION": "13.1.1"}, "cuda>=13.1"},
		{"legacy image: CUDA_VERSION alone", map[string]string{"CUDA_VERSION": "12.4.1"}, "cuda>=12.4"},
		{"NVIDIA_DISABLE_REQUIRE=true skips everything", map[string]string{"NVIDIA_REQUIRE_CUDA": "cuda>=13.3", "NVIDIA_DISABLE_REQUIRE": "true"}, ""},
		{"NVIDIA_DISABLE_REQUIRE=1 counts as true", map[string]string{"NVIDIA_REQUIRE_CUDA": "cuda>=13.3", "NVIDIA_DISABLE_REQUIRE": "1"}, ""},
		{"NVIDIA_DISABLE_REQUIRE=yes is not a boolean", map[string]string{"NVIDIA_REQUIRE_CUDA": "cuda>=13.3", "NVIDIA_DISABLE_REQUIRE": "yes"}, "cuda>=13.3"},
		{"every NVIDIA_REQUIRE_ but JETPACK", map[string]string{"NVIDIA_REQUIRE_ARCH": "arch>=8.0", "NVIDIA_REQUIRE_CUDA": "cuda>=13.0", "NVIDIA_REQUIRE_JETPACK": "csv-mounts=all"}, "arch>=8.0|cuda>=13.0"},
		{"no CUDA at all", map[string]string{"PATH": "/bin"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := Requirements(c.env)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(got, "|") != c.want {
				t.Errorf("Requirements = %q, want %q", got, c.want)
			}
		})
	}
	if _, err := Requirements(map[string]string{"CUDA_VERSION": "thirteen"}); err == nil {
		t.Error("Requirements(CUDA_VERSION=thirteen) = nil error, want one")
	}
}

func TestCompareVersion(t *testing.T) {
	for _, c := range []struct {
		a    string
		op   string
		b    string
		want bool
	}{
		{"13.1", ">=", "13.3", false},
		{"13.3", ">=", "13.3", true},
		{"13.10", ">=", "13.9", true}, // numeric, not lexical
		{"13.1", "=", "13.1.0", true},
		{"13.1", "<", "13.1.0", false},
		{"590.44.01", ">=", "590", true},
		{"590.44.01", "<", "591", true},
		{"590.44.01", "<", "590", false},
		{"590", "<", "590.44.01", true},
		{"590", "!=", "590.0.0", false},
		{"12.0", ">", "9.0", true},
		{"9.0", "<=", "8.9", false},
	} {
		got, err := compareVersion(c.a, operators[c.op], c.b)
		if err != nil || got != c.want {
			t.Errorf("compareVersion(%s %s %s) = %v, %v; want %v", c.a, c.op, c.b, got, err, c.want)
		}
	}
}

func TestInvalidExpressions(t *testing.T) {
	for _, expr := range []string{
		"cuda>=13.x", "cuda==13.1", "gpu>=1", ">=13", "cuda>=", "brand>=geforce", "cuda=>13.1",
	} {
		err := Check([]string{expr}, olaresDriver, []Device{rtx5090})
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("Check(%q) = %v, want ErrInvalid", expr, err)
		}
	}
	// As in nvidia-container-cli, a condition after a failing one in the same term is never
	// evaluated, so it cannot make the expression invalid.
	if err := Check([]string{"cuda>=99,gpu>=1 cuda>=13.0"}, olaresDriver, nil); err != nil {
		t.Errorf("Check with a skipped bad condition = %v, want nil", err)
	}
}

func TestMessageQuotesFirstTerm(t *testing.T) {
	// nvidia-container-cli names the first term whichever one failed.
	err := Check([]string{"arch<9.0 brand=tesla"}, olaresDriver, []Device{rtx5090})
	if got, want := CLIMessage(err), "nvidia-container-cli: requirement error: unsatisfied condition: arch<9.0"; got != want {
		t.Errorf("CLIMessage = %q, want %q", got, want)
	}
	var u *UnsatisfiedError
	if !errors.As(err, &u) || u.Device != 0 {
		t.Errorf("error = %#v, want an UnsatisfiedError for device 0", err)
	}
}

func FuzzCheck(f *testing.F) {
	f.Add("cuda>=13.3 brand=tesla,driver>=590,driver<591", "13.1", "590.44.01", "12.0", "geforce")
	f.Add("arch>=8.0,,cuda!=1 ,", "13.3", "610.1", "9.0", "tesla")
	f.Fuzz(func(t *testing.T, expr, cuda, driver, arch, brand string) {
		err := Check([]string{expr}, Driver{CUDA: cuda, Version: driver}, []Device{{Arch: arch, Brand: brand}})
		if err != nil {
			_ = CLIMessage(err)
		}
	})
}

// TestUnknownBrandIsUndecided: nvidia-container-cli reads the brand from NVML, so a host
// description without one cannot say how brand= terms come out. Where they decide the
// outcome (a GeForce fails where a datacenter GPU passes) the answer is undecided, never
// satisfied; where they cannot change it, the answer stands.
func TestUnknownBrandIsUndecided(t *testing.T) {
	noBrand := Device{Arch: "12.0"}
	r580 := Driver{CUDA: "13.0", Version: "580.95.05"}
	for _, c := range []struct {
		name string
		file string
		drv  Driver
		want string // "ok", "unsatisfied", "undecided"
	}{
		{"13.3 image, R590 driver: a GeForce fails, a Tesla passes", "cuda-13.3.require", olaresDriver, "undecided"},
		{"13.1.1 image, R580 driver: the 580 band needs a non-GeForce brand", "cuda-13.1.1.require", r580, "undecided"},
		{"13.3 image, R610 driver: cuda>=13.3 holds whatever the brand", "cuda-13.3.require", driver610, "ok"},
		{"13.2.0 image, R575 driver: no brand has a 575 band", "cuda-13.2.0.require", driver575, "unsatisfied"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := Check([]string{readReq(t, c.file)}, c.drv, []Device{noBrand})
			var u *UndecidedError
			var un *UnsatisfiedError
			got := "ok"
			switch {
			case errors.As(err, &u):
				got = "undecided"
				if u.Field != "brand" || u.Device != 0 {
					t.Errorf("UndecidedError = %+v, want field brand, device 0", u)
				}
			case errors.As(err, &un):
				got = "unsatisfied"
			case err != nil:
				t.Fatalf("Check = %v", err)
			}
			if got != c.want {
				t.Errorf("Check with no brand = %s (%v), want %s", got, err, c.want)
			}
		})
	}
	// A definite failure on another GPU still fails.
	err := Check([]string{readReq(t, "cuda-13.3.require")}, olaresDriver, []Device{noBrand, rtx5090})
	var un *UnsatisfiedError
	if !errors.As(err, &un) || un.Device != 1 {
		t.Errorf("Check(no brand, GeForce) = %v, want unsatisfied on device 1", err)
	}
	// An unknown compute capability is undecided where arch= conditions are evaluated.
	err = Check([]string{"cuda>=12.0 arch>=9.0"}, Driver{CUDA: "11.8", Version: "520.1"}, []Device{{Brand: "tesla"}})
	var u *UndecidedError
	if !errors.As(err, &u) || u.Field != "arch" {
		t.Errorf("Check(unknown arch) = %v, want undecided on arch", err)
	}
}
