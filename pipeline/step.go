package pipeline

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Step is one named stage of a build. S is the executor's state: the host executor's work
// directories, the Dagger executor's container under construction.
type Step[S any] interface {
	Name() string
	Run(ctx context.Context, s S) error
}

// StepFunc makes a Step of a name and a function.
func StepFunc[S any](name string, run func(ctx context.Context, s S) error) Step[S] {
	return stepFunc[S]{name, run}
}

type stepFunc[S any] struct {
	name string
	run  func(context.Context, S) error
}

func (f stepFunc[S]) Name() string                       { return f.name }
func (f stepFunc[S]) Run(ctx context.Context, s S) error { return f.run(ctx, s) }

// RunSteps runs steps in order and stops at the first error, which it names by step. It
// checks ctx between steps so a cancelled build stops at a step boundary at the latest.
func RunSteps[S any](ctx context.Context, steps []Step[S], s S) error {
	for _, st := range steps {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("%s: %w", st.Name(), err)
		}
		if err := st.Run(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", st.Name(), err)
		}
	}
	return nil
}

// Logged wraps a step so that its start, end and duration go to logger.
func Logged[S any](logger *slog.Logger, st Step[S]) Step[S] {
	return loggedAt(logger, slog.LevelInfo, st)
}

// LoggedDebug is Logged at debug level, for a step that only defines work a later step runs
// (a Dagger build's steps before its export, which the engine evaluates lazily): its time
// would say nothing, so it is not reported at the default level.
func LoggedDebug[S any](logger *slog.Logger, st Step[S]) Step[S] {
	return loggedAt(logger, slog.LevelDebug, st)
}

func loggedAt[S any](logger *slog.Logger, level slog.Level, st Step[S]) Step[S] {
	if logger == nil {
		return st
	}
	return StepFunc(st.Name(), func(ctx context.Context, s S) error {
		start := time.Now()
		logger.Log(ctx, level, "step", "name", st.Name())
		err := st.Run(ctx, s)
		d := time.Since(start).Round(time.Millisecond)
		if err != nil {
			logger.Log(ctx, slog.LevelInfo, "step failed", "name", st.Name(), "took", d)
			return err
		}
		logger.Log(ctx, level, "step done", "name", st.Name(), "took", d)
		return nil
	})
}

// LoggedAll wraps each step with Logged.
func LoggedAll[S any](logger *slog.Logger, steps []Step[S]) []Step[S] {
	out := make([]Step[S], len(steps))
	for i, st := range steps {
		out[i] = Logged(logger, st)
	}
	return out
}
