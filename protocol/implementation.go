package protocol

// Implementation names a server (serverInfo, docs/protocol.md §3.5) or a
// client (clientInfo): the runtime describes itself with one, and the MCP
// client (mcpclient) introduces snodod to the servers it hosts with one.
type Implementation struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Title       string `json:"title,omitempty"`
	Description string `json:"description,omitempty"`
	WebsiteURL  string `json:"websiteUrl,omitempty"`
	Icons       []Icon `json:"icons,omitempty"`
}

// Icon is an icon of a server, tool, prompt, resource or template. Icons
// are dropped from everything under 2025-06-18.
type Icon struct {
	Src      string   `json:"src"`
	MIMEType string   `json:"mimeType,omitempty"`
	Sizes    []string `json:"sizes,omitempty"`
	Theme    string   `json:"theme,omitempty"`
}
