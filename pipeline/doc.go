// Package pipeline resolves a target and a recipe into a Plan, the single description of a
// build that every executor carries out.
package pipeline
