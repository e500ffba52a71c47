package executor

// linkedList is an intrusive doubly-linked list of *T: an element carries
// one link field per list it may be on (a job its place in its
// connection's queue and in the running list, a connection its place in
// the ready list), so putting it on a list or taking it off never
// allocates, and unlinking is O(1) without a search. The zero linkedList
// is empty. A linkedList and the links on it are not safe for concurrent
// use: the executor's lists are guarded by Executor.mu.
type linkedList[T any] struct {
	head, tail *link[T]
}

// link is an element's place on one list. elem points back to the element
// that holds it; the list sets it when the link is put on.
type link[T any] struct {
	next, prev *link[T]
	elem       *T
}

// front returns the first element, nil when l is empty.
func (l *linkedList[T]) front() *T {
	if l.head == nil {
		return nil
	}
	return l.head.elem
}

// contains reports whether n is on l (n may be on no list at all).
func (l *linkedList[T]) contains(n *link[T]) bool {
	return n.prev != nil || l.head == n
}

// pushBack puts n, the link of elem, at the end of l. n must be on no list.
func (l *linkedList[T]) pushBack(n *link[T], elem *T) {
	l.insertAfter(l.tail, n, elem)
}

// insertAfter puts n, the link of elem, on l right after at, or first when
// at is nil. at must be on l, n on no list.
func (l *linkedList[T]) insertAfter(at, n *link[T], elem *T) {
	n.elem, n.prev = elem, at
	if at == nil {
		n.next, l.head = l.head, n
	} else {
		n.next, at.next = at.next, n
	}
	if n.next == nil {
		l.tail = n
	} else {
		n.next.prev = n
	}
}

// remove takes n off l. n must be on l.
func (l *linkedList[T]) remove(n *link[T]) {
	if n.prev == nil {
		l.head = n.next
	} else {
		n.prev.next = n.next
	}
	if n.next == nil {
		l.tail = n.prev
	} else {
		n.next.prev = n.prev
	}
	n.next, n.prev = nil, nil
}
