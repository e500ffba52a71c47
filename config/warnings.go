package config

import "slices"

// Warnings returns the problems that did not stop the configuration from
// loading (Problem.Warning), sorted by key: a placeholder that can become
// an option, for example. `snodod config check` prints them and the
// daemon logs them.
func (c *Config) Warnings() []Problem { return slices.Clone(c.warnings) }
