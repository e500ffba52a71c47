package protocol

import (
	"bytes"
	"encoding/binary"
)

// Duplicate member names: how the scanner tells that an object already had
// a name.

// nameRef locates a member name: in the scanned text when it held no escape,
// else unescaped in the scanner's arena.
type nameRef struct {
	start, end int
	inArena    bool
	key        uint64 // nameKey, once add has it
}

// nameKey is a cheap key of a member name: its length and its first six
// bytes (fewer when shorter). Equal names have equal keys. name is in buf,
// which usually holds eight bytes from its start (a name is followed by at
// least its quote and a colon): one load then.
func nameKey(buf, name []byte, start int) uint64 {
	n := min(len(name), 6)
	k := uint64(len(name)) << 48
	if start >= 0 && start+8 <= len(buf) {
		return k | binary.LittleEndian.Uint64(buf[start:start+8])&(1<<(8*n)-1)
	}
	for i := range n {
		k |= uint64(name[i]) << (8 * i)
	}
	return k
}

// nameSet holds the member names of one open object, for duplicate
// detection. Up to linearNames names live on the scanner's shared stacks
// (s.names from namesStart, unescaped ones in s.arena from arenaStart) and
// are compared linearly; past that they move to a map so that a
// 100,000-member object is not quadratic.
type nameSet struct {
	namesStart, arenaStart int
	set                    map[string]struct{}
	// seen has a bit set for each name's key (by nameKey): a name whose
	// bit is clear is new without comparing it to the others.
	seen uint64
}

// add records the name ref (the last one scanned, so the last in the arena
// if there; name is its text) and reports false if the object already had
// it. Names are compared by a key of their length and first bytes first.
func (s *scanner) add(n *nameSet, ref nameRef, name []byte) bool {
	if n.set != nil {
		if _, dup := n.set[string(name)]; dup {
			return false
		}
		n.set[string(name)] = struct{}{}
		s.arena = s.arena[:n.arenaStart]
		return true
	}
	if ref.inArena {
		ref.key = nameKey(nil, name, -1)
	} else {
		ref.key = nameKey(s.data, name, ref.start)
	}
	bit := uint64(1) << ((ref.key * 0x9E3779B97F4A7C15) >> 58)
	if n.seen&bit != 0 {
		for _, other := range s.names[n.namesStart:] {
			if other.key == ref.key && bytes.Equal(s.name(other), name) {
				return false
			}
		}
	}
	n.seen |= bit
	if s.names = append(s.names, ref); len(s.names)-n.namesStart > linearNames {
		n.set = make(map[string]struct{}, 4*linearNames)
		for _, other := range s.names[n.namesStart:] {
			n.set[string(s.name(other))] = struct{}{}
		}
		s.names, s.arena = s.names[:n.namesStart], s.arena[:n.arenaStart]
	}
	return true
}

func (s *scanner) name(ref nameRef) []byte {
	if ref.inArena {
		return s.arena[ref.start:ref.end]
	}
	return s.data[ref.start:ref.end]
}
