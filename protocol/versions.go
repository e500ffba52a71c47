package protocol

import "errors"

// The protocol versions snodod speaks (docs/protocol.md §1). Version2026 is the
// 2026 era; the other two are the legacy era.
const (
	Version2026     = "2026-07-28"
	Version20251125 = "2025-11-25"
	Version20250618 = "2025-06-18"
)

// The reserved _meta member names of docs/protocol.md §5.1 (requests) and §5.3,
// §9.2 (results and listen streams).
const (
	MetaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	MetaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	MetaClientInfo         = "io.modelcontextprotocol/clientInfo"
	MetaLogLevel           = "io.modelcontextprotocol/logLevel"
	MetaServerInfo         = "io.modelcontextprotocol/serverInfo"
	MetaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
)

// versionOrder is the fixed preference order, newest first (docs/protocol.md
// §1.1). Bit i of Versions.mask enables versionOrder[i]; index 0 is the only
// 2026-era version.
var versionOrder = [...]string{Version2026, Version20251125, Version20250618}

const modernMask = 1 << 0

// Versions is a set of enabled protocol versions (docs/protocol.md §1.1), always
// reported newest first whatever order it was configured in. The zero value
// enables nothing; use ParseVersions. Versions is a small comparable value.
type Versions struct {
	mask uint8
}

var errProtocolVersions = errors.New("protocol_versions may list only 2026-07-28, 2025-11-25 and 2025-06-18, each once")

// ParseVersions validates the configured protocol_versions list
// (docs/transport.md §15): any order, each of the three versions at most once.
// An empty or nil list enables all three. Anything else (an unknown or
// repeated version) is refused with the exact configuration message.
func ParseVersions(list []string) (Versions, error) {
	if len(list) == 0 {
		return Versions{mask: 1<<len(versionOrder) - 1}, nil
	}
	var v Versions
	for _, s := range list {
		bit := versionBit(s)
		if bit == 0 || v.mask&bit != 0 {
			return Versions{}, errProtocolVersions
		}
		v.mask |= bit
	}
	return v, nil
}

// versionBit returns the mask bit of a known version, or 0.
func versionBit(version string) uint8 {
	for i, known := range versionOrder {
		if version == known {
			return 1 << i
		}
	}
	return 0
}

// pick returns the enabled versions among those whose bits are in mask,
// newest first, as a fresh non-nil slice.
func (v Versions) pick(mask uint8) []string {
	out := make([]string, 0, len(versionOrder))
	for i, version := range versionOrder {
		if v.mask&mask&(1<<i) != 0 {
			out = append(out, version)
		}
	}
	return out
}

// All returns every enabled version, newest first, as a fresh slice (never
// nil). It is server/discover's supportedVersions (docs/protocol.md §5.4).
func (v Versions) All() []string { return v.pick(0xFF) }

// Modern returns the enabled 2026-era versions: ["2026-07-28"] or an empty,
// non-nil slice, so that it encodes as [] in the "supported" data of -32022
// (docs/protocol.md §5.2 step 7) and of a refused initialize (§1.3).
func (v Versions) Modern() []string { return v.pick(modernMask) }

// Legacy returns the enabled legacy versions, newest first, as a fresh slice
// (never nil).
func (v Versions) Legacy() []string { return v.pick(^uint8(modernMask)) }

// Enabled reports whether version is one of the enabled versions.
func (v Versions) Enabled(version string) bool {
	bit := versionBit(version)
	return bit != 0 && v.mask&bit != 0
}

// Negotiate answers a legacy initialize's proposal (docs/protocol.md §2 step 2):
// an enabled legacy version is echoed; anything else (an unknown version, a
// disabled one, or 2026-07-28, which is never negotiated) gets the newest
// enabled legacy version. ok is false when no legacy version is enabled; the
// caller then answers -32600 "No configured protocol dialect recognized the
// request" (§1.3).
func (v Versions) Negotiate(proposed string) (version string, ok bool) {
	if bit := versionBit(proposed); bit != modernMask && bit != 0 && v.mask&bit != 0 {
		return proposed, true
	}
	for i := 1; i < len(versionOrder); i++ {
		if v.mask&(1<<i) != 0 {
			return versionOrder[i], true
		}
	}
	return "", false
}
