package upstream

import "strings"

// clientLimits are the tool limits of the clients known to have one, by
// clientInfo.name (matched without regard to case): the default tool
// budget of a view without max_tools. docs/views.md, "Budgets", holds the
// same table with the source of each number; a test holds the two equal.
var clientLimits = map[string]int{
	"visual studio code":            128, // Copilot: "Cannot have more than 128 tools per request"
	"visual studio code - insiders": 128,
	"cursor-vscode":                 80,  // a warning at 80, previously 40
	"openai-mcp":                    128, // OpenAI's function calling: at most 128 functions
}

// clientLimit is the known tool limit of the client named name, 0 for a
// client the table does not know (no budget).
func clientLimit(name string) int {
	return clientLimits[strings.ToLower(strings.TrimSpace(name))]
}
