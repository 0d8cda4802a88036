package publish

import (
	"encoding/base64"
	"errors"
	"regexp"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
)

// Environment variables that carry registry credentials for the --registry host.
const (
	EnvUser     = "LLBUILD_REGISTRY_USER"
	EnvPassword = "LLBUILD_REGISTRY_PASSWORD"
)

// Credentials are a user name and password (or token) for one registry host.
type Credentials struct {
	Host     string
	User     string
	Password string
}

// CredentialsFromEnv reads EnvUser and EnvPassword through getenv for registry host. Both
// unset gives nil: the Docker config is used alone. One without the other is an error.
func CredentialsFromEnv(getenv func(string) string, host string) (*Credentials, error) {
	u, p := getenv(EnvUser), getenv(EnvPassword)
	switch {
	case u == "" && p == "":
		return nil, nil
	case u == "":
		return nil, errors.New(EnvPassword + " is set but " + EnvUser + " is not: set both, or neither to use the Docker config")
	case p == "":
		return nil, errors.New(EnvUser + " is set but " + EnvPassword + " is not: set both, or neither to use the Docker config")
	}
	return &Credentials{Host: host, User: u, Password: p}, nil
}

// Keychain answers with the credentials for their own host only, so that they are never
// sent to another registry (a base image's, say), and falls back to the Docker config
// (authn.DefaultKeychain: $DOCKER_CONFIG/config.json, credential helpers) everywhere else.
func Keychain(c *Credentials) authn.Keychain {
	if c == nil {
		return authn.DefaultKeychain
	}
	return authn.NewMultiKeychain(envKeychain{c}, authn.DefaultKeychain)
}

type envKeychain struct{ c *Credentials }

func (k envKeychain) Resolve(r authn.Resource) (authn.Authenticator, error) {
	if r.RegistryStr() != k.c.Host {
		return authn.Anonymous, nil
	}
	return authn.FromConfig(authn.AuthConfig{Username: k.c.User, Password: k.c.Password}), nil
}

// Redactor removes credentials from text meant for people: the userinfo of URLs and
// references (scheme://user:pass@host, user:pass@host/repo), and known secrets wherever they
// appear, raw or as the base64 of an HTTP Basic Authorization header.
type Redactor struct {
	secrets []string
}

// Redacted replaces what a Redactor removes.
const Redacted = "REDACTED"

// NewRedactor redacts c's password (and its Basic header form) beside userinfo.
func NewRedactor(c *Credentials) *Redactor {
	r := &Redactor{}
	if c != nil {
		r.add(c.Password)
		r.add(base64.StdEncoding.EncodeToString([]byte(c.User + ":" + c.Password)))
		r.add(base64.URLEncoding.EncodeToString([]byte(c.User + ":" + c.Password)))
	}
	// Longest first, so that a secret containing another is replaced whole.
	sort.Slice(r.secrets, func(i, j int) bool { return len(r.secrets[i]) > len(r.secrets[j]) })
	return r
}

func (r *Redactor) add(s string) {
	if s != "" {
		r.secrets = append(r.secrets, s)
	}
}

var (
	// scheme://userinfo@
	urlUserinfo = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]+@`)
	// user:password@host at the start of a word (a registry reference with credentials).
	refUserinfo = regexp.MustCompile(`(^|[\s"'(=])[^\s/@:"'(=]+:[^\s/@"']+@([a-zA-Z0-9.-]+[a-zA-Z0-9](:[0-9]+)?/)`)
)

// Redact returns s without credentials.
func (r *Redactor) Redact(s string) string {
	for _, sec := range r.secrets {
		s = strings.ReplaceAll(s, sec, Redacted)
	}
	s = urlUserinfo.ReplaceAllString(s, "${1}"+Redacted+"@")
	return refUserinfo.ReplaceAllString(s, "${1}"+Redacted+"@${2}")
}

// Error returns err with its message redacted, or nil for nil. The result keeps no
// reference to err, so nothing can unwrap the original text.
func (r *Redactor) Error(err error) error {
	if err == nil {
		return nil
	}
	return errors.New(r.Redact(err.Error()))
}

// ParseRegistry checks a --registry value: HOST[:PORT]/REPO (a bare REPO means Docker Hub),
// with no scheme, no credentials, no tag and no digest. Errors quote the value redacted.
func ParseRegistry(s string) (name.Repository, error) {
	red := (&Redactor{}).Redact(s)
	switch {
	case s == "":
		return name.Repository{}, errors.New("no registry given: use --registry HOST[:PORT]/REPO, e.g. ghcr.io/OWNER/llama-server")
	case strings.Contains(s, "://"):
		return name.Repository{}, errors.New("--registry " + quote(red) + " has a scheme: give HOST[:PORT]/REPO (plain HTTP is used for localhost and 127.0.0.1 only)")
	case strings.Contains(s, "@"):
		return name.Repository{}, errors.New("--registry " + quote(red) + " holds an '@': give HOST[:PORT]/REPO without credentials or digest; credentials come from the Docker config or " + EnvUser + "/" + EnvPassword)
	}
	if i := strings.LastIndex(s, "/"); i >= 0 && strings.Contains(s[i+1:], ":") {
		return name.Repository{}, errors.New("--registry " + quote(red) + " ends in a tag: give the repository only; tags come from --tag-template")
	}
	repo, err := name.NewRepository(s)
	if err != nil {
		return name.Repository{}, errors.New("--registry " + quote(red) + ": " + (&Redactor{}).Redact(err.Error()))
	}
	return repo, nil
}

func quote(s string) string { return `"` + s + `"` }
