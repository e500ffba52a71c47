package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/snodod/snodod/daemon/control"
)

func viewsUsage(w io.Writer) {
	fmt.Fprint(w, `Usage: snodod views [flags]

Lists the views of the running daemon's configuration ([views.NAME],
docs/views.md): for each, the hosted servers it holds, the tools, resources
(with templates) and prompts it lists now, and the sessions open on it. A
client opens one with 'snodod connect --view NAME', or over HTTP at
http.path/@NAME.

Flags:
`)
	fs, _ := viewsFlags()
	fs.SetOutput(w)
	fs.PrintDefaults()
}

func viewsFlags() (*flag.FlagSet, *clientOptions) {
	o := &clientOptions{}
	fs := newFlagSet("views")
	fs.BoolVar(&o.json, "json", false, "print JSON instead of a table")
	addClientFlags(fs, o)
	return fs, o
}

func runViews(args []string) int {
	fs, o := viewsFlags()
	if status, done := parseFlags(fs, args, viewsUsage); done {
		return status
	}
	st, status := daemonStatus("views", o)
	if st == nil {
		return status
	}
	if o.json {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		views := st.Views
		if views == nil {
			views = []control.View{}
		}
		if err := enc.Encode(views); err != nil {
			return exitFailure
		}
		return exitOK
	}
	writeViews(os.Stdout, st.Views)
	return exitOK
}

// writeViews prints the views table.
func writeViews(w io.Writer, views []control.View) {
	if len(views) == 0 {
		fmt.Fprintln(w, "no views are configured ([views.NAME], docs/views.md)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "VIEW\tSERVERS\tTOOLS\tRESOURCES\tPROMPTS\tSESSIONS\tALLOWED UIDS")
	for _, v := range views {
		uids := "-"
		if len(v.AllowedUIDs) > 0 {
			s := make([]string, len(v.AllowedUIDs))
			for i, u := range v.AllowedUIDs {
				s[i] = strconv.Itoa(u)
			}
			uids = strings.Join(s, ",")
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%s\n", v.Name, v.Servers, v.Tools, v.Resources, v.Prompts, v.Sessions, uids)
	}
	tw.Flush()
}
