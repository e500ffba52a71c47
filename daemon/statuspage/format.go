package statuspage

import (
	"fmt"
	"net/url"
	"time"
)

// age is how long ago t was, coarse enough that a table row does not
// change at every tick once it is a minute old: 42s, 7m, 3h12m, 2d4h.
func age(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := now.Sub(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		return fmt.Sprintf("%dh%dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

// humanBytes writes n bytes in binary units: 512 B, 12.3 MiB.
func humanBytes(n int64) string {
	if n <= 0 {
		return ""
	}
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// millis writes d in milliseconds, to three significant figures.
func millis(d time.Duration) string {
	ms := float64(d) / float64(time.Millisecond)
	switch {
	case ms == 0:
		return "0 ms"
	case ms < 10:
		return fmt.Sprintf("%.2f ms", ms)
	case ms < 100:
		return fmt.Sprintf("%.1f ms", ms)
	}
	return fmt.Sprintf("%.0f ms", ms)
}

// pathEscape makes s one segment of a URL path.
func pathEscape(s string) string { return url.PathEscape(s) }

// cpuSeconds writes CPU milliseconds as seconds: 1.25 s.
func cpuSeconds(ms int64) string { return fmt.Sprintf("%.2f s", float64(ms)/1000) }
