package daggerexec

// The apt step for real: apt-get in the stand-in devel image, through the engine, against an
// archive snapshot this test generates (dpkg-deb, apt-ftparchive, a signing key of its own) and
// serves over https and http on the engine's bridge address. What it shows: apt reads only the
// plan's sources (a broken source in the image's sources.list.d is not read), an image without
// CA certificates bootstraps them from the snapshot and then verifies TLS, a pinned version
// the snapshot lacks and an unreachable snapshot stop the step with what to do, and
// CheckAptPins reports every pin.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"dagger.io/dagger"

	"github.com/llbuild/llbuild/internal/enginetest"
	"github.com/llbuild/llbuild/pipeline"
)

const testSnapshot = "20261202T000000Z"

// testCA is a certificate authority and the PEM of its certificate.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  string
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))}
}

// serverCert is a certificate for ip signed by ca.
func (ca *testCA) serverCert(t *testing.T, ip net.IP) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: ip.String()},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{ip}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// deb writes a package that installs files (path -> content) into pool.
func deb(t *testing.T, pool, name, version string, files map[string]string) {
	t.Helper()
	root := filepath.Join(t.TempDir(), name)
	write := func(p, s string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "DEBIAN", "control"), fmt.Sprintf("Package: %s\nVersion: %s\nArchitecture: all\nMaintainer: llbuild tests <tests@llbuild.invalid>\nDescription: llbuild apt step test package\n", name, version))
	for p, s := range files {
		write(filepath.Join(root, p), s)
	}
	run(t, "", "dpkg-deb", "--root-owner-group", "--build", root, filepath.Join(pool, name+"_"+version+"_all.deb"))
}

// testArchive is a signed apt archive of one suite, "test", component main.
type testArchive struct {
	dir    string // served at /archive/<snapshot>/
	keyASC string // the signing key, armored
}

// newTestArchive makes the archive, with an InRelease signed by a key of its own when sign is
// true (else only an unsigned Release, for [trusted=yes] sources).
func newTestArchive(t *testing.T, ca, wrongCA *testCA, sign bool) *testArchive {
	t.Helper()
	for _, tool := range []string{"dpkg-deb", "apt-ftparchive", "gpg"} {
		if _, err := exec.LookPath(tool); err != nil {
			enginetest.SkipUnlessCI(t, tool+" is not installed (scripts/test.sh installs dpkg-dev, apt-utils and gpg)")
		}
	}
	dir := t.TempDir()
	pool := filepath.Join(dir, "pool")
	os.MkdirAll(pool, 0o755)
	for _, v := range []string{"1.0-1", "1.0-2"} {
		deb(t, pool, "llbuild-test-tool", v, map[string]string{"usr/share/llbuild-test-tool/version": v + "\n"})
	}
	// The bootstrap package: it puts the CA bundle in place, as ca-certificates does.
	deb(t, pool, "llbuild-test-ca", "1.0", map[string]string{"etc/ssl/certs/ca-certificates.crt": ca.pem})
	deb(t, pool, "llbuild-test-wrong-ca", "1.0", map[string]string{"etc/ssl/certs/ca-certificates.crt": wrongCA.pem})
	bin := filepath.Join(dir, "dists", "test", "main", "binary-amd64")
	os.MkdirAll(bin, 0o755)
	pkgs := run(t, dir, "apt-ftparchive", "packages", "pool")
	if err := os.WriteFile(filepath.Join(bin, "Packages"), []byte(pkgs), 0o644); err != nil {
		t.Fatal(err)
	}
	rel := run(t, dir, "apt-ftparchive", "-o", "APT::FTPArchive::Release::Suite=test", "-o", "APT::FTPArchive::Release::Codename=test",
		"-o", "APT::FTPArchive::Release::Components=main", "-o", "APT::FTPArchive::Release::Architectures=amd64", "release", "dists/test")
	if err := os.WriteFile(filepath.Join(dir, "dists", "test", "Release"), []byte(rel), 0o644); err != nil {
		t.Fatal(err)
	}
	if !sign {
		return &testArchive{dir: dir}
	}
	// A short home: gpg-agent's socket path must fit in a socket address.
	home, err := os.MkdirTemp("", "gpg")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		exec.Command("gpgconf", "--homedir", home, "--kill", "gpg-agent").Run()
		os.RemoveAll(home)
	})
	gpg := func(args ...string) string {
		return run(t, dir, "gpg", append([]string{"--homedir", home, "--batch", "--pinentry-mode", "loopback", "--passphrase", ""}, args...)...)
	}
	gpg("--quick-gen-key", "llbuild test archive <archive@llbuild.invalid>", "ed25519", "sign", "never")
	gpg("--clearsign", "-o", filepath.Join(dir, "dists", "test", "InRelease"), filepath.Join(dir, "dists", "test", "Release"))
	return &testArchive{dir: dir, keyASC: gpg("--armor", "--export")}
}

