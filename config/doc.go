// Package config loads, validates and describes snodod's configuration.
//
// Layers, lowest precedence first, each replacing the values below it (a
// list is replaced whole):
//
//  1. the defaults embedded from defaults.toml, the single source of every
//     default;
//  2. one file, TOML, YAML or JSON by its extension: Options.File, or
//     DefaultFile ($XDG_CONFIG_HOME/snodod/config.toml, else
//     ~/.config/snodod/config.toml), which may be absent;
//  3. the environment: SNODOD_<SECTION>__<KEY>, a double underscore between
//     section and key (SNODOD_SESSION__WRITE_TIMEOUT=2s); lists are
//     comma-separated;
//  4. Options.Overrides, the values set by command-line flags.
//
// Load reports every problem of every layer at once, in a *ValidationError
// whose lines read `<key>: <what is allowed>, got <value>`: an explicit zero
// where a positive limit or duration is needed is refused there, even though
// the Go APIs of the other packages read a zero field as "the default".
// Unknown keys and variables are problems too, with a suggestion when one
// key is close. Each value remembers its Source, which Print and PrintJSON
// show for `snodod config print`; Check serves `snodod config check`.
//
// Keys lists every key with its type, default, variable, flag, description
// and rule; docs/config.md holds the same table, and docs_test.go fails when
// the two differ. The limits' keys (Config.Limits) are made from package
// limits, which describes each limit once; the other keys are listed here.
// The package imports only the standard library, koanf and the leaf package
// limits; it converts nothing into other packages' types and never watches
// files.
package config
