package recipes

import (
	"strings"
	"testing"
)

func TestBuiltinAptPinsCoverEveryRecipe(t *testing.T) {
	distros := AptDistros()
	if len(distros) == 0 {
		t.Fatal("no built-in apt pins")
	}
	for _, d := range distros {
		pins, err := LoadAptPins(d)
		if err != nil {
			t.Fatalf("LoadAptPins(%s) = %v", d, err)
		}
		if pins.Distro != d {
			t.Errorf("apt/%s.yaml says distro %q", d, pins.Distro)
		}
		for _, n := range Names() {
			r, err := Load(n)
			if err != nil {
				t.Fatal(err)
			}
			for _, pkg := range r.Apt {
				if pins.Packages[pkg] == "" {
					t.Errorf("recipe %s installs %s, which apt/%s.yaml does not pin", n, pkg, d)
				}
			}
		}
	}
	if names := strings.Join(Names(), ","); strings.Contains(names, "apt") {
		t.Errorf("Names() = %s lists the apt pins as a recipe", names)
	}
}

func TestAptPinsRejects(t *testing.T) {
	_, err := ParseAptPins("bad.yaml", []byte("schemaVersion: 1\ndistro: ubuntu-24.04\nsnapshot: 2026-07-23\npackages: {cmake: \"\", \"Bad Name\": 1.0}\n"))
	for _, want := range []string{"bad.yaml: snapshot", "YYYYMMDDTHHMMSSZ", "packages.cmake", "packages.Bad Name"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseAptPins() = %v, want it to say %q", err, want)
		}
	}
	_, err = ParseAptPins("src.yaml", []byte("schemaVersion: 1\ndistro: ubuntu-24.04\nsnapshot: 20260723T000000Z\nsources: [\"deb https://archive.ubuntu.com/ubuntu noble main\", \"deb snapshot.ubuntu.com noble\"]\nbootstrap: {ca-certificates: \"\"}\npackages: {cmake: 3.28.3-1build7}\n"))
	for _, want := range []string{"src.yaml: sources[0]", "does not name the snapshot: write @SNAPSHOT@", "src.yaml: sources[1]", "is not a one-line apt source", "bootstrap.ca-certificates"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseAptPins() = %v, want it to say %q", err, want)
		}
	}
	if _, err := ParseAptPins("none.yaml", []byte("schemaVersion: 1\ndistro: ubuntu-24.04\nsnapshot: 20260723T000000Z\npackages: {cmake: 3.28.3-1build7}\n")); err == nil || !strings.Contains(err.Error(), "sources: is empty") {
		t.Errorf("ParseAptPins(no sources) = %v, want it to say sources is empty", err)
	}
	if _, err := LoadAptPins("debian-99"); err == nil || !strings.Contains(err.Error(), "ubuntu-24.04") {
		t.Errorf("LoadAptPins(unknown) = %v, want an error naming the known distributions", err)
	}
}
