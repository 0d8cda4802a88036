package cmdutil

import "runtime/debug"

// VersionString is what --version prints: linked, the version set at link time, unless it is
// "dev"; then the module's version ("(devel)" for a build from a checkout) with the commit, its
// time and whether the tree had changes, as debug.ReadBuildInfo has them.
func VersionString(linked string) string {
	if linked != "dev" {
		return linked
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "unknown (no build information in the binary)"
	}
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, when, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			when = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" {
		v += " " + rev[:min(12, len(rev))]
		if when != "" {
			v += " " + when
		}
		if modified == "true" {
			v += " (with uncommitted changes)"
		}
	}
	return v + " " + info.GoVersion
}