// bridgeIP is the engine's bridge address on this host, which its containers reach.
func bridgeIP(t *testing.T) net.IP {
	t.Helper()
	ifc, err := net.InterfaceByName("dagger0")
	if err == nil {
		addrs, _ := ifc.Addrs()
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
				return n.IP
			}
		}
	}
	enginetest.SkipUnlessCI(t, "no dagger0 bridge on this host: the engine is not local (../shared/dagger/start-engine.sh makes it)")
	return nil
}

// serve serves the archive at /archive/<testSnapshot>/ on ip, over TLS when cert is given, and
// returns the base URL.
func (a *testArchive) serve(t *testing.T, ip net.IP, cert *tls.Certificate) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	// apt's first TLS attempts are refused by design (an unknown issuer): not logged.
	srv := &http.Server{Handler: http.StripPrefix("/archive/"+testSnapshot, http.FileServer(http.Dir(a.dir))), ErrorLog: log.New(io.Discard, "", 0)}
	scheme := "http"
	if cert != nil {
		scheme = "https"
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{*cert}}
		go srv.ServeTLS(ln, "", "")
	} else {
		go srv.Serve(ln)
	}
	t.Cleanup(func() { srv.Close() })
	return scheme + "://" + ln.Addr().String() + "/archive/@SNAPSHOT@"
}

