package bench

import (
	"fmt"
	"strings"
)

// InvalidRun names a run whose figures do not count and says why, as a decision built on it
// (a bisect's measurement, publish's gate) lists it: "BUNDLE round N: WHY", WHY being the run's
// validity problems (the campaign's decision on it where it has none) and its error.
func InvalidRun(r *Record) string {
	why := r.Decision
	if len(r.Invalid) > 0 {
		why = strings.Join(r.Invalid, ", ")
	}
	if r.Error != "" {
		why += ": " + r.Error
	}
	return fmt.Sprintf("%s round %d: %s", r.Bundle, r.Round, why)
}
