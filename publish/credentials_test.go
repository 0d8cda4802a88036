package publish

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

func TestRedactRemovesCredentials(t *testing.T) {
	c := &Credentials{Host: "ghcr.io", User: "bot", Password: "ghp_s3cretT0ken"}
	basic := base64.StdEncoding.EncodeToString([]byte("bot:ghp_s3cretT0ken"))
	tests := []struct {
		name, in, want string
	}{
		{"URL userinfo", "GET https://bot:hunter2@ghcr.io/v2/x/manifests/t: 401", "GET https://REDACTED@ghcr.io/v2/x/manifests/t: 401"},
		{"URL user only", "pulling http://token@127.0.0.1:5000/v2/", "pulling http://REDACTED@127.0.0.1:5000/v2/"},
		{"reference userinfo", `--registry "bot:hunter2@ghcr.io/x/y" is bad`, `--registry "REDACTED@ghcr.io/x/y" is bad`},
		{"reference userinfo with a port", "push to bot:hunter2@localhost:5000/x failed", "push to REDACTED@localhost:5000/x failed"},
		{"the password anywhere", "DENIED: bad token ghp_s3cretT0ken for bot", "DENIED: bad token REDACTED for bot"},
		{"the Basic header", "Authorization: Basic " + basic, "Authorization: Basic REDACTED"},
		{"a digest reference stays", "ghcr.io/x/y@sha256:0123abcd", "ghcr.io/x/y@sha256:0123abcd"},
		{"a plain message stays", "pushing 127.0.0.1:5000/llbuild:olares-one: 403 Forbidden", "pushing 127.0.0.1:5000/llbuild:olares-one: 403 Forbidden"},
	}
	r := NewRedactor(c)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := r.Redact(tt.in); got != tt.want {
				t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
	if err := r.Error(errors.New("x ghp_s3cretT0ken")); errors.Unwrap(err) != nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("Error() = %v (unwraps to %v), want a redacted error that keeps nothing", err, errors.Unwrap(err))
	}
}

func TestCredentialsFromEnvNeedBothOrNeither(t *testing.T) {
	tests := []struct {
		name       string
		user, pass string
		wantCreds  bool
		wantErr    string
	}{
		{"neither", "", "", false, ""},
		{"both", "bot", "tok", true, ""},
		{"user only", "bot", "", false, EnvPassword + " is not"},
		{"password only", "", "tok", false, EnvUser + " is not"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{EnvUser: tt.user, EnvPassword: tt.pass}
			c, err := CredentialsFromEnv(func(k string) string { return env[k] }, "ghcr.io")
			if (c != nil) != tt.wantCreds || (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("CredentialsFromEnv() = %v, %v; want creds %v, error with %q", c, err, tt.wantCreds, tt.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "tok") {
				t.Errorf("the error quotes the password: %v", err)
			}
		})
	}
}

func TestKeychainSendsEnvCredentialsToTheirHostOnly(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir())
	kc := Keychain(&Credentials{Host: "ghcr.io", User: "bot", Password: "tok"})
	for _, tt := range []struct {
		repo string
		want authn.AuthConfig
	}{
		{"ghcr.io/o/llama-server", authn.AuthConfig{Username: "bot", Password: "tok"}},
		{"docker.io/nvidia/cuda", authn.AuthConfig{}},
		{"127.0.0.1:5000/x", authn.AuthConfig{}},
	} {
		repo, err := name.NewRepository(tt.repo)
		if err != nil {
			t.Fatal(err)
		}
		a, err := kc.Resolve(repo)
		if err != nil {
			t.Fatal(err)
		}
		got, err := a.Authorization()
		if err != nil {
			t.Fatal(err)
		}
		if got.Username != tt.want.Username || got.Password != tt.want.Password {
			t.Errorf("Resolve(%s) = %s/%s, want %s/%s", tt.repo, got.Username, got.Password, tt.want.Username, tt.want.Password)
		}
	}
}

func TestParseRegistry(t *testing.T) {
	tests := []struct {
		in, want, wantErr string
	}{
		{"ghcr.io/owner/llama-server", "ghcr.io/owner/llama-server", ""},
		{"127.0.0.1:5000/llbuild", "127.0.0.1:5000/llbuild", ""},
		{"", "", "no registry given"},
		{"https://ghcr.io/o/x", "", "has a scheme"},
		{"https://bot:hunter2@ghcr.io/o/x", "", "https://REDACTED@ghcr.io/o/x"},
		{"bot:hunter2@ghcr.io/o/x", "", `"REDACTED@ghcr.io/o/x" holds an '@'`},
		{"ghcr.io/o/x:latest", "", "ends in a tag"},
		{"ghcr.io/O/X", "", "--registry"},
	}
	for _, tt := range tests {
		repo, err := ParseRegistry(tt.in)
		switch {
		case tt.wantErr == "" && (err != nil || repo.Name() != tt.want):
			t.Errorf("ParseRegistry(%q) = %v, %v; want %s", tt.in, repo, err, tt.want)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("ParseRegistry(%q) error = %v, want one containing %q", tt.in, err, tt.wantErr)
		}
		if err != nil && strings.Contains(err.Error(), "hunter2") {
			t.Errorf("ParseRegistry(%q) error quotes the password: %v", tt.in, err)
		}
	}
}