// closedURL is an address on ip where nothing listens.
func closedURL(t *testing.T, ip net.IP) string {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(ip.String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return "https://" + addr + "/archive/@SNAPSHOT@"
}

func testApt(base, keyFile string, bootstrap []pipeline.AptPackage, pkgs ...pipeline.AptPackage) *pipeline.Apt {
	opt := ""
	if keyFile != "" {
		opt = "[signed-by=" + keyFile + "] "
	}
	return &pipeline.Apt{
		Distro:    "test-distro",
		Snapshot:  testSnapshot,
		Sources:   []string{"deb " + opt + strings.ReplaceAll(base, "@SNAPSHOT@", testSnapshot) + " test main"},
		Bootstrap: bootstrap,
		Packages:  pkgs,
	}
}

// execResult runs ctr and returns its exit code and stderr (and stdout).
func execResult(t *testing.T, ctx context.Context, ctr *dagger.Container) (code int, stdout, stderr string) {
	t.Helper()
	out, err := ctr.Stdout(ctx)
	if err == nil {
		se, _ := ctr.Stderr(ctx)
		return 0, out, se
	}
	var ee *dagger.ExecError
	if !errors.As(err, &ee) {
		t.Fatalf("engine: %v", err)
	}
	return ee.ExitCode, ee.Stdout, ee.Stderr
}

func TestAptStepAgainstALocalSnapshot(t *testing.T) {
	opts, _ := engineOptions(t, nil)
	ip := bridgeIP(t)
	ca, wrongCA := newTestCA(t, "llbuild test CA"), newTestCA(t, "some other CA")
	archive := newTestArchive(t, ca, wrongCA, true)
	cert := ca.serverCert(t, ip)
	httpsURL := archive.serve(t, ip, &cert)

	ex := newEngineExecutor(t, opts)
	ctx := context.Background()
	c, err := ex.connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const keyFile = "/etc/llbuild-test/archive.asc"
	// The image: the stand-in devel image with the archive's key and a third-party source in
	// sources.list.d that is unreachable: apt must not read it. It lacks the bootstrap package
	// llbuild-test-ca, as ubuntu:24.04 lacks ca-certificates.
	devel := c.Container(dagger.ContainerOpts{Platform: platform}).
		Import(c.Host().File(strings.TrimPrefix(opts.Devel, "oci-archive:"))).
		WithEnvVariable("DEBIAN_FRONTEND", "noninteractive").
		WithNewFile(keyFile, archive.keyASC).
		WithNewFile("/etc/apt/sources.list.d/third-party.list", "deb "+strings.ReplaceAll(closedURL(t, ip), "@SNAPSHOT@", "x")+" broken main\n")
	tool := func(v string) pipeline.AptPackage { return pipeline.AptPackage{Name: "llbuild-test-tool", Version: v} }
	caPkg := []pipeline.AptPackage{{Name: "llbuild-test-ca", Version: "1.0"}}
	// Each case its own caches, so that no case reads another's lists.
	n := 0
	step := func(a *pipeline.Apt, mode string, pkgs []string) *dagger.Container {
		n++
		return withApt(c, devel, fmt.Sprintf("llbuild-apt-test-%s-%d", rand.Text()[:8], n), a, mode, pkgs)
	}

	t.Run("bootstraps CA certificates, then verifies TLS and installs the pinned version", func(t *testing.T) {
		a := testApt(httpsURL, keyFile, caPkg, tool("1.0-1"))
		ctr := step(a, aptInstall, a.InstallArgs())
		code, _, stderr := execResult(t, ctx, ctr)
		if code != 0 {
			t.Fatalf("exit %d:\n%s", code, stderr)
		}
		out, err := ctr.WithExec([]string{"sh", "-c", "cat /usr/share/llbuild-test-tool/version; dpkg-query -W -f='${Version}\\n' llbuild-test-ca"}).Stdout(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if out != "1.0-1\n1.0\n" {
			t.Errorf("installed %q, want llbuild-test-tool 1.0-1 (not the newer 1.0-2) and llbuild-test-ca 1.0", out)
		}
		for _, want := range []string{"the image lacks llbuild-test-ca=1.0, so apt cannot check the snapshot's TLS certificate", "installing llbuild-test-ca=1.0 first without TLS peer verification"} {
			if !strings.Contains(stderr, want) {
				t.Errorf("stderr does not say %q:\n%s", want, stderr)
			}
		}
		if strings.Contains(stderr, "broken") {
			t.Errorf("apt read the image's own sources.list.d:\n%s", stderr)
		}
	})
	t.Run("after the bootstrap TLS is verified: a CA that did not sign the archive's certificate fails", func(t *testing.T) {
		a := testApt(httpsURL, keyFile, []pipeline.AptPackage{{Name: "llbuild-test-wrong-ca", Version: "1.0"}}, tool("1.0-1"))
		code, _, stderr := execResult(t, ctx, step(a, aptInstall, a.InstallArgs()))
		if code != 3 || !strings.Contains(stderr, "could not read or verify the archive snapshot "+testSnapshot) || !strings.Contains(stderr, "Certificate verification failed") {
			t.Errorf("exit %d, want 3 and the certificate failure:\n%s", code, stderr)
		}
	})
	t.Run("a version the snapshot lacks stops the step and names what it has", func(t *testing.T) {
		a := testApt(httpsURL, keyFile, caPkg, tool("9.9-9"))
		code, _, stderr := execResult(t, ctx, step(a, aptInstall, a.InstallArgs()))
		for _, want := range []string{"lacks versions the plan pins", "llbuild-test-tool 9.9-9: not there (the snapshot has 1.0-1 1.0-2)", "recipes/apt/test-distro.yaml", "llbuild plan --check-pins"} {
			if code != 4 || !strings.Contains(stderr, want) {
				t.Errorf("exit %d, want 4 and %q:\n%s", code, want, stderr)
			}
		}
	})
	t.Run("an unreachable snapshot stops the step and says what to check", func(t *testing.T) {
		a := testApt(closedURL(t, ip), keyFile, caPkg, tool("1.0-1"))
		code, _, stderr := execResult(t, ctx, step(a, aptInstall, a.InstallArgs()))
		for _, want := range []string{"could not read or verify the archive snapshot " + testSnapshot, "check that the engine's containers reach https://" + ip.String(), "--base devel="} {
			if code != 3 || !strings.Contains(stderr, want) {
				t.Errorf("exit %d, want 3 and %q:\n%s", code, want, stderr)
			}
		}
	})
	t.Run("an archive signed by another key is not read", func(t *testing.T) {
		other := newTestArchive(t, ca, wrongCA, true)
		a := testApt(other.serve(t, ip, &cert), keyFile, caPkg, tool("1.0-1"))
		code, _, stderr := execResult(t, ctx, step(a, aptInstall, a.InstallArgs()))
		if code != 3 || !strings.Contains(stderr, "could not read or verify") {
			t.Errorf("exit %d, want 3 (a signature apt cannot verify):\n%s", code, stderr)
		}
	})
	t.Run("CheckAptPins reports every pin", func(t *testing.T) {
		// Through the executor, in the devel image as Options.Devel gives it (which has CA
		// certificates but not this key: an unsigned archive, trusted as given, over http).
		httpURL := newTestArchive(t, ca, wrongCA, false).serve(t, ip, nil)
		p := &pipeline.Plan{Target: "apt-test", Apt: &pipeline.Apt{
			Distro: "test-distro", Snapshot: testSnapshot,
			Sources:   []string{"deb [trusted=yes] " + strings.ReplaceAll(httpURL, "@SNAPSHOT@", testSnapshot) + " test main"},
			Bootstrap: caPkg,
			Packages:  []pipeline.AptPackage{tool("1.0-2"), tool("2.0-1"), {Name: "llbuild-no-such-package", Version: "1"}},
		}}
		checks, err := ex.CheckAptPins(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		for _, c := range checks {
			got += fmt.Sprintf("%s=%s %v %s\n", c.Name, c.Version, c.OK, strings.Join(c.Available, ","))
		}
		want := "llbuild-test-ca=1.0 true 1.0\nllbuild-test-tool=1.0-2 true 1.0-1,1.0-2\nllbuild-test-tool=2.0-1 false 1.0-1,1.0-2\nllbuild-no-such-package=1 false \n"
		if got != want {
			t.Errorf("CheckAptPins:\n%s\nwant:\n%s", got, want)
		}
	})
}
