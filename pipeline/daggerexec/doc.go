// Package daggerexec carries out a build plan on a Dagger engine, inside the plan's devel
// image, with locked apt and shared ccache cache volumes.
package daggerexec
