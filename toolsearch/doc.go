// Package toolsearch ranks MCP tool definitions against a query a model
// writes ("read the config file", "what is in this folder"): the search
// behind a view's search_tools (docs/views.md, "Budgets").
//
// An Index is built once from a catalog's tool definitions, as the
// server listed them, and answers queries until the catalog changes
// (build a new one then: an Index is never changed, so any number of
// goroutines may query it at once). Ranking is BM25F: each tool is a
// document of six fields (its name, the server prefix of a composed
// name, its title, its description, its parameters' names and its
// parameters' descriptions), each field scored
// with its own weight and length normalization, the term frequencies
// combined before saturation (Robertson, Zaragoza and Taylor, "Simple
// BM25 extension to multiple weighted fields", CIKM 2004).
//
// Tokens are words and numbers in lower case, split at snake_case,
// kebab-case, camelCase and a composed name's "__", reduced by a small
// English suffix stripper (files → file, directories → directory,
// reading → read), with a short table of synonyms that tool names and
// users spell differently (folder → directory, remove → delete); in a
// query, a word with a short extension (notes.md) adds the term "file".
//
// It never decodes more of a definition than it ranks by, never calls a
// tool, and holds no state besides the index.
package toolsearch
