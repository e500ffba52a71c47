package server

import (
	"encoding/json"
	"fmt"

	"github.com/snodod/snodod/protocol"
)

// contentWire is the JSON form of every content block kind; which members
// appear depends on Type (docs/protocol.md §6.4).
type contentWire struct {
	Type     string  `json:"type"`
	Text     *string `json:"text,omitempty"`
	Data     []byte  `json:"data,omitempty"`
	MIMEType string  `json:"mimeType,omitempty"`
	// resource_link members
	URI         string            `json:"uri,omitempty"`
	Name        string            `json:"name,omitempty"`
	Title       string            `json:"title,omitempty"`
	Description string            `json:"description,omitempty"`
	Size        *int64            `json:"size,omitempty"`
	Icons       []protocol.Icon   `json:"icons,omitempty"`
	Resource    *ResourceContents `json:"resource,omitempty"`
	Annotations *Annotations      `json:"annotations,omitempty"`
	Meta        map[string]any    `json:"_meta,omitempty"`
}

// MarshalJSON writes the block in its MCP shape. A text block always has
// "text", even when empty. Like every frame, it leaves <, > and & as they
// are (docs/transport.md §11.1), which json.Marshal would not.
func (c Content) MarshalJSON() ([]byte, error) {
	w := contentWire{Type: c.Type, Annotations: c.Annotations, Meta: c.Meta}
	switch c.Type {
	case "text":
		w.Text = &c.Text
	case "image", "audio":
		w.Data, w.MIMEType = c.Data, c.MIMEType
		if w.Data == nil {
			w.Data = []byte{}
		}
	case "resource_link":
		if c.Link == nil {
			return nil, fmt.Errorf("resource_link content without a resource")
		}
		l := c.Link
		w.URI, w.Name, w.Title, w.Description, w.MIMEType, w.Size, w.Icons = l.URI, l.Name, l.Title, l.Description, l.MIMEType, l.Size, l.Icons
		if w.Annotations == nil {
			w.Annotations = l.Annotations
		}
	case "resource":
		if c.Resource == nil {
			return nil, fmt.Errorf("resource content without contents")
		}
		w.Resource = c.Resource
	default:
		return nil, fmt.Errorf("unknown content type %q", c.Type)
	}
	return protocol.AppendValue(nil, w)
}

// UnmarshalJSON reads a block in its MCP shape.
func (c *Content) UnmarshalJSON(b []byte) error {
	var w contentWire
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*c = Content{Type: w.Type, Data: w.Data, MIMEType: w.MIMEType, Resource: w.Resource, Annotations: w.Annotations, Meta: w.Meta}
	if w.Text != nil {
		c.Text = *w.Text
	}
	if w.Type == "resource_link" {
		c.Link = &Resource{URI: w.URI, Name: w.Name, Title: w.Title, Description: w.Description, MIMEType: w.MIMEType, Size: w.Size, Icons: w.Icons}
		c.MIMEType = ""
	}
	return nil
}

// MarshalJSON writes {uri, mimeType?, text} or, when Blob is non-nil,
// {uri, mimeType?, blob} with the blob in base64 (docs/protocol.md §7).
func (rc ResourceContents) MarshalJSON() ([]byte, error) {
	type text struct {
		URI      string         `json:"uri"`
		MIMEType string         `json:"mimeType,omitempty"`
		Text     string         `json:"text"`
		Meta     map[string]any `json:"_meta,omitempty"`
	}
	type blob struct {
		URI      string         `json:"uri"`
		MIMEType string         `json:"mimeType,omitempty"`
		Blob     []byte         `json:"blob"`
		Meta     map[string]any `json:"_meta,omitempty"`
	}
	if rc.Blob != nil {
		return protocol.AppendValue(nil, blob{rc.URI, rc.MIMEType, rc.Blob, rc.Meta})
	}
	return protocol.AppendValue(nil, text{rc.URI, rc.MIMEType, rc.Text, rc.Meta})
}
