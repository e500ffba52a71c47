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
	for _, term := range queryTokens(query) {
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

// maxDepth bounds how deep into nested parameter schemas the names and
// descriptions are taken.
const maxDepth = 3

// fieldsOf is the text of each field of t. The name field holds the
// view's name (of a composed name, <prefix>__<name>, the part after the
// prefix, which goes to the server field: a server's name says little of
// what each of its tools does) and the definition's own when it differs.
// The definition is decoded once, loosely: a member of an unexpected type
// (a boolean schema, an items array) costs only itself.
func fieldsOf(t Tool) [numFields]string {
	var f [numFields]string
	var def map[string]any
	_ = json.Unmarshal(t.Definition, &def)
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	f[fieldName] = t.Name
	if server, own, composed := strings.Cut(t.Name, "__"); composed {
		f[fieldServer], f[fieldName] = server, own
	}
	if n := str(def, "name"); n != "" && n != t.Name && !strings.HasSuffix(t.Name, n) {
		f[fieldName] += " " + n
	}
	f[fieldTitle] = str(def, "title")
	annotations, _ := def["annotations"].(map[string]any)
	if at := str(annotations, "title"); at != "" && at != f[fieldTitle] {
		f[fieldTitle] += " " + at
	}
	f[fieldDescription] = str(def, "description")
	var names, descs strings.Builder
	var walk func(s map[string]any, depth int)
	walk = func(s map[string]any, depth int) {
		if s == nil || depth > maxDepth {
			return
		}
		if items, ok := s["items"].(map[string]any); ok {
			walk(items, depth+1)
		}
		props, _ := s["properties"].(map[string]any)
		keys := make([]string, 0, len(props))
		for k := range props {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			names.WriteString(k + " ")
			p, _ := props[k].(map[string]any)
			descs.WriteString(str(p, "description") + " ")
			walk(p, depth+1)
		}
	}
	input, _ := def["inputSchema"].(map[string]any)
	walk(input, 0)
	f[fieldParamNames], f[fieldParamDescriptions] = names.String(), descs.String()
	return f
}
