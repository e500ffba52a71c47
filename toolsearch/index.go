package toolsearch

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
)

// Tool is one tool to index: the name a client calls it by (a view's
// name, which may differ from the definition's own "name") and its
// definition as listed.
type Tool struct {
	Name       string
	Definition json.RawMessage
}

// Hit is one ranked tool: its Name as given to New, its index in New's
// slice, and its score (higher is better; only the order means anything).
type Hit struct {
	Name  string
	Index int
	Score float64
}

// The fields of a document, with their BM25F weights and length
// normalizations: a word of the name says most about what a tool does, a
// parameter's description least (it describes an input, not the act).
const (
	fieldName = iota
	fieldServer
	fieldTitle
	fieldDescription
	fieldParamNames
	fieldParamDescriptions
	numFields
)

var (
	fieldWeight = [numFields]float64{3.0, 0.5, 2.0, 1.0, 1.0, 0.4}
	fieldB      = [numFields]float64{0.3, 0, 0.5, 0.75, 0.5, 0.75}
)

// k1 is BM25's term-frequency saturation.
const k1 = 1.2

// posting is one document's frequencies of one term, per field.
type posting struct {
	doc int
	tf  [numFields]uint16
}

// Index ranks a fixed set of tools. The zero Index holds none.
type Index struct {
	names    []string
	lengths  [][numFields]int
	avgLen   [numFields]float64
	postings map[string][]posting
}

// New indexes tools. A definition that is not a JSON object is indexed by
// its name alone.
func New(tools []Tool) *Index {
	ix := &Index{names: make([]string, len(tools)), lengths: make([][numFields]int, len(tools)), postings: map[string][]posting{}}
	var total [numFields]int
	for d, t := range tools {
		ix.names[d] = t.Name
		fields := fieldsOf(t)
		for f, text := range fields {
			terms := Tokens(text)
			ix.lengths[d][f] = len(terms)
			total[f] += len(terms)
			for _, term := range terms {
				ps := ix.postings[term]
				if n := len(ps); n > 0 && ps[n-1].doc == d {
					if ps[n-1].tf[f] < math.MaxUint16 {
						ps[n-1].tf[f]++
					}
					continue
				}
				var p posting
				p.doc, p.tf[f] = d, 1
				ix.postings[term] = append(ps, p)
			}
		}
	}
	for f := range total {
		if len(tools) > 0 {
			ix.avgLen[f] = float64(total[f]) / float64(len(tools))
		}
	}
	return ix
}

// Len is the number of tools indexed.
func (ix *Index) Len() int { return len(ix.names) }

// Search returns at most limit tools matching query, best first; ties go
// to the name that sorts first. A query with no term that any tool holds
// matches nothing.
func (ix *Index) Search(query string, limit int) []Hit {
	if ix == nil || limit <= 0 || len(ix.names) == 0 {
		return nil
	}
	scores := map[int]float64{}
	n := float64(len(ix.names))
	seen := map[string]bool{}
	for _, term := range Tokens(query) {
		if seen[term] {
			continue // a word said twice is not twice as meant
		}
		seen[term] = true
		ps := ix.postings[term]
		if len(ps) == 0 {
			continue
		}
		df := float64(len(ps))
		idf := math.Log(1 + (n-df+0.5)/(df+0.5))
		for _, p := range ps {
			var tf float64
			for f := range numFields {
				if p.tf[f] == 0 {
					continue
				}
				norm := 1.0
				if ix.avgLen[f] > 0 {
					norm = 1 - fieldB[f] + fieldB[f]*float64(ix.lengths[p.doc][f])/ix.avgLen[f]
				}
				tf += fieldWeight[f] * float64(p.tf[f]) / norm
			}
			scores[p.doc] += idf * tf / (k1 + tf)
		}
	}
	hits := make([]Hit, 0, len(scores))
	for d, s := range scores {
		hits = append(hits, Hit{Name: ix.names[d], Index: d, Score: s})
	}
	slices.SortFunc(hits, func(a, b Hit) int {
		if a.Score != b.Score {
			if a.Score > b.Score {
				return -1
			}
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return hits
}

// definition is what a tool definition is ranked by.
type definition struct {
	Name        string `json:"name"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Annotations struct {
		Title string `json:"title"`
	} `json:"annotations"`
	InputSchema schema `json:"inputSchema"`
}

type schema struct {
	Description string             `json:"description"`
	Properties  map[string]*schema `json:"properties"`
	Items       *schema            `json:"items"`
}

// UnmarshalJSON takes what it can of a schema and ignores the rest: a
// boolean schema (true), an items array, a description that is not a
// string cost only themselves, never the whole definition.
func (s *schema) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	_ = json.Unmarshal(m["description"], &s.Description)
	var props map[string]json.RawMessage
	if json.Unmarshal(m["properties"], &props) == nil {
		s.Properties = make(map[string]*schema, len(props))
		for k, v := range props {
			p := &schema{}
			_ = p.UnmarshalJSON(v)
			s.Properties[k] = p
		}
	}
	if raw, ok := m["items"]; ok {
		s.Items = &schema{}
		_ = s.Items.UnmarshalJSON(raw)
	}
	return nil
}

// maxDepth bounds how deep into nested parameter schemas the names and
// descriptions are taken.
const maxDepth = 3

// fieldsOf is the text of each field of t. The name field holds the
// view's name (of a composed name, <prefix>__<name>, the part after the
// prefix, which goes to the server field: a server's name says little of
// what each of its tools does) and the definition's own when it differs.
func fieldsOf(t Tool) [numFields]string {
	var f [numFields]string
	var def definition
	_ = json.Unmarshal(t.Definition, &def)
	f[fieldName] = t.Name
	if server, own, composed := strings.Cut(t.Name, "__"); composed {
		f[fieldServer], f[fieldName] = server, own
	}
	if def.Name != "" && def.Name != t.Name && !strings.HasSuffix(t.Name, def.Name) {
		f[fieldName] += " " + def.Name
	}
	f[fieldTitle] = def.Title
	if def.Annotations.Title != "" && def.Annotations.Title != def.Title {
		f[fieldTitle] += " " + def.Annotations.Title
	}
	f[fieldDescription] = def.Description
	var names, descs strings.Builder
	var walk func(s *schema, depth int)
	walk = func(s *schema, depth int) {
		if s == nil || depth > maxDepth {
			return
		}
		if s.Items != nil {
			walk(s.Items, depth+1)
		}
		keys := make([]string, 0, len(s.Properties))
		for k := range s.Properties {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			names.WriteString(k + " ")
			p := s.Properties[k]
			if p != nil {
				descs.WriteString(p.Description + " ")
			}
			walk(p, depth+1)
		}
	}
	walk(&def.InputSchema, 0)
	f[fieldParamNames], f[fieldParamDescriptions] = names.String(), descs.String()
	return f
}
