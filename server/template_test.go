package server

import (
	"encoding/json"
	"strings"
	"testing"
)

// A relayed template matches what each RFC 6570 expression could expand
// to, and one that cannot be read matches nothing.
func TestLooseTemplate(t *testing.T) {
	tests := []struct {
		template string
		match    []string
		miss     []string
	}{
		{"x://{id}", []string{"x://7", "x://"}, []string{"x://7/a", "y://7"}},
		{"x://{+path}", []string{"x://a/b?c#d"}, nil},
		{"x://{#frag}", []string{"x://a/b"}, nil},
		{"x://a{/seg}", []string{"x://a", "x://a/b/c"}, []string{"x://ab"}},
		{"x://a{.ext}", []string{"x://a.b.c"}, []string{"x://a/b"}},
		{"x://a{;p}", []string{"x://a;x=1;y"}, nil},
		{"x://a{?q,r}", []string{"x://a", "x://a?q=1&r=2"}, []string{"x://a/b"}},
		{"x://a{&q}", []string{"x://a&q=1"}, nil},
		{"x://a{}b", []string{"x://ab"}, []string{"x://acb"}},
		{"x://a.b", []string{"x://a.b"}, []string{"x://aXb"}},
		{"x://{id", nil, []string{"x://{id", "x://7", ""}},
	}
	for _, tt := range tests {
		t.Run(tt.template, func(t *testing.T) {
			def, _ := json.Marshal(map[string]string{"uriTemplate": tt.template})
			m := looseTemplate(def)
			for _, uri := range tt.match {
				if !m.re.MatchString(uri) {
					t.Errorf("%s does not match %s", tt.template, uri)
				}
			}
			for _, uri := range tt.miss {
				if m.re.MatchString(uri) {
					t.Errorf("%s matches %s", tt.template, uri)
				}
			}
		})
	}
}

func TestCompileTemplateErrors(t *testing.T) {
	tests := []struct{ template, want string }{
		{"x://{id", `unclosed { in "x://{id"`},
		{"x://{#a}", `unsupported expression {#a} in "x://{#a}": only {name} and {+name} are supported`},
		{"x://{}", `unsupported expression {} in "x://{}"`},
	}
	for _, tt := range tests {
		if _, err := compileTemplate(tt.template); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("compileTemplate(%q) = %v, want %q", tt.template, err, tt.want)
		}
	}
}
